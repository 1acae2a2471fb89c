"""Where a search tool looks: its arguments that name a directory, files or a glob.

``grep_search(pattern="parse_expression", glob="sphinx/domains/cpp.py")`` then
``grep_search(pattern="Expression", glob="sphinx/domains/cpp.py")`` are two
searches of one file.  Misses for different things in *one file*, again and
again, say the file (or the tool's way of naming it) is wrong, not that the
things are missing (docs/detectors.md, *Stale outcomes*).  Only tool calls that
name one file in their arguments have a place: a directory or a glob over many
files is where exploring happens (different names looked for there, each
missing, is learning what is not there); a shell command, or a search that
names only its query (a web search), has none -- unless its answer names the one
file it searched (SWE-agent's ``search_file``: "No matches found for "x" in
/repo/a.py", the file being the one open): :func:`place_answered`.
"""

from __future__ import annotations

import re

from monitor.events import Event
from monitor.text import canonical_args

#: A path or glob that names one file: no wildcard, a name with an extension at its end.
_ONE_FILE = re.compile(r"^[^*?\[\]{}]*[^/*?]\.\w{1,8}$")
#: Arguments that say where a search looks.
PLACE_KEYS = frozenset(
    {"path", "paths", "dirPath", "dir_path", "directory", "dir", "glob", "include", "file", "file_path",
     "filePath", "files", "root", "cwd", "type", "fileType", "file_type"}
)  # fmt: skip


def place_of(call: Event | None) -> str | None:
    """The place ``call`` searches (its arguments that say where) when one of
    them names a single file, else ``None``."""
    if call is None or not call.args or not isinstance(call.args, dict):
        return None
    # Only where it looks: how it shows what it finds (context lines, a
    # limit, an output mode) changes nothing about the place.
    place = {key: value for key, value in call.args.items() if key in PLACE_KEYS}
    if not any(isinstance(value, str) and _ONE_FILE.search(value) for value in place.values()):
        return None  # a directory or a pattern of files: looking for different things there is exploring
    return f"{call.tool}:{canonical_args(place)}"


#: The one file an answer says it searched: "… in /repo/a/b.py" ending its first line.
_ANSWERED_IN = re.compile(r"\bin (\S+)\s*$")


def place_answered(call: Event | None, answer: str) -> str | None:
    """The place a search searched, by its arguments (:func:`place_of`) or, when they
    name none, by its answer's first line ending "in <one file>"."""
    place = place_of(call)
    if place is not None or call is None:
        return place
    first = answer[:300].split("\n", 1)[0]
    found = _ANSWERED_IN.search(first)
    if found is None or not _ONE_FILE.search(found.group(1)):
        return None
    return f"{call.tool}:{found.group(1)}"
