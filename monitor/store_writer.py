"""The store's ONE writer thread: a bounded queue drained in batched transactions.

Producers (any thread) queue rows and session updates; synchronous requests
(actions, flush, prune) wait for their result.  The thread owns the only
writing connection and commits:

* queued rows every ``batch_size`` rows, or ``flush_ms`` after the oldest one;
* session rows at most every ``session_seconds`` (``SESSION_SECONDS``, or
  ``flush_ms`` if longer), one row per session with what its committed rows
  and the hub's updates said (coalesced: with 1,000 live sessions, upserting
  each on every batch would cost more than the events);
* each action in its own transaction with ``synchronous=FULL``.

Database errors never kill the thread: a locked file is retried, a batch SQLite
refuses is retried row by row and the bad rows counted.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from sqlite_utils import Database

from monitor.store_recovery import record_loss
from monitor.store_spill import Spill
from monitor.store_rows import (
    DETECTION_INSERT, DETECTION_SEQ, EVENT_COLUMNS, EVENT_INSERT, SEQ, SESSION_UPSERT, derive_from_detection,
    derive_from_event, merge_update, session_values,
)

log = logging.getLogger("loopwatch.store")

#: While closing, give up on a database another process keeps locked after this.
CLOSE_BUSY_SECONDS = 30.0
#: How long actions and prune may wait for another process's lock.
DURABLE_BUSY_SECONDS = 15.0
PRUNE_INTERVAL = 3600.0
PRUNE_CHUNK = 5000
#: Sessions whose numbering the writer remembers (the rest are re-read).
SEQ_CACHE = 20_000
#: Session rows are written at most this often (or every ``flush_ms`` if that
#: is longer), and on flush and close.  Each is an upsert as costly as a few
#: event rows; with 1,000 live sessions writing them every 200 ms cost the
#: writer a third of its time.
SESSION_SECONDS = 1.0

Rows = list[tuple[str, list[Any]]]       # ("e" | "d", row)
Sessions = dict[str, dict[str, Any]]     # session id -> pending columns


class WriterStopped(RuntimeError):
    """The writer is not running (not started, closing, closed or failed)."""


@dataclass
class StoreStats:
    """Counters of what the writer did (a snapshot; see ``Store.stats``)."""

    events: int = 0          # event rows committed
    detections: int = 0      # detection rows committed
    actions: int = 0         # action rows committed
    transactions: int = 0    # write transactions committed
    duplicates: int = 0      # event rows ignored: same (session, seq) already stored
    dropped: int = 0         # rows given up because the queue and the spill file stayed full
    spilled: int = 0         # rows that waited in the spill file (back-pressure)
    failed: int = 0          # rows SQLite refused
    pruned: int = 0          # event rows deleted by retention
    pending: int = 0         # rows queued right now
    last_error: str = ""


class Request:
    """Synchronous work for the writer thread, with its result."""

    __slots__ = ("kind", "args", "done", "result", "error")

    def __init__(self, kind: str, *args: Any):
        self.kind = kind
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


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


#: A file's read position, committed with (or after) the events read before it.
POSITION_UPSERT = ("INSERT OR REPLACE INTO file_positions "
                   "(dev, ino, head_len, head, path, offset, line, mark, updated) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


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


def _merged(base: Sessions, new: Sessions) -> Sessions:
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


class Writer:
    """Owns the writing connection and the thread that uses it."""

    def __init__(self, db: Database, *, batch_size: int, flush_seconds: float,
                 retention_days: float, max_pending: int, block_seconds: float,
                 clock: Callable[[], float], session_seconds: float | None = None,
                 spill: Spill | None = None):
        self.db = db
        self.batch_size = batch_size
        self.flush_seconds = flush_seconds
        self.session_seconds = max(flush_seconds, SESSION_SECONDS if session_seconds is None
                                   else session_seconds)
        self.retention_days = retention_days
        self.max_pending = max_pending
        self.block_seconds = block_seconds
        self.clock = clock
        self.state = "running"  # running | closing | closed | failed
        self._cond = threading.Condition()
        self._pending: deque[tuple[str, list[Any]]] = deque()
        self._oldest_at: float | None = None   # monotonic time the oldest queued row came
        self._dirty: Sessions = {}             # the hub's session updates, not yet written
        self._derived: Sessions = {}           # committed rows' session info, not yet written
        self._sessions_at = time.monotonic()   # when session rows were last written
        self._requests: deque[Request] = deque()
        self._seqs: OrderedDict[str, SeqState] = OrderedDict()
        self._stats = StoreStats()
        self._closing_since = 0.0
        self._failure: BaseException | None = None
        self._spill = spill
        self._warned_drop = -1e9               # monotonic time of the last drop warning
        self._warned_spill = False
        self._losses_recorded = (0, 0)         # (dropped, failed) last written to store_losses
        #: Rows given to enqueue so far, and how many of them are done with
        #: (committed, refused or dropped): a caller that noted ``enqueued``
        #: after adding a row knows it is on disk once ``done`` reaches it.
        self.enqueued = 0
        self.done = 0
        self._listeners: list[Callable[[int], None]] = []
        if retention_days > 0:
            self._requests.append(Request("prune"))  # before anything else
        self._thread = threading.Thread(target=self._run, name="loopwatch-store-writer",
                                        daemon=True)
        self._thread.start()

    # -- producers (any thread) ----------------------------------------------------

    def _check_running(self) -> None:
        if self.state == "failed":
            raise WriterStopped(f"the store writer stopped: {self._failure!r}")
        if self.state != "running":
            raise WriterStopped(f"the store is {self.state}")

    @property
    def failure(self) -> BaseException | None:
        """What stopped the thread (None while it runs or after a clean close)."""
        return self._failure

    @property
    def stats(self) -> StoreStats:
        with self._cond:
            return replace(self._stats, pending=self._queued(),
                           spilled=self._spill.total if self._spill is not None else 0)

    def _queued(self) -> int:
        """Rows waiting, in memory and in the spill file (lock held)."""
        return len(self._pending) + (self._spill.count if self._spill is not None else 0)

    def enqueue(self, kind: str, rows: list[list[Any]]) -> None:
        """Queue rows.  When the in-memory queue is full they go to the spill
        file (in order: once rows are on disk, later ones follow them there);
        only when that is full too, wait up to ``block_seconds`` and then drop
        the overflow, counting every row."""
        deadline: float | None = None
        with self._cond:
            self._check_running()
            self.enqueued += len(rows)
            index = 0
            while index < len(rows):
                spill = self._spill
                space = self.max_pending - len(self._pending)
                if spill is not None and (spill.count or space <= 0):
                    lines = spill.room([(kind, row) for row in rows[index:]])
                    if lines is not None:
                        self._to_spill(lines)
                        return
                elif space > 0:
                    chunk = rows[index:index + space]
                    self._pending.extend((kind, row) for row in chunk)
                    index += len(chunk)
                    if self._oldest_at is None:
                        self._oldest_at = time.monotonic()
                        self._cond.notify_all()
                    elif len(self._pending) >= self.batch_size:
                        self._cond.notify_all()
                    continue
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self.block_seconds
                if now >= deadline or self.state != "running":
                    self._drop(len(rows) - index)
                    return
                self._cond.notify_all()
                self._cond.wait(deadline - now)

    def _to_spill(self, lines: list[bytes]) -> None:
        try:
            self._spill.append(lines)
        except OSError as exc:  # a full or failing disk: count the rows, never raise
            self._stats.last_error = f"spill file: {exc}"
            self._drop(len(lines))
            return
        if self._oldest_at is None:
            self._oldest_at = time.monotonic()
        self._cond.notify_all()
        if not self._warned_spill:
            self._warned_spill = True
            log.warning("the database is not keeping up (locked by another process, or a slow "
                        "disk): rows wait in a spill file; nothing is dropped")

    def _drop(self, count: int) -> None:
        self._stats.dropped += count
        self.done += count
        now = time.monotonic()
        if now - self._warned_drop >= 5.0:
            self._warned_drop = now
            log.warning("store queue and spill file full: %d rows dropped so far this run "
                        "(the disk is slower than the agents; see stats.dropped)",
                        self._stats.dropped)

    def upsert_session(self, update: dict[str, Any]) -> None:
        with self._cond:
            self._check_running()
            pending = self._dirty.get(update["id"])
            if pending is None:
                self._dirty[update["id"]] = update
                self._cond.notify_all()
            else:
                merge_update(pending, update)

    def call(self, kind: str, *args: Any, timeout: float | None) -> Any:
        """Run a request on the writer thread and return its result."""
        request = Request(kind, *args)
        with self._cond:
            self._check_running()
            self._requests.append(request)
            self._cond.notify_all()
        if not request.done.wait(timeout):
            raise TimeoutError(f"the store writer did not answer within {timeout:.0f}s")
        if request.error is not None:
            raise request.error
        return request.result

    def close(self) -> None:
        """Write everything queued, then stop the thread."""
        with self._cond:
            if self.state == "running":
                self.state = "closing"
                self._closing_since = time.monotonic()
            self._cond.notify_all()
        self._thread.join()
        with self._cond:
            if self.state != "failed":
                self.state = "closed"
            if self._spill is not None:
                self._spill.close()
        if self._stats.dropped or self._stats.failed:
            log.warning("the store lost %d rows this run (%d dropped, %d refused)",
                        self._stats.dropped + self._stats.failed, self._stats.dropped,
                        self._stats.failed)

    # -- the thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # a bug, not a database error: fail loudly, never hang
            log.critical("the store writer STOPPED: nothing more will be recorded this run",
                         exc_info=True)
            with self._cond:
                self._failure = exc
                self.state = "failed"
                self._stats.last_error = repr(exc)
                for request in self._requests:
                    request.error = exc
                    request.done.set()
                self._requests.clear()
                self._cond.notify_all()

    def _loop(self) -> None:
        next_prune = time.monotonic() + PRUNE_INTERVAL
        flush = self.flush_seconds
        every = self.session_seconds
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    closing = self.state != "running"
                    oldest = self._oldest_at if self._oldest_at is not None else now
                    queued = self._queued()
                    rows_due = queued > 0 and (
                        closing or queued >= self.batch_size or now >= oldest + flush)
                    sessions_waiting = bool(self._dirty or self._derived)
                    sessions_due = sessions_waiting and (closing or now >= self._sessions_at + every)
                    prune_due = self.retention_days > 0 and now >= next_prune
                    if self._requests or rows_due or sessions_due or prune_due:
                        break
                    if closing:  # and everything is written
                        return
                    waits = [next_prune - now] if self.retention_days > 0 else []
                    if queued:
                        waits.append(oldest + flush - now)
                    if sessions_waiting:
                        waits.append(self._sessions_at + every - now)
                    self._cond.wait(min(waits) if waits else None)
                request = self._requests.popleft() if self._requests else None
                if request is None and not prune_due:
                    rows = self._take_rows(self.batch_size if rows_due else 0)
                    sessions = self._take_sessions() if sessions_due else None
            if request is not None:
                self._serve(request)
            elif prune_due:
                next_prune = time.monotonic() + PRUNE_INTERVAL
                self._prune()
            else:
                self._write(rows, sessions)

    def _take_rows(self, limit: int) -> Rows:
        """Up to ``limit`` queued rows (lock held); wakes producers waiting for space."""
        spill = self._spill
        if spill is not None and spill.count and len(self._pending) < max(limit, 1):
            # The oldest rows on disk come back behind what is in memory.
            self._pending.extend(spill.take(self.max_pending // 2))
        count = min(limit, len(self._pending))
        rows = [self._pending.popleft() for _ in range(count)]
        if not self._pending and not (spill is not None and spill.count):
            self._oldest_at = None
        # (otherwise the rest is at least as old: the next batch goes right away)
        if rows:
            self._cond.notify_all()
        return rows

    def _take_sessions(self) -> Sessions:
        sessions, self._dirty = self._dirty, {}
        return sessions

    def _serve(self, request: Request) -> None:
        try:
            if request.kind == "flush":
                self._flush()
            elif request.kind == "begin_action":
                request.result = self._durable(lambda: self.db.execute(
                    "INSERT INTO actions (session, kind, text, ts, who, outcome, detail, owner) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", request.args[0]).lastrowid)
                self._stats.actions += 1
            elif request.kind == "finish_action":
                outcome, detail, finished_ts, action_id = request.args[0]
                # An empty detail keeps the one given to begin_action.
                request.result = self._durable(lambda: self.db.execute(
                    "UPDATE actions SET outcome = ?, detail = CASE WHEN ? = '' THEN detail "
                    "ELSE ? END, finished_ts = ? WHERE id = ?",
                    [outcome, detail, detail, finished_ts, action_id]).rowcount)
            elif request.kind == "prune":
                request.result = self._prune()
            else:
                raise ValueError(f"unknown store request {request.kind!r}")
        except Exception as exc:
            request.error = exc
            self._stats.last_error = f"{request.kind}: {exc}"
        finally:
            request.done.set()

    def _flush(self) -> None:
        # Only what was queued before the flush: under a steady stream of new
        # rows "everything" would never end.
        with self._cond:
            remaining = self._queued()
        while remaining > 0:
            with self._cond:
                rows = self._take_rows(min(remaining, self.batch_size))
            if not rows:
                break
            remaining -= len(rows)
            self._write(rows, None)
        with self._cond:
            sessions = self._take_sessions()
        if sessions or self._derived:
            self._write([], sessions)

    # -- transactions ------------------------------------------------------------

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

    def _retrying(self, work: Callable[[], Any], *, durable: bool = False,
                  give_up_after: float | None = None) -> Any:
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
                if self.state != "running" and now - self._closing_since > CLOSE_BUSY_SECONDS:
                    raise
                if delay == 0.05:
                    log.warning("database is locked by another process; retrying")
                time.sleep(delay)  # only this thread waits; producers keep queueing
                delay = min(delay * 2, 1.0)

    def _durable(self, work: Callable[[], Any]) -> Any:
        return self._retrying(work, durable=True, give_up_after=DURABLE_BUSY_SECONDS)

    def _write(self, rows: Rows, sessions: Sessions | None) -> None:
        """Commit rows (and session rows when ``sessions`` is given); if SQLite
        refuses the batch, retry row by row and count the bad ones."""
        # Any error a row can cause (sqlite3.Error, but also OverflowError for
        # an integer beyond 64 bits, or a value sqlite3 cannot bind) costs that
        # row only: one bad row must never stop the writer for the whole run.
        try:
            self._commit(rows, sessions)
            if self._stats.dropped != self._losses_recorded[0]:
                self._record_losses()
            self._written(len(rows))
            return
        except Exception as exc:
            log.warning("store batch of %d rows failed (%s); retrying row by row", len(rows), exc)
            self._stats.last_error = str(exc)
        for row in rows:
            try:
                self._commit([row], None)
            except Exception as exc:
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
        self._written(len(rows))

    def add_listener(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(done)`` (on the writer thread) after each write."""
        self._listeners.append(callback)

    def _written(self, count: int) -> None:
        if not count:
            return
        with self._cond:
            self.done += count
            done = self.done
        for callback in self._listeners:
            try:
                callback(done)
            except Exception:
                log.exception("store write listener failed")

    def _record_losses(self) -> None:
        """Keep the run's count of lost rows in ``store_losses`` (for ``history``)."""
        with self._cond:
            counts = (self._stats.dropped, self._stats.failed)
            reason = self._stats.last_error
        if counts == self._losses_recorded:
            return
        try:
            self._retrying(lambda: record_loss(self.db, counts[0], counts[1], reason[:500], self.clock),
                           give_up_after=DURABLE_BUSY_SECONDS)
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
            derived = _merged(self._derived, derived)
            if sessions is not None:
                # One row per session: what its rows said, then the hub's
                # update merged in as a second upsert would merge it.
                updates = _merged(derived, sessions) if sessions else derived
                if updates:
                    self.db.conn.executemany(SESSION_UPSERT, [session_values(u) for u in updates.values()])
            result[:] = [counts, derived]

        self._retrying(work)
        (events, detections, inserted), derived = result
        self._stats.events += inserted
        self._stats.duplicates += events - inserted
        self._stats.detections += detections
        # Only a committed batch moves the numbering and the session info on.
        if sessions is not None:
            self._derived = {}
            self._sessions_at = time.monotonic()
        else:
            self._derived = derived
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
                    [session, session]).fetchone()
                state = SeqState(int(row[0] or 0))
            seqs[session] = state
        return state

    def _insert(self, rows: Rows, seqs: dict[str, SeqState]) -> tuple[tuple[int, int, int], Sessions]:
        """Insert rows in the open transaction; return (events, detections,
        inserted) and what they say about their sessions."""
        events: list[list[Any]] = []
        detections: list[list[Any]] = []
        derived: Sessions = {}
        positions: dict[tuple[int, int], list[Any]] = {}
        for kind, row in rows:
            if kind == "p":  # a file's read position: only its latest counts
                positions[row[0], row[1]] = row
                continue
            session = row[0]
            state = self._seq_state(session, seqs)
            info = derived.get(session)
            if info is None:
                info = derived[session] = {"id": session}
            row = list(row)
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
            # rowcount, not total_changes: the full-text index's trigger writes too
            inserted = conn.executemany(EVENT_INSERT, events).rowcount
        if detections:
            conn.executemany(DETECTION_INSERT, detections)
        if positions:
            conn.executemany(POSITION_UPSERT, list(positions.values()))
        return (len(events), len(detections), inserted), derived

    def _prune(self) -> int:
        """Delete events older than the retention, in chunks (short write locks)."""
        if self.retention_days <= 0:
            return 0
        cutoff = self.clock() - self.retention_days * 86400.0
        total = 0
        while True:
            deleted = self._retrying(lambda: self.db.execute(
                "DELETE FROM events WHERE id IN "
                "(SELECT id FROM events WHERE ts < ? LIMIT ?)", [cutoff, PRUNE_CHUNK]).rowcount)
            total += deleted
            if deleted < PRUNE_CHUNK:
                break
        if total:
            log.info("retention: deleted %d events older than %g days", total, self.retention_days)
        self._stats.pruned += total
        return total
