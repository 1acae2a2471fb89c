"""The writer thread's transactions on the one writing connection.

:class:`Transactions` commits what the writer's queue hands it: a batch of
event, detection and file-position rows with the session rows they imply
(numbering each session's events, :class:`SeqState`), an action in its own
durable transaction, retention's deletes.  A transaction another process's
lock holds up is retried; a batch SQLite refuses is retried row by row and
the bad rows counted (``store_losses``).  Only the writer thread calls it.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlite_utils import Database

from monitor.store.episodes import EPISODE_KINDS, keyed, write_episodes
from monitor.store.recovery import record_loss
from monitor.store.rows import DETECTION_INSERT, DETECTION_SEQ, EVENT_COLUMNS, EVENT_INSERT, SEQ
from monitor.store.schema import FTS_INDEX_NEW
from monitor.store.sessions import (
    SESSION_UPSERT,
    derive_from_detection,
    derive_from_event,
    merge_update,
    session_values,
)
from monitor.store.stats import StoreStats

log = logging.getLogger("loopwatch.store")

#: While closing, give up on a database another process keeps locked after this.
CLOSE_BUSY_SECONDS = 30.0
#: How long actions and prune may wait for another process's lock.
DURABLE_BUSY_SECONDS = 15.0
PRUNE_CHUNK = 5000
#: Sessions whose numbering the writer remembers (the rest are re-read).
SEQ_CACHE = 20_000

Rows = list[tuple[str, list[Any]]]  # ("e" | "d" | "p" | "x" | "r", row): "x"/"r" monitor/store/episodes.py
Sessions = dict[str, dict[str, Any]]  # session id -> pending columns

#: A file's read position, committed with (or after) the events read before it.
POSITION_UPSERT = (
    "INSERT OR REPLACE INTO file_positions "
    "(dev, ino, head_len, head, path, offset, line, mark, updated) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
ACTION_INSERT = (
    "INSERT INTO actions (session, kind, text, ts, who, outcome, detail, owner, pairs) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# An empty detail keeps the one given to begin_action.
ACTION_FINISH = (
    "UPDATE actions SET outcome = ?, detail = CASE WHEN ? = '' THEN detail "
    "ELSE ? END, finished_ts = ? WHERE id = ?"
)


class NoSpace(Exception):
    """The disk holding the database is full: the batch's first ``committed``
    rows were committed, the rest (and its session rows) were not."""

    def __init__(self, message: str, committed: int = 0):
        super().__init__(message)
        self.committed = committed


def is_full(exc: BaseException) -> bool:
    """A full disk (or quota) rather than a bad row: the batch is to be kept and retried."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
            return True
        return "disk is full" in str(exc) or "No space left" in str(exc)
    return False


def is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class SeqState:
    """How the writer numbers one session's stored events.

    Stored ``seq`` keeps counting across monitor restarts and engine resets
    (the engine numbers a session from 1 each time it first sees it), so
    ``(session, seq)`` stays unique and in order: ``stored = base + engine seq``
    while the engine's numbering moves forward."""

    __slots__ = ("base", "last_stored")

    def __init__(self, last_stored: int):
        self.base = last_stored
        self.last_stored = last_stored

    def copy(self) -> SeqState:
        other = SeqState(self.last_stored)
        other.base = self.base
        return other

    def assign(self, raw: int) -> int:
        if raw <= 0:  # not numbered by an engine
            stored = self.last_stored + 1
        else:
            if self.base + raw <= self.last_stored:  # the engine started over
                self.base = self.last_stored - raw + 1
            stored = self.base + raw
        self.last_stored = stored
        return stored

    def map(self, raw: int | None) -> int | None:
        """The stored seq of the event a detection (engine seq ``raw``) is about."""
        return self.base + raw if raw and raw > 0 else None


def _where(row: tuple[str, list[Any]]) -> str:
    """``file:line`` (or the session) of a queued row, for error messages."""
    kind, values = row
    if kind == "e":
        source, line = values[EVENT_COLUMNS.index("file")], values[EVENT_COLUMNS.index("line")]
    else:
        source, line = values[-2], values[-1]
    if source:
        return f"{source}:{line}" if line is not None else str(source)
    return f"session {values[0]!r}"


def merged(base: Sessions, new: Sessions) -> Sessions:
    """``base`` with ``new`` merged in, without changing either."""
    out = dict(base)
    for session, info in new.items():
        old = out.get(session)
        if old is None:
            out[session] = info
        else:
            old = dict(old)
            merge_update(old, info)
            out[session] = old
    return out


class Transactions:
    """Commits batches, actions and retention on the writer's connection."""

    def __init__(
        self,
        db: Database,
        stats: StoreStats,
        lock: threading.Condition,
        *,
        clock: Callable[[], float],
        retention_days: float,
        owner: str | None,
        closing_since: Callable[[], float | None],
    ):
        self.db = db
        self.clock = clock
        self.retention_days = retention_days
        self.owner = owner
        self._stats = stats  # shared with the writer, read under ``lock``
        self._lock = lock
        self._closing_since = closing_since
        #: Committed rows' session info, not yet written as session rows.
        self.derived: Sessions = {}
        #: When session rows were last written (monotonic).
        self.sessions_at = time.monotonic()
        self._seqs: OrderedDict[str, SeqState] = OrderedDict()
        self._losses_recorded = (0, 0)  # (dropped, failed) last written to store_losses

    # -- transactions and retries ---------------------------------------------------

    @contextmanager
    def _transaction(self, durable: bool = False) -> Iterator[Database]:
        # BEGIN IMMEDIATE (not sqlite-utils' deferred atomic()): take the write
        # lock up front, so reading MAX(seq) and then writing cannot fail with
        # a stale snapshot when another process wrote in between.
        db = self.db
        if durable:
            db.execute("PRAGMA synchronous = FULL")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.commit()
            except BaseException:
                db.rollback()
                raise
            self._stats.transactions += 1
        finally:
            if durable:
                db.execute("PRAGMA synchronous = NORMAL")

    def retrying(
        self, work: Callable[[], Any], *, durable: bool = False, give_up_after: float | None = None
    ) -> Any:
        """Run ``work`` in a transaction, retrying while another process holds the lock."""
        started = time.monotonic()
        delay = 0.05
        while True:
            try:
                with self._transaction(durable):
                    return work()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                now = time.monotonic()
                if give_up_after is not None and now - started > give_up_after:
                    raise
                closing_since = self._closing_since()
                if closing_since is not None and now - closing_since > CLOSE_BUSY_SECONDS:
                    raise
                if delay == 0.05:
                    log.warning("database is locked by another process; retrying")
                time.sleep(delay)  # only this thread waits; producers keep queueing
                delay = min(delay * 2, 1.0)

    def durable(self, work: Callable[[], Any]) -> Any:
        return self.retrying(work, durable=True, give_up_after=DURABLE_BUSY_SECONDS)

    # -- actions ----------------------------------------------------------------------

    def begin_action(self, row: list[Any]) -> int:
        action_id = self.durable(lambda: self.db.execute(ACTION_INSERT, row).lastrowid)
        self._stats.actions += 1
        return action_id

    def finish_action(self, outcome: str, detail: str, finished_ts: float, action_id: int) -> int:
        return self.durable(
            lambda: self.db.execute(ACTION_FINISH, [outcome, detail, detail, finished_ts, action_id]).rowcount
        )

    # -- batches ----------------------------------------------------------------------

    def write(self, rows: Rows, sessions: Sessions | None) -> None:
        """Commit rows (and session rows when ``sessions`` is given); if SQLite
        refuses the batch, retry row by row and count the bad ones."""
        # Any error a row can cause (sqlite3.Error, but also OverflowError for
        # an integer beyond 64 bits, or a value sqlite3 cannot bind) costs that
        # row only: one bad row must never stop the writer for the whole run.
        try:
            self._commit(rows, sessions)
            if self._stats.dropped != self._losses_recorded[0]:
                self._record_losses()
            return
        except Exception as exc:
            if is_full(exc):
                raise NoSpace(str(exc)) from exc
            log.warning("store batch of %d rows failed (%s); retrying row by row", len(rows), exc)
            self._stats.last_error = str(exc)
        for index, row in enumerate(rows):
            try:
                self._commit([row], None)
            except Exception as exc:
                if is_full(exc):  # the disk filled up meanwhile: the rest is kept, not refused
                    raise NoSpace(str(exc), committed=index) from exc
                self._stats.failed += 1
                self._stats.last_error = f"{_where(row)}: {type(exc).__name__}: {exc}"
                log.warning("store refused a row (%s); it is not recorded", self._stats.last_error)
        if sessions is not None:
            try:
                self._commit([], sessions)
            except Exception as exc:
                self._stats.last_error = str(exc)
                log.warning("session updates lost: %s", exc)
        self._record_losses()

    def _record_losses(self) -> None:
        """Keep the run's count of lost rows in ``store_losses`` (for ``history``)."""
        with self._lock:
            counts = (self._stats.dropped, self._stats.failed)
            reason = self._stats.last_error
        if counts == self._losses_recorded:
            return
        try:
            self.retrying(
                lambda: record_loss(self.db, counts[0], counts[1], reason[:500], self.clock),
                give_up_after=DURABLE_BUSY_SECONDS,
            )
        except Exception as exc:
            log.warning("could not record the count of lost rows: %s", exc)
            return
        self._losses_recorded = counts

    def _commit(self, rows: Rows, sessions: Sessions | None) -> None:
        seqs: dict[str, SeqState] = {}
        result: list[Any] = []

        def work() -> None:
            seqs.clear()
            counts, derived = self._insert(rows, seqs)
            derived = merged(self.derived, derived)
            if sessions is not None:
                # One row per session: what its rows said, then the hub's
                # update merged in as a second upsert would merge it.
                updates = merged(derived, sessions) if sessions else derived
                if updates:
                    self.db.conn.executemany(
                        SESSION_UPSERT, [session_values(u, self.owner) for u in updates.values()]
                    )
            result[:] = [counts, derived]

        self.retrying(work)
        (events, detections, inserted, episodes), derived = result
        self._stats.events += inserted
        self._stats.duplicates += events - inserted
        self._stats.detections += detections
        self._stats.episodes += episodes
        # Only a committed batch moves the numbering and the session info on.
        if sessions is not None:
            self.derived = {}
            self.sessions_at = time.monotonic()
        else:
            self.derived = derived
        for session, state in seqs.items():
            self._seqs[session] = state
            self._seqs.move_to_end(session)
        while len(self._seqs) > SEQ_CACHE:
            self._seqs.popitem(last=False)

    def _seq_state(self, session: str, seqs: dict[str, SeqState]) -> SeqState:
        state = seqs.get(session)
        if state is None:
            cached = self._seqs.get(session)
            if cached is not None:
                state = cached.copy()
            else:
                # sessions.events remembers the last seq even when retention
                # has deleted the rows, so numbers are never reused.
                row = self.db.execute(
                    "SELECT MAX(COALESCE((SELECT MAX(seq) FROM events WHERE session = ?), 0), "
                    "COALESCE((SELECT events FROM sessions WHERE id = ?), 0))",
                    [session, session],
                ).fetchone()
                state = SeqState(int(row[0] or 0))
            seqs[session] = state
        return state

    def _insert(self, rows: Rows, seqs: dict[str, SeqState]) -> tuple[tuple[int, int, int, int], Sessions]:
        """Insert rows in the open transaction; return (events, detections,
        inserted, episode and rung rows) and what they say about their sessions."""
        events: list[list[Any]] = []
        detections: list[list[Any]] = []
        episodes: list[tuple[str, list[Any]]] = []
        derived: Sessions = {}
        positions: dict[tuple[int, int], list[Any]] = {}
        for kind, row in rows:
            if kind == "p":  # a file's read position: only its latest counts
                positions[row[0], row[1]] = row
                continue
            session = row[0]
            state = self._seq_state(session, seqs)
            row = list(row)
            if kind in EPISODE_KINDS:
                episodes.append(keyed(kind, row, state.map))
                continue
            info = derived.get(session)
            if info is None:
                info = derived[session] = {"id": session}
            if kind == "e":
                row[SEQ] = state.assign(row[SEQ])
                events.append(row)
                derive_from_event(info, row)
            else:
                row[DETECTION_SEQ] = state.map(row[DETECTION_SEQ])
                detections.append(row)
                derive_from_detection(info, row)
        inserted = 0
        conn = self.db.conn
        if events:
            last = conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
            inserted = conn.executemany(EVENT_INSERT, events).rowcount
            if inserted > 0:  # duplicates (OR IGNORE) get no new id, so are not indexed twice
                conn.execute(FTS_INDEX_NEW, [last])
        if detections:
            conn.executemany(DETECTION_INSERT, detections)
        if positions:
            conn.executemany(POSITION_UPSERT, list(positions.values()))
        if episodes:
            write_episodes(conn, episodes)
        return (len(events), len(detections), inserted, len(episodes)), derived

    # -- retention --------------------------------------------------------------------

    def prune(self) -> int:
        """Delete events older than the retention, in chunks (short write locks)."""
        if self.retention_days <= 0:
            return 0
        cutoff = self.clock() - self.retention_days * 86400.0
        total = 0
        while True:
            deleted = self.retrying(
                lambda: (
                    self.db.execute(
                        "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < ? LIMIT ?)",
                        [cutoff, PRUNE_CHUNK],
                    ).rowcount
                )
            )
            total += deleted
            if deleted < PRUNE_CHUNK:
                break
        if total:
            log.info("retention: deleted %d events older than %g days", total, self.retention_days)
        self._stats.pruned += total
        return total
