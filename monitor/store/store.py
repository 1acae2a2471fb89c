"""The :class:`Store`: opening the database, its writer thread, and the writes.

One database file in WAL mode (default ``<user data dir>/loopwatch.db``), so
the sqlite3 CLI or Datasette can read it while the monitor runs.  Writes go
through ONE writer thread that owns the only writing connection:

* ``add_events`` / ``add_detections`` turn their arguments into bounded rows in
  the caller's thread and queue them.  The in-memory queue is bounded
  (``max_pending`` rows): beyond it rows wait in a spill file
  (``spill_bytes``, :mod:`monitor.store.spill`) and come back in order; only
  when that is full too does the caller block up to ``block_seconds``, then
  the overflow is dropped, every row counted (``stats.dropped``, the
  ``store_losses`` table, ``history``).
* The writer commits a transaction every ``batch_size`` rows or ``flush_ms``
  after the oldest queued row, whichever comes first.
* ``upsert_session`` merges into a per-session pending update (never blocks).
  The writer also keeps ``sessions`` up to date from the events and
  detections themselves, so a session is complete even if nobody upserts it;
  session rows are written at most once a second (``flush_ms`` if longer) and
  on flush/close, one row per session, each naming this watcher as its owner.
* ``begin_action`` / ``finish_action`` are synchronous: they return once the
  row is committed (with ``synchronous=FULL``), so an action is on disk
  before it is carried out.

:meth:`Store.start` finishes the actions an interrupted run left ``pending``
and marks ``stopped`` the sessions of watchers that are gone
(:mod:`monitor.store.recovery`).  Reads are :class:`~monitor.store.reader.StoreReader`'s.
Retention (``retention_days``, 0 = forever) deletes old *events* by event
time, at start and hourly; sessions, detections and actions are kept.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from monitor.config import StoreSettings
from monitor.detect.base import Detection
from monitor.detect.episodes import EpisodeChange
from monitor.events import Event
from monitor.identity import current_user, owner_stamp
from monitor.store.episodes import rows_of as episode_rows
from monitor.store.false_positives import pairs_json
from monitor.store.fullness import CLOSE_SECONDS
from monitor.store.paths import resolve_db_path
from monitor.store.reader import BUSY_TIMEOUT_MS, StoreError, StoreReader, check_integrity, damaged_advice
from monitor.store.recovery import reconcile_pending, reconcile_sessions
from monitor.store.rows import detection_row, event_row, safe_text
from monitor.store.schema import SchemaError, migrate
from monitor.store.sessions import session_update
from monitor.store.spill import SPILL_BYTES, Spill
from monitor.store.stats import StoreStats
from monitor.store.writer import Writer, WriterStopped

log = logging.getLogger("loopwatch.store")

#: Batches waiting in the writer's queue beyond which the store is "backlogged".
BACKLOG_BATCHES = 4

#: How long begin_action/finish_action/prune wait for the writer.
REQUEST_TIMEOUT = 30.0
OUTCOMES = frozenset({"delivered", "failed", "unsupported", "refused"})
#: Tables a run that recorded nothing leaves empty (see ``discard_if_unused``).
RECORDED_TABLES = (
    "sessions",
    "events",
    "detections",
    "actions",
    "file_positions",
    "store_losses",
    "episodes",
    "episode_rungs",
)


class Store(StoreReader):
    """Records sessions, events, detections and actions in one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        content_chars: int = 4000,
        batch_size: int = 500,
        flush_ms: int = 200,
        retention_days: float = 0,
        max_pending: int | None = None,
        block_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
        spill_bytes: int = SPILL_BYTES,
        discard_if_unused: bool = False,
        full_disk_close_seconds: float = CLOSE_SECONDS,
    ):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        super().__init__(path)
        self.content_chars = content_chars
        self.batch_size = batch_size
        self.flush_seconds = max(flush_ms, 0) / 1000.0
        self.retention_days = retention_days
        self.max_pending = max_pending or max(20 * batch_size, 10_000)
        self.block_seconds = block_seconds
        self.spill_bytes = spill_bytes
        self.full_disk_close_seconds = full_disk_close_seconds
        self.clock = clock
        self._writer: Writer | None = None
        self._final_stats = StoreStats()  # what a closed writer did
        self._final_failure: BaseException | None = None
        self._owner = owner_stamp()
        #: Pending actions of an interrupted run, finished by :meth:`start`.
        self.reconciled: list[dict[str, Any]] = []
        #: Sessions of watchers that are gone, marked ``stopped`` by :meth:`start`.
        self.stopped_sessions = 0
        #: Remove the file at close if this run created it and recorded nothing
        #: in it (a default database a mistyped ``watch`` would leave behind).
        self.discard_if_unused = discard_if_unused
        self._created = False
        self._closed = False
        self._lifecycle = threading.Lock()

    @classmethod
    def from_settings(cls, settings: StoreSettings, path: str | Path | None = None) -> Store:
        """A store configured by ``[store]`` (``path`` overrides the file)."""
        return cls(
            resolve_db_path(path, settings),
            content_chars=settings.content_chars,
            batch_size=settings.batch_size,
            flush_ms=settings.flush_ms,
            retention_days=settings.retention_days,
            full_disk_close_seconds=settings.full_disk_close_seconds,
        )

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
            self._writer = Writer(
                self._open_writer(),
                batch_size=self.batch_size,
                flush_seconds=self.flush_seconds,
                retention_days=self.retention_days,
                max_pending=self.max_pending,
                block_seconds=self.block_seconds,
                clock=self.clock,
                owner=self._owner,
                spill=Spill(self.path.parent, self.spill_bytes) if self.spill_bytes > 0 else None,
                close_seconds=self.full_disk_close_seconds,
            )

    def _open_writer(self) -> Database:
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        if self.path.is_symlink() and not self.path.exists():
            # SQLite would create the link's target, wherever it points.
            raise StoreError(
                f"{self.path} is a symbolic link to {os.readlink(self.path)}, which does not exist: "
                "remove the link or pass --db with a real path"
            )
        if not self.path.exists():
            self._created = True
            # Transcripts can hold secrets: the file (and its -wal/-shm, which
            # SQLite creates with the same mode) is private to the user.
            try:
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot create the database: {exc.strerror or exc}") from None
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        db = Database(conn, execute_plugins=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            check_integrity(db, self.path)
            db.enable_wal()
            # In WAL mode NORMAL survives a crash of the process (kill -9) with
            # every committed row; action commits switch to FULL for power loss.
            db.execute("PRAGMA synchronous = NORMAL")
            migrate(db)
            self.reconciled = reconcile_pending(db, self.clock)
            self.stopped_sessions = reconcile_sessions(db, self._owner)
        except SchemaError as exc:
            db.close()
            raise StoreError(f"{self.path}: {exc}") from None
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(
                f"{self.path}: cannot open the database: {exc}{damaged_advice(exc, self.path)}"
            ) from None
        except StoreError:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Commit everything queued, stop the writer and close the database."""
        with self._lifecycle:
            writer, self._writer = self._writer, None
            self._closed = True
        if writer is not None:
            writer.close()
            unused = self.discard_if_unused and self._created and _recorded_nothing(writer.db)
            # Our reader would keep the WAL alive past the writer (it cannot
            # checkpoint: it is read-only), so it goes first; then the WAL is
            # folded into the .db and emptied, so the .db alone holds everything.
            self.close_reader()
            if not unused:
                checkpoint(writer.db)
            writer.db.close()
            self._final_stats = writer.stats
            self._final_failure = writer.failure
            if unused:
                self._discard()
        self.close_reader()

    def _discard(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass
            except OSError:
                return  # kept: an empty database does no harm

    @property
    def stats(self) -> StoreStats:
        writer = self._writer
        return writer.stats if writer is not None else self._final_stats

    def backlogged(self) -> bool:
        """Rows wait beyond four batches (or half the memory queue if less): what can
        be read again later (a file) should wait (``Hub.room_for_files``) and what
        can be resent (OTLP) is refused for now.  Four batches keep the writer busy;
        more only lengthen the flush a shutdown waits for (benchmarks/README.md)."""
        writer = self._writer
        return writer is not None and writer.backlog() >= min(
            self.max_pending // 2, BACKLOG_BATCHES * self.batch_size
        )

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
        if stats.lost_full - stats.lost_closing:
            parts.append(
                f"{stats.lost_full - stats.lost_closing:,} rows lost to a full disk (the memory queue was full)"
            )
        if stats.lost_closing:
            parts.append(
                f"{stats.lost_closing:,} rows lost to a full disk (still waiting when the store closed)"
            )
        if stats.dropped - stats.lost_full:
            parts.append(
                f"{stats.dropped - stats.lost_full:,} rows dropped (the queue and its spill file were full)"
            )
        if stats.failed:
            parts.append(f"{stats.failed:,} rows refused by SQLite (last: {stats.last_error})")
        return "; ".join(parts) or None

    # -- writes (any thread) -----------------------------------------------------

    def _running(self) -> Writer:
        writer = self._writer
        if writer is None:
            raise StoreError(
                "the store is closed" if self._closed else "the store is not started; call start() first"
            )
        return writer

    def add_events(self, events: Sequence[Event]) -> None:
        """Queue events (rows are bounded copies made now, in this thread)."""
        self._enqueue("e", [event_row(e, self.content_chars) for e in events])

    def add_detections(self, detections: Sequence[Detection]) -> None:
        self._enqueue("d", [detection_row(d) for d in detections])

    def add_episodes(self, changes: Sequence[EpisodeChange]) -> None:
        """Queue episode changes: each episode's row as it stands now, and a
        rung row for each opening or escalation (monitor/store/episodes.py)."""
        for kind, rows in _by_kind(episode_rows(list(changes))):
            self._enqueue(kind, rows)

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
        row = [
            int(position["dev"]),
            int(position["ino"]),
            int(position["head_len"]),
            str(position["head"]),
            str(position["path"]),
            int(position["offset"]),
            position.get("line"),
            bytes(position.get("mark") or b""),
            self.clock(),
        ]
        self._enqueue("p", [row])

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

    def begin_action(
        self,
        kind: str,
        session: str,
        text: str | None,
        who: str,
        detail: str = "",
        pairs: Sequence[tuple[str, str]] = (),
    ) -> int:
        """Record an operator action as ``pending``; committed when this returns.
        ``pairs``: the (detector, pattern) pairs a false positive marks
        (monitor/store/false_positives.py)."""
        if not kind:
            raise ValueError("begin_action: kind must not be empty")
        row = [
            safe_text(session),
            kind,
            safe_text(text),
            self.clock(),
            safe_text(who) or current_user(),
            "pending",
            safe_text(detail) or "",
            self._owner,
            pairs_json(pairs),
        ]
        return int(self._call("begin_action", row))

    def finish_action(self, action_id: int, outcome: str, detail: str = "") -> None:
        """Record an action's outcome; committed when this returns."""
        if outcome not in OUTCOMES:
            raise ValueError(
                f"finish_action: unknown outcome {outcome!r} (expected one of: {', '.join(sorted(OUTCOMES))})"
            )
        found = self._call("finish_action", [outcome, safe_text(detail) or "", self.clock(), int(action_id)])
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


def checkpoint(db: Database) -> bool:
    """Fold the WAL into the database file and truncate it (``PRAGMA wal_checkpoint(TRUNCATE)``).

    True when it completed; another process reading or writing the database
    may hold it back (it then stays in the WAL, as SQLite would leave it)."""
    try:
        busy, _log, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        log.warning("could not checkpoint the database at close: %s", exc)
        return False
    return not busy


def _recorded_nothing(db: Database) -> bool:
    """Whether every table a run records into is empty."""
    try:
        return not any(db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in RECORDED_TABLES)
    except sqlite3.Error:
        return False


def _by_kind(rows: list[tuple[str, list[Any]]]) -> list[tuple[str, list[list[Any]]]]:
    """Queued rows grouped by kind, in order (episode rows before their rungs)."""
    out: list[tuple[str, list[list[Any]]]] = []
    for kind, row in rows:
        if out and out[-1][0] == kind:
            out[-1][1].append(row)
        else:
            out.append((kind, [row]))
    return out
