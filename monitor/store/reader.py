"""Reading the store: one read-only connection, from any thread.

:class:`StoreReader` opens the database read-only (immutable where the
directory cannot take SQLite's ``-shm`` index: a read-only copy, a backup),
upgrades an older schema with a short-lived writer, and answers the queries
of ``history``, ``show``, ``scan --db`` and the TUI.  Reads work whether or
not a writer is running.  A session's status is the one a reader must show
(:func:`monitor.store.sessions.shown_status`): ``stopped`` once its watcher is gone.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from monitor.events import Event
from monitor.store.episodes import EPISODE_COUNT, episode_dict
from monitor.store.false_positives import DELIVERED, marks_of
from monitor.store.rows import detection_dict, event_dict, event_from_row, level_rank
from monitor.store.schema import SchemaError, current_version, latest_version, migrate
from monitor.store.sessions import shown_status

BUSY_TIMEOUT_MS = 5000


#: Problems ``PRAGMA quick_check`` lists at most (the first says enough).
CHECK_PROBLEMS = 3


def damaged_advice(exc: BaseException, path: Path) -> str:
    """What to do about a damaged database, for an error message ("" for other errors)."""
    text = str(exc)
    if "malformed" not in text and "not a database" not in text and "damaged" not in text:
        return ""
    return (
        f". The file is damaged: move it away (`mv {path} {path}.damaged`; a new one is made), "
        f"or recover what it holds with `sqlite3 {path} .recover | sqlite3 recovered.db`"
    )


def check_integrity(db: Database, path: Path) -> None:
    """Refuse a damaged database (``PRAGMA quick_check``: every page, no index contents)."""
    try:
        rows = db.execute(f"PRAGMA quick_check({CHECK_PROBLEMS})").fetchall()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and not damaged_advice(exc, path):
            raise  # locked, read-only directory…: the caller's to handle
        raise StoreError(
            f"{path}: not a readable SQLite database: {exc}{damaged_advice(exc, path)}"
        ) from None
    problems = [" ".join(str(row[0]).split()) for row in rows]
    if problems != ["ok"]:
        raise StoreError(
            f"{path}: the database is damaged (quick_check: {'; '.join(problems)[:300]})"
            + damaged_advice(Exception("damaged"), path)
        )


class StoreError(RuntimeError):
    """The store cannot do what was asked (not started, closed, unreadable…)."""


def fts_query(text: str) -> str:
    """User words as an FTS5 query: each word a quoted phrase (so ``-``, ``:``,
    ``.`` and quotes are plain characters), all required; ``word*`` a prefix."""
    terms = []
    for word in text.split():
        prefix = word.endswith("*") and len(word) > 1
        word = word.rstrip("*") if prefix else word
        terms.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    return " ".join(terms) or '""'


def _session_filters(
    prefix: str, time_column: str, agent: str | None, since: float | None, level: str | None
) -> tuple[list[str], list[Any]]:
    """The WHERE terms and parameters of the history filters: the session's
    agent's name containing ``agent`` in any case (``prefix`` names the sessions table), ``time_column`` at or after
    ``since``, a peak level at least ``level``."""
    where: list[str] = []
    params: list[Any] = []
    if agent:  # a part of the name, in any case: `claude` finds claude-code and Claude
        where.append(f"instr(lower({prefix}agent), ?) > 0")
        params.append(agent.lower())
    if since is not None:
        where.append(f"{time_column} >= ?")
        params.append(since)
    if level:
        where.append(f"COALESCE({prefix}peak_rank, 0) >= ?")
        params.append(level_rank(level))
    return where, params


class StoreReader:
    """Queries over a loopwatch database through its own read-only connection."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        self._reader: Database | None = None
        self._read_lock = threading.Lock()

    def close_reader(self) -> None:
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def file_positions(self) -> list[dict]:
        """Every stored file read position (empty for a database that has none)."""
        try:
            return self._read("SELECT dev, ino, head_len, head, path, offset, line, mark FROM file_positions")
        except StoreError:
            return []

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._read_lock:
            if self._reader is None:
                self._reader = self._open_reader()
            try:
                return list(self._reader.query(sql, list(params)))
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}{damaged_advice(exc, self.path)}") from None

    def _open_reader(self, upgraded: bool = False) -> Database:
        if not self.path.exists():
            raise StoreError(f"no loopwatch database at {self.path}")
        db = self._connect_reader("mode=ro")
        try:
            if not upgraded:
                check_integrity(db, self.path)
            version = current_version(db)
        except sqlite3.OperationalError as exc:
            db.close()
            # A WAL file is read through its -shm index, which SQLite must create
            # beside it: in a directory we may not write (a read-only copy, a
            # backup) that fails.  Nobody can be writing there, so read it immutable.
            if "readonly" not in str(exc) and "unable to open" not in str(exc):
                raise StoreError(f"{self.path}: not a readable SQLite database: {exc}") from None
            db = self._connect_reader("immutable=1")
            version = self._version(db)
        except StoreError:
            db.close()
            raise
        except (SchemaError, sqlite3.DatabaseError):
            version = self._version(db)  # closes it and says why
        if version > latest_version():
            db.close()
            raise StoreError(
                f"{self.path}: database schema v{version} is newer than this "
                f"loopwatch (v{latest_version()}); upgrade loopwatch to read it"
            )
        if version < latest_version():
            db.close()
            if upgraded:
                raise StoreError(f"{self.path}: still at schema v{version} after upgrading")
            self._migrate_for_reading(version)
            return self._open_reader(upgraded=True)
        return db

    def _connect_reader(self, mode: str) -> Database:
        uri = self.path.resolve().as_uri() + "?" + mode
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        return Database(conn, execute_plugins=False, recursive_triggers=False)

    def _version(self, db: Database) -> int:
        """The schema version of a just-opened reader (closed on failure)."""
        try:
            return current_version(db)
        except SchemaError as exc:
            db.close()
            raise StoreError(f"{self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"{self.path}: not a readable SQLite database: {exc}") from None

    def _migrate_for_reading(self, version: int) -> None:
        """An older file opened only to read: upgrade it with a short-lived writer."""
        try:
            db = Database(
                sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000), execute_plugins=False
            )
            try:
                db.enable_wal()
                migrate(db)
            finally:
                db.close()
        except (sqlite3.Error, SchemaError) as exc:
            raise StoreError(
                f"{self.path}: schema v{version} needs upgrading to "
                f"v{latest_version()} and that failed: {exc}"
            ) from None

    def list_sessions(
        self,
        *,
        agent: str | None = None,
        since: float | None = None,
        level: str | None = None,
        text: str | None = None,
        limit: int | None = 500,
    ) -> list[dict]:
        """Sessions, most recently seen first.  ``level``: reached at least it;
        ``since``: seen at or after (epoch seconds); ``text``: in id, agent or source."""
        where, params = _session_filters("", "last_seen", agent, since, level)
        if text:
            where.append(
                "(instr(lower(id), lower(?)) OR instr(lower(COALESCE(agent, '')), lower(?))"
                " OR instr(lower(COALESCE(source, '')), lower(?)))"
            )
            params.extend([text, text, text])
        sql = f"SELECT *, {EPISODE_COUNT} FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY last_seen DESC, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return shown_status(self._read(sql, params))

    def lost_rows(self) -> list[dict]:
        """Per monitor run that lost rows (queue and spill full, rows SQLite refused):
        its last counts, oldest run first.  Empty for a database without losses."""
        try:
            return self._read(
                "SELECT owner, MAX(ts) AS ts, MAX(dropped) AS dropped, MAX(failed) AS failed, "
                "(SELECT reason FROM store_losses l2 WHERE l2.owner = l.owner ORDER BY id DESC "
                "LIMIT 1) AS reason FROM store_losses l GROUP BY owner ORDER BY MAX(ts)"
            )
        except StoreError:  # a database from before the table existed
            return []

    def get_session(self, session: str) -> dict | None:
        rows = shown_status(self._read(f"SELECT *, {EPISODE_COUNT} FROM sessions WHERE id = ?", [session]))
        return rows[0] if rows else None

    def find_sessions(self, prefix: str, limit: int = 20) -> list[str]:
        """Session ids starting with ``prefix`` (for ``show``'s short ids)."""
        rows = self._read(
            "SELECT id FROM sessions WHERE substr(id, 1, length(?)) = ? ORDER BY last_seen DESC LIMIT ?",
            [prefix, prefix, limit],
        )
        return [row["id"] for row in rows]

    def session_ids(self) -> list[str]:
        """Every stored session, first seen first."""
        return [row["id"] for row in self._read("SELECT id FROM sessions ORDER BY first_seen, id")]

    def count_events(self, session: str) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM events WHERE session = ?", [session])[0]["n"])

    def events(self, session: str, offset: int = 0, limit: int = 500) -> list[dict]:
        """Stored events of a session in order (args/meta decoded)."""
        rows = self._read(
            "SELECT * FROM events WHERE session = ? ORDER BY seq LIMIT ? OFFSET ?", [session, limit, offset]
        )
        return [event_dict(row) for row in rows]

    def detections(self, session: str) -> list[dict]:
        rows = self._read("SELECT * FROM detections WHERE session = ? ORDER BY ts, id", [session])
        return [detection_dict(row) for row in rows]

    def episodes(self, session: str) -> list[dict]:
        """The session's loop episodes, by number (monitor/store/episodes.py)."""
        rows = self._read("SELECT * FROM episodes WHERE session = ? ORDER BY number", [session])
        return [episode_dict(row) for row in rows]

    def latest_episodes(self, limit: int = 50) -> list[dict]:
        """The ``limit`` loop episodes that opened last, in all sessions, the latest first."""
        rows = self._read("SELECT * FROM episodes ORDER BY first_ts DESC, id DESC LIMIT ?", [limit])
        return [episode_dict(row) for row in rows]

    def episode_rungs(self, session: str) -> list[dict]:
        """The rungs its episodes climbed, in order (``episode`` is the episode's row id)."""
        return self._read("SELECT * FROM episode_rungs WHERE session = ? ORDER BY id", [session])

    def actions(self, session: str) -> list[dict]:
        return self._read("SELECT * FROM actions WHERE session = ? ORDER BY ts, id", [session])

    def false_positives(self, session: str | None = None) -> dict[str, list[dict]]:
        """Per session (one, or all) the patterns marked a false positive:
        ``{detector, pattern, since, action}``, the first mark of each (monitor/store/false_positives.py)."""
        if session is None:
            return marks_of(self._read(DELIVERED))
        return marks_of(self._read(DELIVERED + " AND session = ?", [session]))

    def find_events(self, session: str, text: str, limit: int = 10_000) -> list[int]:
        """Seqs of the session's events whose tool, args, role or stored content
        contain ``text`` (case-insensitive), in order (search in the detail view)."""
        rows = self._read(
            "SELECT seq FROM events WHERE session = ? AND instr(lower("
            "COALESCE(tool, '') || ' ' || COALESCE(args, '') || ' ' || COALESCE(role, '')"
            " || ' ' || COALESCE(content, '')), lower(?)) ORDER BY seq LIMIT ?",
            [session, text, limit],
        )
        return [row["seq"] for row in rows]

    def search_events(
        self,
        query: str,
        *,
        agent: str | None = None,
        since: float | None = None,
        level: str | None = None,
        limit: int | None = 200,
    ) -> list[dict]:
        """Events whose tool, args or content match ``query`` in the full-text
        index (every word, in any order; ``word*`` for a prefix), newest first,
        each with a ``snippet`` (matches in «»); ``agent``/``level`` filter by
        session, ``since`` by event time."""
        where, params = _session_filters("s.", "e.ts", agent, since, level)
        where.insert(0, "events_fts MATCH ?")
        params.insert(0, fts_query(query))
        sql = (
            "SELECT e.session, e.seq, e.ts, e.type, e.tool, e.is_error, s.agent, "
            "snippet(events_fts, -1, '«', '»', '…', 16) AS snippet FROM events_fts "
            "JOIN events e ON e.id = events_fts.rowid JOIN sessions s ON s.id = e.session "
            f"WHERE {' AND '.join(where)} ORDER BY e.ts DESC, e.id DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self._read(sql, params)

    def iter_events(self, session: str, page_size: int = 1000) -> Iterator[Event]:
        """The session's events rebuilt as :class:`Event` objects (for ``scan --db``),
        read a page at a time so a long session costs bounded memory."""
        after = -1
        while True:
            rows = self._read(
                "SELECT * FROM events WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
                [session, after, page_size],
            )
            for row in rows:
                yield event_from_row(row)
            if len(rows) < page_size:
                return
            after = rows[-1]["seq"]

    def iter_events_by_time(
        self, sessions: Sequence[str] | None = None, page_size: int = 1000
    ) -> Iterator[Event]:
        """Events of many sessions (all by default) in event-time order, ties in
        the order they were stored; a page at a time (bounded memory)."""
        wanted = None if sessions is None else set(sessions)
        ts, last_id = float("-inf"), -1
        while True:
            rows = self._read(
                "SELECT * FROM events WHERE (ts, id) > (?, ?) ORDER BY ts, id LIMIT ?",
                [ts, last_id, page_size],
            )
            for row in rows:
                if wanted is None or row["session"] in wanted:
                    yield event_from_row(row)
            if len(rows) < page_size:
                return
            ts, last_id = rows[-1]["ts"], rows[-1]["id"]
