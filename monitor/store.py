"""The SQLite store: every session, event, detection and operator action.

One database file in WAL mode (default ``<user data dir>/loopwatch.db``), so
the sqlite3 CLI or Datasette can read it while the monitor runs.  Writes go
through ONE writer thread that owns the only writing connection:

* ``add_events`` / ``add_detections`` turn their arguments into bounded rows in
  the caller's thread and queue them.  The in-memory queue is bounded
  (``max_pending`` rows): beyond it rows wait in a spill file
  (``spill_bytes``, :mod:`monitor.store_spill`) and come back in order; only
  when that is full too does the caller block up to ``block_seconds``, then
  the overflow is dropped, every row counted (``stats.dropped``, the
  ``store_losses`` table, ``history``).
* The writer commits a transaction every ``batch_size`` rows or ``flush_ms``
  after the oldest queued row, whichever comes first.
* ``upsert_session`` merges into a per-session pending update (never blocks).
  The writer also keeps ``sessions`` up to date from the events and
  detections themselves, so a session is complete even if nobody upserts it;
  session rows are written at most once a second (``flush_ms`` if longer) and
  on flush/close, one row per session.
* ``begin_action`` / ``finish_action`` are synchronous: they return once the
  row is committed (with ``synchronous=FULL``), so an action is on disk
  before it is carried out.  :meth:`Store.start` finishes the actions an
  interrupted run left ``pending`` (:mod:`monitor.store_recovery`).

Reads use their own read-only connection (serialized by a lock, safe from any
thread) and work whether or not the writer is running.  The writer thread
itself is :mod:`monitor.store_writer`; rows and their SQL are in
:mod:`monitor.store_rows`, the schema in :mod:`monitor.store_schema`.  Retention
(``retention_days``, 0 = forever) deletes old *events* by event time, at start
and hourly; sessions, detections and actions are kept.
"""

from __future__ import annotations

import getpass
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from sqlite_utils import Database

from monitor.config import StoreSettings, user_data_dir
from monitor.detect.base import Detection
from monitor.events import Event
from monitor.store_rows import (
    detection_dict, detection_row, event_dict, event_from_row, event_row, level_rank, safe_text,
    session_update,
)
from monitor.store_recovery import owner_stamp, reconcile_pending
from monitor.store_schema import SchemaError, current_version, latest_version, migrate
from monitor.store_spill import SPILL_BYTES, Spill
from monitor.store_writer import StoreStats, Writer, WriterStopped

__all__ = ["Store", "StoreError", "StoreStats", "current_user", "default_db_path",
           "resolve_db_path"]

DB_NAME = "loopwatch.db"
BUSY_TIMEOUT_MS = 5000
#: How long begin_action/finish_action/prune wait for the writer.
REQUEST_TIMEOUT = 30.0
OUTCOMES = frozenset({"delivered", "failed", "unsupported", "refused"})



def _session_filters(prefix: str, time_column: str, agent: str | None, since: float | None,
                     level: str | None) -> tuple[list[str], list[Any]]:
    """The WHERE terms and parameters of the history filters: the session's
    agent (``prefix`` names the sessions table), ``time_column`` at or after
    ``since``, a peak level at least ``level``."""
    where: list[str] = []
    params: list[Any] = []
    if agent:
        where.append(f"{prefix}agent = ?")
        params.append(agent)
    if since is not None:
        where.append(f"{time_column} >= ?")
        params.append(since)
    if level:
        where.append(f"COALESCE({prefix}peak_rank, 0) >= ?")
        params.append(level_rank(level))
    return where, params

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


def default_db_path() -> Path:
    return user_data_dir() / DB_NAME


def resolve_db_path(path: str | Path | None = None, settings: StoreSettings | None = None) -> Path:
    """``path``, else the configured ``[store] path``, else the default file."""
    chosen = path or (settings.path if settings is not None else "")
    return Path(chosen).expanduser() if chosen else default_db_path()


def current_user() -> str:
    """The OS user recorded as ``who`` of an action."""
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): the uid still says who
        return f"uid:{os.getuid()}"


class Store:
    """Records sessions, events, detections and actions in one SQLite file."""

    def __init__(self, path: str | Path, *, content_chars: int = 4000, batch_size: int = 500,
                 flush_ms: int = 200, retention_days: float = 0, max_pending: int | None = None,
                 block_seconds: float = 1.0, clock: Callable[[], float] = time.time,
                 spill_bytes: int = SPILL_BYTES):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.path = Path(path).expanduser()
        self.content_chars = content_chars
        self.batch_size = batch_size
        self.flush_seconds = max(flush_ms, 0) / 1000.0
        self.retention_days = retention_days
        self.max_pending = max_pending or max(20 * batch_size, 10_000)
        self.block_seconds = block_seconds
        self.spill_bytes = spill_bytes
        self.clock = clock
        self._writer: Writer | None = None
        self._final_stats = StoreStats()  # what a closed writer did
        self._final_failure: BaseException | None = None
        self._owner = owner_stamp()
        #: Pending actions of an interrupted run, finished by :meth:`start`.
        self.reconciled: list[dict[str, Any]] = []
        self._closed = False
        self._lifecycle = threading.Lock()
        self._reader: Database | None = None
        self._read_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: StoreSettings, path: str | Path | None = None) -> Store:
        """A store configured by ``[store]`` (``path`` overrides the file)."""
        return cls(resolve_db_path(path, settings), content_chars=settings.content_chars,
                   batch_size=settings.batch_size, flush_ms=settings.flush_ms,
                   retention_days=settings.retention_days)

    def __enter__(self) -> Store:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Open the database (WAL, migrations) and start the writer thread."""
        with self._lifecycle:
            if self._writer is not None or self._closed:
                raise StoreError("store already started" if not self._closed else "store is closed")
            self._writer = Writer(self._open_writer(), batch_size=self.batch_size,
                                  flush_seconds=self.flush_seconds,
                                  retention_days=self.retention_days,
                                  max_pending=self.max_pending, block_seconds=self.block_seconds,
                                  clock=self.clock,
                                  spill=Spill(self.path.parent, self.spill_bytes)
                                  if self.spill_bytes > 0 else None)

    def _open_writer(self) -> Database:
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        if not self.path.exists():
            # Transcripts can hold secrets: the file (and its -wal/-shm, which
            # SQLite creates with the same mode) is private to the user.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000,
                               check_same_thread=False)
        db = Database(conn, execute_plugins=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.enable_wal()
            # In WAL mode NORMAL survives a crash of the process (kill -9) with
            # every committed row; action commits switch to FULL for power loss.
            db.execute("PRAGMA synchronous = NORMAL")
            migrate(db)
            self.reconciled = reconcile_pending(db, self.clock)
        except SchemaError as exc:
            db.close()
            raise StoreError(f"{self.path}: {exc}") from None
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"{self.path}: cannot open the database: {exc}") from None
        return db

    def close(self) -> None:
        """Commit everything queued, stop the writer and close the database."""
        with self._lifecycle:
            writer, self._writer = self._writer, None
            self._closed = True
        if writer is not None:
            writer.close()
            writer.db.close()
            self._final_stats = writer.stats
            self._final_failure = writer.failure
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    @property
    def stats(self) -> StoreStats:
        writer = self._writer
        return writer.stats if writer is not None else self._final_stats

    def position(self) -> int:
        """How many rows were given to the store so far (see :meth:`on_written`)."""
        writer = self._writer
        return writer.enqueued if writer is not None else 0

    def written(self) -> float:
        """How many of those rows are done with (committed, or refused or dropped and
        counted); infinite once no more will be (the writer closed or stopped)."""
        writer = self._writer
        if writer is None or writer.state == "failed":
            return float("inf")
        return writer.done

    def on_written(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(written)`` from the writer thread after each write."""
        self._running().add_listener(callback)

    def losses(self) -> str | None:
        """None when everything given to the store was committed (or is still
        queued); otherwise what was lost, for an operator to read."""
        writer = self._writer
        stats = self.stats
        failure = writer.failure if writer is not None else self._final_failure
        parts = []
        if failure is not None:
            parts.append(f"the store writer STOPPED ({failure!r}); nothing after it was recorded")
        if stats.dropped:
            parts.append(f"{stats.dropped:,} rows dropped (the queue and its spill file were full)")
        if stats.failed:
            parts.append(f"{stats.failed:,} rows refused by SQLite (last: {stats.last_error})")
        return "; ".join(parts) or None

    # -- writes (any thread) -----------------------------------------------------

    def _running(self) -> Writer:
        writer = self._writer
        if writer is None:
            raise StoreError("the store is closed" if self._closed
                             else "the store is not started; call start() first")
        return writer

    def add_events(self, events: Sequence[Event]) -> None:
        """Queue events (rows are bounded copies made now, in this thread)."""
        self._enqueue("e", [event_row(e, self.content_chars) for e in events])

    def add_detections(self, detections: Sequence[Detection]) -> None:
        self._enqueue("d", [detection_row(d) for d in detections])

    def _enqueue(self, kind: str, rows: list[list[Any]]) -> None:
        if rows:
            try:
                self._running().enqueue(kind, rows)
            except WriterStopped as exc:
                raise StoreError(str(exc)) from None

    def add_position(self, position: dict) -> None:
        """Queue a file's read position (see :class:`monitor.sources.files.FilePosition`):
        keys dev, ino, head_len, head, path, offset, line, mark.  Queued after
        the events read before it, so it is never committed before them."""
        row = [int(position["dev"]), int(position["ino"]), int(position["head_len"]), str(position["head"]),
               str(position["path"]), int(position["offset"]), position.get("line"),
               bytes(position.get("mark") or b""), self.clock()]
        self._enqueue("p", [row])

    def file_positions(self) -> list[dict]:
        """Every stored file read position (empty for a database that has none)."""
        try:
            return self._read("SELECT dev, ino, head_len, head, path, offset, line, mark FROM file_positions")
        except StoreError:
            return []

    def upsert_session(self, row: dict) -> None:
        """Record a session's current state (merged; written within a second, or
        ``flush_ms`` if longer; at once by :meth:`flush`).

        Keys: id, agent, source, origin (or kind), pid, parent, first_seen,
        last_seen, status, level (label or Level), detector, reason.  ``events``
        is accepted but the store counts the events it committed itself."""
        update = session_update(row)
        try:
            self._running().upsert_session(update)
        except WriterStopped as exc:
            raise StoreError(str(exc)) from None

    def flush(self, timeout: float | None = 60.0) -> None:
        """Return once everything queued before this call is committed
        (StoreError after ``timeout`` seconds, e.g. a file locked by another process)."""
        self._call("flush", timeout=timeout)

    def begin_action(self, kind: str, session: str, text: str | None, who: str,
                     detail: str = "") -> int:
        """Record an operator action as ``pending``; committed when this returns."""
        if not kind:
            raise ValueError("begin_action: kind must not be empty")
        row = [safe_text(session), kind, safe_text(text), self.clock(),
               safe_text(who) or current_user(), "pending", safe_text(detail) or "", self._owner]
        return int(self._call("begin_action", row))

    def finish_action(self, action_id: int, outcome: str, detail: str = "") -> None:
        """Record an action's outcome; committed when this returns."""
        if outcome not in OUTCOMES:
            raise ValueError(f"finish_action: unknown outcome {outcome!r} "
                             f"(expected one of: {', '.join(sorted(OUTCOMES))})")
        found = self._call("finish_action", [outcome, safe_text(detail) or "", self.clock(),
                                             int(action_id)])
        if not found:
            raise StoreError(f"finish_action: no action with id {action_id}")

    def prune(self) -> int:
        """Apply retention now; return how many events were deleted."""
        return int(self._call("prune"))

    def _call(self, kind: str, *args: Any, timeout: float | None = REQUEST_TIMEOUT) -> Any:
        try:
            return self._running().call(kind, *args, timeout=timeout)
        except WriterStopped as exc:
            raise StoreError(str(exc)) from None
        except (TimeoutError, sqlite3.Error) as exc:
            raise StoreError(f"{kind}: {exc}") from exc

    # -- reads (any thread, own read-only connection) ------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._read_lock:
            if self._reader is None:
                self._reader = self._open_reader()
            try:
                return list(self._reader.query(sql, list(params)))
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from None

    def _open_reader(self, upgraded: bool = False) -> Database:
        if not self.path.exists():
            raise StoreError(f"no loopwatch database at {self.path}")
        db = self._connect_reader("mode=ro")
        try:
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
        except (SchemaError, sqlite3.DatabaseError):
            version = self._version(db)  # closes it and says why
        if version > latest_version():
            db.close()
            raise StoreError(f"{self.path}: database schema v{version} is newer than this "
                             f"loopwatch (v{latest_version()}); upgrade loopwatch to read it")
        if version < latest_version():
            db.close()
            if upgraded:
                raise StoreError(f"{self.path}: still at schema v{version} after upgrading")
            self._migrate_for_reading(version)
            return self._open_reader(upgraded=True)
        return db

    def _connect_reader(self, mode: str) -> Database:
        uri = self.path.resolve().as_uri() + "?" + mode
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                               check_same_thread=False)
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
            db = Database(sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000),
                          execute_plugins=False)
            try:
                db.enable_wal()
                migrate(db)
            finally:
                db.close()
        except (sqlite3.Error, SchemaError) as exc:
            raise StoreError(f"{self.path}: schema v{version} needs upgrading to "
                             f"v{latest_version()} and that failed: {exc}") from None

    def list_sessions(self, *, agent: str | None = None, since: float | None = None,
                      level: str | None = None, text: str | None = None,
                      limit: int | None = 500) -> list[dict]:
        """Sessions, most recently seen first.  ``level``: reached at least it;
        ``since``: seen at or after (epoch seconds); ``text``: in id, agent or source."""
        where, params = _session_filters("", "last_seen", agent, since, level)
        if text:
            where.append("(instr(lower(id), lower(?)) OR instr(lower(COALESCE(agent, '')), lower(?))"
                         " OR instr(lower(COALESCE(source, '')), lower(?)))")
            params.extend([text, text, text])
        sql = "SELECT * FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY last_seen DESC, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self._read(sql, params)

    def lost_rows(self) -> list[dict]:
        """Per monitor run that lost rows (queue and spill full, rows SQLite refused):
        its last counts, oldest run first.  Empty for a database without losses."""
        try:
            return self._read(
                "SELECT owner, MAX(ts) AS ts, MAX(dropped) AS dropped, MAX(failed) AS failed, "
                "(SELECT reason FROM store_losses l2 WHERE l2.owner = l.owner ORDER BY id DESC "
                "LIMIT 1) AS reason FROM store_losses l GROUP BY owner ORDER BY MAX(ts)")
        except StoreError:  # a database from before the table existed
            return []

    def get_session(self, session: str) -> dict | None:
        rows = self._read("SELECT * FROM sessions WHERE id = ?", [session])
        return rows[0] if rows else None

    def find_sessions(self, prefix: str, limit: int = 20) -> list[str]:
        """Session ids starting with ``prefix`` (for ``show``'s short ids)."""
        rows = self._read("SELECT id FROM sessions WHERE substr(id, 1, length(?)) = ? "
                          "ORDER BY last_seen DESC LIMIT ?", [prefix, prefix, limit])
        return [row["id"] for row in rows]

    def session_ids(self) -> list[str]:
        """Every stored session, first seen first."""
        return [row["id"] for row in self._read("SELECT id FROM sessions ORDER BY first_seen, id")]

    def count_events(self, session: str) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM events WHERE session = ?", [session])[0]["n"])

    def events(self, session: str, offset: int = 0, limit: int = 500) -> list[dict]:
        """Stored events of a session in order (args/meta decoded)."""
        rows = self._read("SELECT * FROM events WHERE session = ? ORDER BY seq LIMIT ? OFFSET ?",
                          [session, limit, offset])
        return [event_dict(row) for row in rows]

    def detections(self, session: str) -> list[dict]:
        rows = self._read("SELECT * FROM detections WHERE session = ? ORDER BY ts, id", [session])
        return [detection_dict(row) for row in rows]

    def actions(self, session: str) -> list[dict]:
        return self._read("SELECT * FROM actions WHERE session = ? ORDER BY ts, id", [session])

    def find_events(self, session: str, text: str, limit: int = 10_000) -> list[int]:
        """Seqs of the session's events whose tool, args, role or stored content
        contain ``text`` (case-insensitive), in order (search in the detail view)."""
        rows = self._read("SELECT seq FROM events WHERE session = ? AND instr(lower("
                          "COALESCE(tool, '') || ' ' || COALESCE(args, '') || ' ' || COALESCE(role, '')"
                          " || ' ' || COALESCE(content, '')), lower(?)) ORDER BY seq LIMIT ?",
                          [session, text, limit])
        return [row["seq"] for row in rows]

    def search_events(self, query: str, *, agent: str | None = None, since: float | None = None,
                      level: str | None = None, limit: int | None = 200) -> list[dict]:
        """Events whose tool, args or content match ``query`` in the full-text
        index (every word, in any order; ``word*`` for a prefix), newest first,
        each with a ``snippet`` (matches in «»); ``agent``/``level`` filter by
        session, ``since`` by event time."""
        where, params = _session_filters("s.", "e.ts", agent, since, level)
        where.insert(0, "events_fts MATCH ?")
        params.insert(0, fts_query(query))
        sql = ("SELECT e.session, e.seq, e.ts, e.type, e.tool, e.is_error, s.agent, "
               "snippet(events_fts, -1, '«', '»', '…', 16) AS snippet FROM events_fts "
               "JOIN events e ON e.id = events_fts.rowid JOIN sessions s ON s.id = e.session "
               f"WHERE {' AND '.join(where)} ORDER BY e.ts DESC, e.id DESC")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self._read(sql, params)

    def iter_events(self, session: str, page_size: int = 1000) -> Iterator[Event]:
        """The session's events rebuilt as :class:`Event` objects (for ``scan --db``),
        read a page at a time so a long session costs bounded memory."""
        after = -1
        while True:
            rows = self._read("SELECT * FROM events WHERE session = ? AND seq > ? "
                              "ORDER BY seq LIMIT ?", [session, after, page_size])
            for row in rows:
                yield event_from_row(row)
            if len(rows) < page_size:
                return
            after = rows[-1]["seq"]

    def iter_events_by_time(self, sessions: Sequence[str] | None = None,
                            page_size: int = 1000) -> Iterator[Event]:
        """Events of many sessions (all by default) in event-time order, ties in
        the order they were stored; a page at a time (bounded memory)."""
        wanted = None if sessions is None else set(sessions)
        ts, last_id = float("-inf"), -1
        while True:
            rows = self._read("SELECT * FROM events WHERE (ts, id) > (?, ?) ORDER BY ts, id LIMIT ?",
                              [ts, last_id, page_size])
            for row in rows:
                if wanted is None or row["session"] in wanted:
                    yield event_from_row(row)
            if len(rows) < page_size:
                return
            ts, last_id = rows[-1]["ts"], rows[-1]["id"]
