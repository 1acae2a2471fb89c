"""Following OpenCode's older ``storage/`` JSON folder live.

Before its SQLite database, OpenCode kept one JSON file an object:
``storage/message/<ses>/<msg>.json`` and ``storage/part/<msg>/<prt>.json``,
each rewritten in place as it goes on (a tool part ``running`` →
``completed``; a message gets its ``time.completed`` or its ``error``).
Each such file is followed as a file of its own; when one changes it is read
whole and handed to the folder's one :class:`~monitor.formats.opencode.PartReader`,
which hands on only what is new in a part (its call, then its result).

A message file read reads its parts too, in their order, then the message's
own error: a folder met at start-up is walked message folders first (in
name order, :meth:`~monitor.sources.paths.WatchSpec.existing`), so its
sessions are read in the order ``scan`` reads them, and each part file found
after is read already.  The line of a part is its place in its session, as
``scan`` counts it (:func:`~monitor.formats.opencode.layout`), kept per
session and counted again when a new part appears.

The position stored for a restart is, per file, the stages already handed on
of the parts it read (and whether its message's error was): a restarted
watcher takes them up and hands on only what came since.  Started "from the
end" (or on a file older than the recent window), what a file holds already
is taken as read.  A ``storage/`` folder beside an ``opencode.db`` is not read
(the database replaced it; ``scan`` does the same).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats import opencode
from monitor.formats.base import Problem
from monitor.sources import Sink
from monitor.sources.paths import is_storage_file
from monitor.sources.resume import KnownPositions, path_key
from monitor.sources.tailed import TailedFile

#: A file left invalid for this long is reported (one caught as OpenCode rewrites it is read again).
SETTLE_SECONDS = 2.0
#: Sessions whose part places are kept per folder (the oldest are counted again when needed).
MAX_SESSIONS = 1000


def storage_of(path: str) -> tuple[Path, str] | None:
    """The ``storage/`` folder and the kind ("message" or "part") of one of its object files."""
    if not is_storage_file(path):
        return None
    parts = Path(path).parts
    return Path(*parts[:-3]), parts[-3]


@dataclass
class _Folder:
    reader: opencode.PartReader
    #: Place in its session of each part (by session, then part id).
    places: dict[str, dict[str, int]] = field(default_factory=dict)
    replaced: bool = False  # an opencode.db beside it: not read


class StorageFollower:
    """Reads the ``storage/`` files a :class:`~monitor.sources.files.FileSource` follows."""

    def __init__(
        self,
        sink: Sink,
        known: KnownPositions | None = None,
        again: Callable[[str, bool], None] = lambda path, wake: None,
    ):
        self.sink = sink
        self.again = again
        self.known = known or KnownPositions()
        self.keeps_positions = bool(getattr(sink, "keeps_positions", False))
        self._folders: dict[Path, _Folder] = {}
        self.bytes_read = 0

    def _folder(self, root: Path) -> _Folder:
        folder = self._folders.get(root)
        if folder is None:
            folder = self._folders[root] = _Folder(opencode.PartReader(str(root)))
            folder.replaced = (root.parent / "opencode.db").exists()
            folder.reader.sessions.update(opencode.session_files(root))
            # Where a previous watcher stopped, for every file of the folder at once: a message file
            # reads its parts, which may each have been read on their own before.
            prefix = path_key(str(root)) + os.sep
            for record in self.known.by_ident.values():
                if str(record.get("path", "")).startswith(prefix):
                    _take_up(folder.reader, record)
        return folder

    def _place(self, folder: _Folder, root: Path, session: str, part_id: str) -> int:
        places = folder.places.get(session)
        if places is None or part_id not in places:
            places, line = {}, 0
            for _message, part_files in opencode.layout(root, session):
                for part_file in part_files:
                    line += 1
                    places[part_file.stem] = line
            folder.places.pop(session, None)
            folder.places[session] = places
            while len(folder.places) > MAX_SESSIONS:
                folder.places.pop(next(iter(folder.places)))
        return places.get(part_id, 0)

    async def read(self, tf: TailedFile, st: os.stat_result) -> None:
        """Read ``tf`` (a message or part file) again and hand on what is new."""
        tf.mtime_ns, tf.offset = st.st_mtime_ns, st.st_size
        where = storage_of(tf.path)
        if where is None:
            return
        root, kind = where
        folder = self._folder(root)
        if folder.replaced:
            return
        self.bytes_read += st.st_size
        reader = folder.reader
        tf.resume = None  # (taken up with the folder's others)
        problems: list[Problem] = []
        source = str(root)
        value = opencode.read_json(Path(tf.path), problems, source)
        if value is None:
            if st.st_mtime > time.time() - SETTLE_SECONDS:
                tf.mtime_ns = -1  # perhaps caught as OpenCode rewrites it: read again, said once left so
                self.again(tf.path, False)
                return
            await self.sink.submit([], problems)
            return
        quiet, tf.align = tf.align == "back", ""
        if kind == "message":
            session = Path(tf.path).parent.name
            events, read = self._message(folder, root, Path(tf.path), value, session, problems)
        else:
            events, read, session = self._part(folder, root, Path(tf.path), value, problems)
        if quiet:  # already there when watching began: taken as read
            if any(e.kind is Kind.SESSION_START for e in events):
                reader.started.discard(session)
            events = []
        position = self._position(tf, reader, session, read)
        if events or problems or position is not None:
            problems = [Problem(source, p.line, p.reason) for p in problems]
            if position is not None:
                await self.sink.submit(events, problems, position=position)  # type: ignore[call-arg]
            else:
                await self.sink.submit(events, problems)

    def _message(
        self,
        folder: _Folder,
        root: Path,
        path: Path,
        message: dict[str, Any],
        session: str,
        problems: list[Problem],
    ) -> tuple[list[Event], list[str]]:
        """A message and its parts, in order, then its own error."""
        source = str(root)
        _know(folder.reader, root, session)
        events: list[Event] = []
        read: list[str] = []
        line = 0
        parts = root / "part" / path.stem
        for part_file in sorted(parts.glob("*.json")) if parts.is_dir() else ():
            line = self._place(folder, root, session, part_file.stem)
            part = opencode.read_json(part_file, problems, source)
            if part is None:
                continue
            read.append(part_file.stem)
            new, bad = folder.reader.read(opencode.storage_row(part, message, part_file, session, line))
            events.extend(new)
            problems.extend(bad)
        if line == 0:  # (a message with no part: after the parts of the messages before it)
            line = sum(len(p) for m, p in opencode.layout(root, session) if m.stem < path.stem)
        ts = opencode.message_time(message)
        events.extend(folder.reader.message_error(session, path.stem, message, line, ts))
        read.append(f"msg:{path.stem}")
        return events, read

    def _part(
        self, folder: _Folder, root: Path, path: Path, part: dict[str, Any], problems: list[Problem]
    ) -> tuple[list[Event], list[str], str]:
        source = str(root)
        session, message_id = part.get("sessionID"), path.parent.name
        if not isinstance(session, str) or not session or "/" in session or session in (".", ".."):
            problems.append(Problem(source, None, f"{path.name}: a part without its sessionID"))
            return [], [], ""
        message = opencode.read_json(root / "message" / session / f"{message_id}.json", [], source)
        if message is None:
            return [], [], session  # (read with its message once that is written)
        _know(folder.reader, root, session)
        line = self._place(folder, root, session, path.stem)
        events, bad = folder.reader.read(opencode.storage_row(part, message, path, session, line))
        problems.extend(bad)
        return events, [path.stem], session

    def _position(
        self, tf: TailedFile, reader: opencode.PartReader, session: str, read: list[str]
    ) -> dict[str, Any] | None:
        if not self.keeps_positions or not session:
            return None
        done = {
            name: sorted(reader.done.get(name, ()))
            for name in read
            if not name.startswith("msg:") and reader.done.get(name)
        }
        errors = [name[4:] for name in read if name.startswith("msg:") and name[4:] in reader.errors]
        mark = orjson.dumps({"session": session, "done": done, "errors": errors})
        return {
            "dev": tf.ident[0],
            "ino": tf.ident[1],
            "head_len": 0,
            "head": "",
            "path": path_key(tf.path),
            "offset": 0,
            "line": 1,
            "mark": mark,
        }


def _take_up(reader: opencode.PartReader, record: dict[str, Any]) -> None:
    """What a previous watcher handed on from this file (its stored mark)."""
    try:
        mark = orjson.loads(bytes(record.get("mark") or b"{}"))
    except orjson.JSONDecodeError:
        return
    if not isinstance(mark, dict):
        return
    if isinstance(mark.get("session"), str):
        reader.started.add(mark["session"])
    done = mark.get("done")
    for part, stages in done.items() if isinstance(done, dict) else ():
        if isinstance(stages, list):
            reader.done.setdefault(str(part), set()).update(str(s) for s in stages)
    errors = mark.get("errors")
    if isinstance(errors, list):
        reader.errors.update(str(e) for e in errors)


def _know(reader: opencode.PartReader, root: Path, session: str) -> None:
    """A session met for the first time: its title, folder and parent (its file may be newer than the
    folder's other sessions')."""
    if session not in reader.sessions:
        reader.sessions.update(opencode.session_files(root))
        reader.sessions.setdefault(session, {})


__all__ = ["StorageFollower", "storage_of"]
