"""Agents' SQLite databases, opened read-only and never locked against their writer.

OpenCode (``opencode.db``) and Goose (``sessions.db``) keep their sessions in
SQLite, written while loopwatch reads them.  :func:`open_readonly` opens one
with the ``mode=ro`` URI: no write transaction is ever begun, so the agent is
never blocked.  Both agents use WAL journaling: a reader of a WAL database
reads the ``-wal`` file too and needs the ``-shm`` index beside it, which
SQLite creates if the folder is writable (that is not a write to the
database).  Where it cannot (a read-only copy of a WAL database without its
``-shm``), and no ``-wal`` holds unmerged pages, the file is opened as
immutable: nothing writes it then.

Reads are short statements in autocommit mode (no transaction is held between
polls, so the writer's checkpoints are not held back), with a short busy
timeout: a database locked by a writer in rollback-journal mode is "locked,
read again later", one line, never a hang.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from monitor.events import Event
from monitor.formats.base import Problem

#: The first 16 bytes of every SQLite 3 database file.
MAGIC = b"SQLite format 3\x00"
#: How long a read waits for a writer's lock before it gives up (and is tried again later).
BUSY_MS = 250


#: The agents' databases by their default names.
DEFAULT_NAMES = {"opencode.db": "opencode", "sessions.db": "goose"}


class DatabaseError(Exception):
    """A database that cannot be read now; the message is one line saying why."""


def is_sqlite(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) opens a SQLite 3 database."""
    return head.startswith(MAGIC)


def head_of(path: Path) -> bytes:
    """The first 20 bytes of ``path``, its header's start (empty when it cannot be read or is not a regular file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not _regular(fd):
            return b""
        return os.pread(fd, 20, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _wal_mode(path: Path) -> bool:
    """Whether the database's header says WAL journaling (its read and write versions are 2).
    (A database in rollback-journal mode is read with locks and leaves no file behind.)"""
    return head_of(path)[18:20] == b"\x02\x02"


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


def _uri(path: Path, immutable: bool) -> str:
    query = "mode=ro&immutable=1" if immutable else "mode=ro"
    return f"file:{quote(str(path.absolute()))}?{query}"


def open_readonly(path: Path, once: bool = False) -> sqlite3.Connection:
    """A read-only connection to the database at ``path``; :class:`DatabaseError` if it cannot be had.

    ``once``: for one read (``scan``).  A database with no ``-wal`` beside it is
    open in WAL mode by nobody (SQLite removes the file when its last writer
    closes), so it is read as immutable: no ``-shm`` is left next to a finished
    database (or a test fixture)."""
    if once and _wal_mode(path) and not Path(f"{path}-wal").exists():
        try:
            return _connect(path, immutable=True)
        except sqlite3.Error as exc:
            raise DatabaseError(describe(exc)) from None
    try:
        return _connect(path, immutable=False)
    except sqlite3.Error as exc:
        wal = Path(f"{path}-wal")
        cannot_index = "unable to open" in str(exc) or "readonly" in str(exc)  # (no -shm, none can be made)
        if cannot_index and not (wal.exists() and wal.stat().st_size > 0):
            try:  # a copy in a read-only folder, its WAL merged: nothing writes it
                return _connect(path, immutable=True)
            except sqlite3.Error:
                pass
        raise DatabaseError(describe(exc)) from None


def _connect(path: Path, immutable: bool) -> sqlite3.Connection:
    connection = sqlite3.connect(
        _uri(path, immutable), uri=True, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute("PRAGMA query_only = 1")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # (opens the file for real)
    except sqlite3.Error:
        connection.close()
        raise
    return connection


def describe(exc: BaseException) -> str:
    """One line for a SQLite failure."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "locked" in text or "busy" in text:
        return f"database is locked by its writer ({text}); read again on the next poll"
    if "not a database" in text or "malformed" in text or "file is encrypted" in text:
        return f"not a readable SQLite database ({text})"
    return f"cannot read the database ({text})"


def tables(connection: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table of the database and its columns."""
    names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    out: dict[str, set[str]] = {}
    for name in names:
        quoted = name.replace('"', '""')
        out[name] = {row[1] for row in connection.execute(f'PRAGMA table_info("{quoted}")')}
    return out


def agent_of(found: dict[str, set[str]]) -> str | None:
    """Which agent's database this is, from its tables: ``opencode``, ``goose`` or None."""
    part, message = found.get("part", set()), found.get("message", set())
    if {"id", "message_id", "session_id", "data"} <= part and {"id", "session_id", "data"} <= message:
        return "opencode"
    if {"id", "session_id", "role", "content_json"} <= found.get("messages", set()) and "sessions" in found:
        return "goose"
    return None


def which(path: Path) -> str | None:
    """The agent whose database ``path`` is (None: not SQLite, not readable, or another database)."""
    if not is_sqlite(head_of(path)):
        return None
    try:
        connection = open_readonly(path, once=True)
    except DatabaseError:  # (locked, say): its name tells, and reading it will say why it cannot be read
        return DEFAULT_NAMES.get(path.name)
    try:
        return agent_of(tables(connection))
    except sqlite3.Error:
        return None
    finally:
        connection.close()


def load_rows(
    path: Path,
    read_after: Callable[[sqlite3.Connection, int], tuple[list[Any], int]],
    read_row: Callable[[Any], tuple[list[Event], list[Problem]]],
    finish: Callable[[], list[Event]] | None = None,
) -> tuple[list[Event], list[Problem]]:
    """``scan``'s one read of an agent's database: every row ``read_after`` gives, batch after batch
    from id 0, through ``read_row``, then ``finish()``'s events; one problem if it cannot be read."""
    source = str(path)
    try:
        connection = open_readonly(path, once=True)
    except DatabaseError as exc:
        return [], [Problem(source, None, str(exc))]
    events: list[Event] = []
    problems: list[Problem] = []
    try:
        after = 0
        while True:
            found, after = read_after(connection, after)
            if not found:
                break
            for row in found:
                new, bad = read_row(row)
                events.extend(new)
                problems.extend(bad)
        if finish is not None:
            events.extend(finish())
    except sqlite3.Error as exc:
        problems.append(Problem(source, None, describe(exc)))
    finally:
        connection.close()
    return events, problems


__all__ = [
    "MAGIC",
    "DatabaseError",
    "agent_of",
    "describe",
    "is_sqlite",
    "load_rows",
    "open_readonly",
    "tables",
    "which",
]
