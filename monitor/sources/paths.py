"""What ``loopwatch watch PATH...`` names, and where reading starts.

A path is a file (which may appear later), a directory (watched recursively
for ``*.jsonl`` / ``*.ndjson`` and the documents in :data:`DOCUMENT_SUFFIXES`
and OpenHands ``event-*.json`` files, also ``.gz`` / ``.zst`` compressed, never loopwatch's own
``*.inbox.jsonl``; a directory's files in name order) or a
glob (``*`` and ``?`` stay within one path component, ``**`` crosses them).
:class:`StartPolicy` decides where files that already exist are read from.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from monitor.formats.compressed import plain_name
from monitor.paths import INBOX_SUFFIX

LOG_SUFFIXES = (".jsonl", ".ndjson")
#: Documents a watched directory yields too (read whole on change, see :mod:`monitor.sources.documents`).
DOCUMENT_SUFFIXES = (
    ".traj",
    ".traj.json",
    ".aider.chat.history.md",
    "/api_conversation_history.json",
    "/ui_messages.json",  # (beside it: Cline's asks, monitor/formats/cline_asks.py)
    "/opencode.db",  # OpenCode's and Goose's SQLite databases (polled, see monitor/sources/databases.py)
    "/sessions.db",
)


@dataclass(frozen=True)
class StartPolicy:
    """Where to start reading files that exist when watching begins.

    ``mode`` is ``"recent"`` (default), ``"start"`` or ``"end"``.  In
    ``recent`` mode a file modified within ``recent_seconds`` is replayed
    (from the first line boundary of its last ``tail_bytes``); others start at
    their end.  Files that appear later are always read from their start.
    """

    mode: str = "recent"
    recent_seconds: float = 15 * 60.0
    tail_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.mode not in ("recent", "start", "end"):
            raise ValueError(f"start mode must be recent, start or end, not {self.mode!r}")

    def describe(self) -> str:
        if self.mode == "start":
            return "existing content replayed from the start"
        if self.mode == "end":
            return "only new lines are read"
        return (
            f"files modified in the last {self.recent_seconds / 60:g} min replayed "
            f"(last {self.tail_bytes // (1024 * 1024)} MiB at most), others from their end"
        )


# -- what to watch -----------------------------------------------------------------------


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A full-path regex for a glob: ``*`` and ``?`` stay in one component, ``**`` crosses them."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            j = i + 1
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            if j < 0:
                out.append(re.escape("["))
                i += 1
            else:
                inner = pattern[i + 1 : j].replace("\\", "\\\\")
                if inner.startswith("!"):
                    inner = "^" + inner[1:]
                out.append(f"[{inner}]")
                i = j + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def is_log_name(name: str) -> bool:
    """True for the file names a watched directory yields (compressed ones too:
    ``run.jsonl.gz``, ``run.ndjson.zst``, ``run.traj.json.gz``)."""
    name = plain_name(name)
    if name.endswith(DOCUMENT_SUFFIXES) or f"/{name}".endswith(DOCUMENT_SUFFIXES):
        return True
    if name.startswith("event-") and name.endswith(".json") and name[6:7].isdigit():
        return True  # one event of an OpenHands V1 conversation (events/event-00012-<id>.json)
    if name.startswith("trajectory_") and name.endswith(".json") and name[11:12].isdigit():
        return True  # a Trae Agent trajectory (trajectories/trajectory_20260118_211615.json)
    return name.endswith(LOG_SUFFIXES) and not name.endswith(INBOX_SUFFIX)


def is_storage_file(path: str) -> bool:
    """True for a message or part file of OpenCode's older ``storage/`` folder
    (``storage/message/<ses>/<msg>.json``, ``storage/part/<msg>/<prt>.json``)."""
    parts = Path(path).parts
    return (
        len(parts) >= 4
        and parts[-4] == "storage"
        and parts[-3] in ("message", "part")
        and parts[-1].endswith(".json")
    )


@dataclass(frozen=True)
class WatchSpec:
    """One ``PATH`` argument: a file, a directory or a glob."""

    raw: str
    kind: str  # "file" | "dir" | "glob"
    path: str  # absolute: the file, the directory, or the glob pattern
    root: str  # the directory the change watcher watches
    recursive: bool
    regex: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, raw: str, *, directory: bool | None = None) -> WatchSpec:
        """``directory=True`` says a path that does not exist yet is a directory."""
        path = os.path.abspath(os.path.expanduser(raw))
        if os.path.isdir(path):
            return cls(raw, "dir", path, path, True)
        if os.path.exists(path) or not glob.has_magic(path):
            if directory or (directory is None and not os.path.exists(path) and not Path(path).suffix):
                return cls(raw, "dir", path, path, True)
            return cls(raw, "file", path, os.path.dirname(path), False)
        parts = path.split(os.sep)
        fixed: list[str] = []
        for part in parts:
            if glob.has_magic(part):
                break
            fixed.append(part)
        root = os.sep.join(fixed) or os.sep
        # Magic before the last component (or **) means changes can come from below the root.
        recursive = "**" in path or len(fixed) < len(parts) - 1
        return cls(raw, "glob", path, root, recursive, _glob_regex(path))

    def matches(self, path: str) -> bool:
        if self.kind == "file":
            return path == self.path
        if self.kind == "dir":
            return path.startswith(self.path + os.sep) and (
                is_log_name(os.path.basename(path)) or is_storage_file(path)
            )
        assert self.regex is not None
        return not path.endswith(INBOX_SUFFIX) and self.regex.match(path) is not None

    def existing(self) -> Iterator[str]:
        """The files this spec names right now."""
        if self.kind == "file":
            if os.path.isfile(self.path):
                yield self.path
        elif self.kind == "dir":
            for dirpath, dirs, files in os.walk(self.path):
                dirs.sort()  # (OpenCode's storage/: message folders first, each session in its order)
                for name in sorted(files):  # (an OpenHands conversation's events, in their order)
                    path = os.path.join(dirpath, name)
                    if is_log_name(name) or is_storage_file(path):
                        yield path
        else:
            for path in glob.iglob(self.path, recursive=True):
                if not path.endswith(INBOX_SUFFIX) and os.path.isfile(path):
                    yield os.path.abspath(path)


def is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


__all__ = [
    "INBOX_SUFFIX",
    "LOG_SUFFIXES",
    "StartPolicy",
    "WatchSpec",
    "is_log_name",
    "is_storage_file",
    "is_under",
]
