"""Following agents' SQLite databases live: OpenCode's ``opencode.db``, Goose's ``sessions.db``.

The agent writes its database while ``watch`` reads it, so it is opened
read-only, for one short poll at a time (:func:`~monitor.formats.sqlite_db.open_readonly`:
no write transaction, no transaction held between polls).  New rows are
found by their ids: Goose's ``messages.id``, OpenCode's ``part`` ``rowid``
past the last one read.  An OpenCode part is updated in place as it goes on
(a tool runs, then completes), so the parts not finished yet are kept by
rowid and read again on each poll until they are; each part's events are
handed on once (:class:`~monitor.formats.opencode.PartReader`).

A WAL database's writes land in its ``-wal`` file, not in the database, so a
change is seen in either file's size or time; the file source calls
:meth:`DatabaseFollower.read` on every poll (a second by default).  The
position stored for a restart is the next id and the parts still going on,
under the database's identity; a restarted ``watch`` reads only rows written
since.  From the end (``--from-end``) nothing already there is read; by
default (recent) rows written in the last minutes; ``--from-start`` all.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event
from monitor.formats import goose, opencode
from monitor.formats.base import Problem
from monitor.formats.sqlite_db import DatabaseError, describe, open_readonly
from monitor.sources import Sink
from monitor.sources.paths import StartPolicy
from monitor.sources.reporting import submit_new
from monitor.sources.resume import path_key
from monitor.sources.tailed import TailedFile

#: Batches of rows read in one poll (the rest is read on the next one).
BATCHES_PER_POLL = 10
#: Unfinished OpenCode parts kept to read again (the oldest are let go), and stored for a restart.
MAX_PENDING = 5000
STORED_PENDING = 500

_Signature = tuple[int, int, int, int]


def is_database_name(path: str) -> bool:
    """A file named as an agent's database is (``*.db``, ``*.sqlite``): never tailed as lines."""
    return path.endswith((".db", ".sqlite", ".sqlite3"))


@dataclass
class _Database:
    kind: str | None
    reader: Any = None
    cursor: int = -1  # the last id read (-1: where to start is not known yet)
    #: OpenCode parts still going on: rowid → part id.
    pending: dict[int, str] = field(default_factory=dict)
    signature: _Signature | None = None
    more: bool = False
    #: Taken up from a stored position at this id: sessions with rows up to it were started before.
    resumed_at: int | None = None
    reported: set[tuple[int | None, str]] = field(default_factory=set)


def _signature(path: str) -> _Signature:
    """Sizes and times of the database and its ``-wal``: any write changes one of them."""
    out = []
    for name in (path, f"{path}-wal"):
        try:
            st = os.stat(name)
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [-1, -1]
    return (out[0], out[1], out[2], out[3])


class DatabaseFollower:
    """Polls the agents' databases a :class:`~monitor.sources.files.FileSource` follows."""

    def __init__(self, sink: Sink, policy: StartPolicy, clock: Callable[[], float] = time.time):
        self.sink = sink
        self.policy = policy
        self.clock = clock
        self.keeps_positions = bool(getattr(sink, "keeps_positions", False))
        self._states: dict[tuple[int, int], _Database] = {}
        self._files: dict[tuple[int, int], TailedFile] = {}
        self.bytes_read = 0

    def followed(self) -> list[TailedFile]:
        return list(self._files.values())

    def forget(self, tf: TailedFile) -> None:
        self._states.pop(tf.ident, None)
        self._files.pop(tf.ident, None)

    async def read(self, tf: TailedFile, kind: str | None) -> None:
        """Read what is new in ``tf``'s database (nothing when neither file changed)."""
        state = self._states.get(tf.ident)
        if state is None:
            state = self._states[tf.ident] = self._first_state(tf, kind)
            self._files[tf.ident] = tf
        if state.kind is None:
            tf.mtime_ns, tf.offset = -2, -2  # (never read again)
            await self._report(state, [Problem(tf.path, None, "not an OpenCode or Goose database: not read")])
            return
        signature = _signature(tf.path)
        if signature == state.signature and not state.more:
            return
        state.signature = signature
        tf.offset, tf.mtime_ns = signature[0], signature[1]
        events, problems, moved = await asyncio.to_thread(self._poll, tf, state)
        self.bytes_read += max(signature[0], 0) + max(signature[2], 0)
        position = self._position(tf, state) if moved else None
        await self._report(state, problems, events, position)

    def _first_state(self, tf: TailedFile, kind: str | None) -> _Database:
        reader = opencode.PartReader(tf.path) if kind == "opencode" else goose.MessageReader(tf.path)
        state = _Database(kind, reader)
        record, tf.resume = tf.resume, None
        if record is not None and record.get("line") is not None:
            state.cursor = state.resumed_at = int(record["line"]) - 1
            try:
                stored = orjson.loads(bytes(record.get("mark") or b"[]"))
            except orjson.JSONDecodeError:
                stored = []
            for item in stored if isinstance(stored, list) else ():
                if isinstance(item, list) and len(item) == 3 and isinstance(item[0], int):
                    state.pending[item[0]] = str(item[1])
                    if isinstance(reader, opencode.PartReader):
                        reader.done[str(item[1])] = {str(s) for s in item[2]}
        return state

    def _start_cursor(self, connection: sqlite3.Connection, tf: TailedFile, state: _Database) -> int:
        """Where a database met for the first time is read from (the start policy)."""
        table, column, scale = ("part", "rowid", 1000) if state.kind == "opencode" else ("messages", "id", 1)
        if tf.align == "back" or self.policy.mode == "end":
            tf.align = ""
            row = connection.execute(f"SELECT max({column}) FROM {table}").fetchone()  # noqa: S608 (constants)
            return int(row[0] or 0)
        if self.policy.mode == "start":
            return 0
        since = (self.clock() - self.policy.recent_seconds) * scale
        when = "time_created" if state.kind == "opencode" else "created_timestamp"
        query = f"SELECT min({column}) FROM {table} WHERE {when} >= ?"  # noqa: S608 (constants)
        first = connection.execute(query, (since,)).fetchone()[0]
        if first is None:
            return int(connection.execute(f"SELECT max({column}) FROM {table}").fetchone()[0] or 0)  # noqa: S608
        return int(first) - 1

    def _poll(self, tf: TailedFile, state: _Database) -> tuple[list[Event], list[Problem], bool]:
        """One poll (in a worker thread): the new events, the problems, and whether the position moved."""
        try:
            connection = open_readonly(Path(tf.path))
        except DatabaseError as exc:
            return [], [Problem(tf.path, None, str(exc))], False
        events: list[Event] = []
        problems: list[Problem] = []
        before = (state.cursor, len(state.pending))
        try:
            if state.cursor < 0:
                state.cursor = self._start_cursor(connection, tf, state)
            if state.kind == "opencode":
                self._opencode(connection, state, events, problems)
            else:
                self._goose(connection, state, events, problems)
            state.reported.clear()
        except sqlite3.Error as exc:
            problems.append(Problem(tf.path, None, describe(exc)))
            state.signature = None  # (try again on the next poll)
        finally:
            connection.close()
        return events, problems, (state.cursor, len(state.pending)) != before or bool(events)

    def _started_before(self, connection: sqlite3.Connection, state: _Database, sessions: set[str]) -> None:
        """After a restart: the sessions already begun before the stored position get no second start."""
        if state.resumed_at is None:
            return
        table, column = ("part", "rowid") if state.kind == "opencode" else ("messages", "id")
        query = f"SELECT 1 FROM {table} WHERE session_id = ? AND {column} <= ? LIMIT 1"  # noqa: S608 (constants)
        for session in sessions - state.reader.started:
            if connection.execute(query, (session, state.resumed_at)).fetchone() is not None:
                state.reader.started.add(session)

    def _opencode(
        self, connection: sqlite3.Connection, state: _Database, events: list[Event], problems: list[Problem]
    ) -> None:
        reader: opencode.PartReader = state.reader
        if state.pending:
            again = opencode.read_lines(connection, reader, sorted(state.pending))
            self._started_before(connection, state, {row.session for row in again})
            for row in again:
                new, bad = reader.read(row)
                events.extend(new)
                problems.extend(bad)
                if opencode.error_text(row.message) is not None:
                    # (the message failed while this part went on: its error, read fresh)
                    ts = (row.created_ms or 0) / 1000.0
                    events.extend(
                        reader.message_error(row.session, row.message_id, row.message, row.line, ts)
                    )
                if reader.finished(row.part_id) or bad:
                    state.pending.pop(row.line, None)
        state.more = False
        for _ in range(BATCHES_PER_POLL):
            found, state.cursor = opencode.read_after(connection, reader, state.cursor)
            self._started_before(connection, state, {row.session for row in found})
            for row in found:
                new, bad = reader.read_in_order(row)
                events.extend(new)
                problems.extend(bad)
                if not bad and not reader.finished(row.part_id):
                    state.pending[row.line] = row.part_id
            if len(found) < opencode.BATCH:
                break
        else:
            state.more = True
        if not state.more:
            events.extend(reader.flush())
        while len(state.pending) > MAX_PENDING:
            state.pending.pop(next(iter(state.pending)))

    def _goose(
        self, connection: sqlite3.Connection, state: _Database, events: list[Event], problems: list[Problem]
    ) -> None:
        state.more = False
        for _ in range(BATCHES_PER_POLL):
            found, state.cursor = goose.read_after(connection, state.reader, state.cursor)
            self._started_before(connection, state, {str(row[1]) for row in found})
            for row in found:
                new, bad = state.reader.read(row)
                events.extend(new)
                problems.extend(bad)
            if len(found) < goose.BATCH:
                break
        else:
            state.more = True

    def _position(self, tf: TailedFile, state: _Database) -> dict[str, Any] | None:
        if not self.keeps_positions or state.cursor < 0:
            return None
        reader = state.reader
        kept = list(state.pending.items())[-STORED_PENDING:]
        done = reader.done if isinstance(reader, opencode.PartReader) else {}
        mark = orjson.dumps([[line, part, sorted(done.get(part, ()))] for line, part in kept])
        return {
            "dev": tf.ident[0],
            "ino": tf.ident[1],
            "head_len": 0,
            "head": "",
            "path": path_key(tf.path),
            "offset": 0,
            "line": state.cursor + 1,
            "mark": mark,
        }

    async def _report(
        self,
        state: _Database,
        problems: list[Problem],
        events: list[Event] | None = None,
        where_read: dict[str, Any] | None = None,
    ) -> None:
        await submit_new(self.sink, state.reported, problems, events, where_read)
