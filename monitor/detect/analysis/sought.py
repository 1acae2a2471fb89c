"""What a search looks for, and where: the names in its pattern or query, its place.

``grep -rn "needs_extensions" tests/``, then ``grep -rn "verify_needs\\|needs_extensions"
tests/``, then ``grep -rn "needs_extensions\\|verify_needs" tests/``: three searches
for one name in one place.  When such searches keep finding nothing, the name is
not there (or not spelled so), and a reader calls the fourth try stuck, where
searches for *different* names finding nothing are exploring, and one name
looked for in one file after another is one search over many items
(docs/detectors.md, *Stale outcomes*).  A search's names are the words of at
least :data:`MIN_NAME` characters in its pattern or query argument, or, for a
shell command, in what it quotes; its place is the arguments that say where
(:data:`~monitor.detect.analysis.places.PLACE_KEYS`), or, for a shell command,
what it names unquoted that looks like a path (not the folder it ``cd``s to
first).  Two searches look in one place when a path of one is a path of the
other or inside it (``tests/`` and ``tests/test_config.py``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from monitor.detect.analysis.places import PLACE_KEYS
from monitor.detect.analysis.shell import shell_command
from monitor.events import Event
from monitor.text import canonical_args

#: A name is a word this long or longer (shorter ones are common to unrelated searches).
MIN_NAME = 5
#: Names kept from one search.
MAX_NAMES = 8
_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{{MIN_NAME - 1},}}")
_QUOTED = re.compile(r"'([^'\n]{1,200})'|\"([^\"\n]{1,200})\"")
#: Arguments that hold what a search tool looks for.
QUERY_KEYS = ("pattern", "query", "regex", "search", "q", "term")


#: A word of a shell command that names a place: a path (it holds a slash) or a file.
_PATH = re.compile(r"^[\w.~-]*/[\w./~-]*$|^[\w.-]+\.\w{1,8}$")
#: ``cd DIR &&`` (or ``;``) before a command: where it runs, not where it searches.
_CD = re.compile(r"(?:^|&&|;)\s*cd\s+\S+\s*(?:&&|;)")


class Sought(NamedTuple):
    """The names a search looks for (lower-cased) and where it looks (its paths)."""

    names: frozenset[str]
    place: frozenset[str]

    def same_place(self, other: Sought) -> bool:
        """Whether the two look in one place: a path of one is a path of the other or inside it."""
        for path in self.place:
            for other_path in other.place:
                if path == other_path or _inside(path, other_path) or _inside(other_path, path):
                    return True
        return self.place == other.place


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder if folder.endswith("/") else folder + "/")


NOTHING_SOUGHT = Sought(frozenset(), frozenset())


def sought(call: Event | None) -> Sought:
    """What ``call`` looks for and where; no names when it names none."""
    if call is None:
        return NOTHING_SOUGHT
    command = shell_command(call)
    if command:
        command = command[:2000]
        texts = [a or b for a, b in _QUOTED.findall(command)]
        words = _CD.sub(" ", _QUOTED.sub(" ", command)).split()
        place = frozenset(word for word in words if _PATH.match(word))
    elif isinstance(call.args, dict):
        texts = [value for key in QUERY_KEYS if isinstance(value := call.args.get(key), str)]
        place = frozenset(
            {canonical_args({key: value for key, value in call.args.items() if key in PLACE_KEYS})}
        )
    else:
        return NOTHING_SOUGHT
    names = {match.lower() for text in texts for match in _NAME.findall(text)}
    return Sought(frozenset(sorted(names)[:MAX_NAMES]), place)
