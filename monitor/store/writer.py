"""The store's ONE writer thread: a bounded queue drained in batched transactions.

Producers (any thread) queue rows and session updates; synchronous requests
(actions, flush, prune) wait for their result.  The thread owns the only
writing connection and commits:

* queued rows at once while it is idle (fewer than ``EAGER_COMMITS`` commits in
  the last ``flush_ms``), else every ``batch_size`` rows or ``flush_ms`` after
  the oldest one (group commit under load);
* a batch the disk is too full to take: kept and retried (:mod:`monitor.store.fullness`);
* session rows at most every ``session_seconds`` (``SESSION_SECONDS``, or
  ``flush_ms`` if longer), one row per session with what its committed rows
  and the hub's updates said (coalesced: with 1,000 live sessions, upserting
  each on every batch would cost more than the events);
* each action in its own transaction with ``synchronous=FULL``.

Database errors never kill the thread: a locked file is retried, a batch SQLite
refuses is retried row by row and the bad rows counted (the transactions
themselves are :mod:`monitor.store.transactions`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlite_utils import Database

from monitor.store.backlog import Backlog
from monitor.store.fullness import CLOSE_SECONDS, DiskFull
from monitor.store.sessions import merge_update
from monitor.store.spill import Spill
from monitor.store.stats import StoreStats
from monitor.store.transactions import NoSpace, Rows, Sessions, Transactions

log = logging.getLogger("loopwatch.store")

PRUNE_INTERVAL = 3600.0
#: Session rows are written at most this often (or every ``flush_ms`` if that
#: is longer), and on flush and close: each is an upsert as costly as a few
#: event rows, and a fleet of live sessions would otherwise keep the writer busy.
SESSION_SECONDS = 1.0
#: Group commit: rows are committed at once while the writer made fewer than this many
#: commits in the last ``flush_ms``; beyond (under load) they wait for a batch or the window.
EAGER_COMMITS = 5


class WriterStopped(RuntimeError):
    """The writer is not running (not started, closing, closed or failed)."""


class Request:
    """Synchronous work for the writer thread, with its result."""

    __slots__ = ("kind", "args", "done", "result", "error")

    def __init__(self, kind: str, *args: Any):
        self.kind = kind
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class Writer:
    """Owns the writing connection and the thread that uses it."""

    def __init__(
        self,
        db: Database,
        *,
        batch_size: int,
        flush_seconds: float,
        retention_days: float,
        max_pending: int,
        block_seconds: float,
        clock: Callable[[], float],
        session_seconds: float | None = None,
        spill: Spill | None = None,
        owner: str | None = None,
        close_seconds: float = CLOSE_SECONDS,
    ):
        self.db = db
        self.batch_size = batch_size
        self.flush_seconds = flush_seconds
        self.session_seconds = max(
            flush_seconds, SESSION_SECONDS if session_seconds is None else session_seconds
        )
        self.retention_days = retention_days
        self.max_pending = max_pending
        self.block_seconds = block_seconds
        self.close_seconds = close_seconds  # closing, a disk still full this long is given up on
        self.clock = clock
        self.state = "running"  # running | closing | closed | failed
        self._cond = threading.Condition()
        self._dirty: Sessions = {}  # the hub's session updates, not yet written
        self._requests: deque[Request] = deque()
        self._stats = StoreStats()
        self._closing_since = 0.0
        self._failure: BaseException | None = None
        self._spill = spill
        self._full = DiskFull(max_pending)
        #: The queued rows (memory, spill file), and how many were given and are done with.
        self.rows = Backlog(
            self._cond,
            self._stats,
            self._full,
            max_pending=max_pending,
            batch_size=batch_size,
            block_seconds=block_seconds,
            spill=spill,
        )
        self._commits: deque[float] = deque(maxlen=EAGER_COMMITS)  # when recent row commits ended
        self._tx = Transactions(
            db,
            self._stats,
            self._cond,
            clock=clock,
            retention_days=retention_days,
            owner=owner,
            closing_since=self._closing,
        )
        self._listeners: list[Callable[[int], None]] = []
        if retention_days > 0:
            self._requests.append(Request("prune"))  # before anything else
        self._thread = threading.Thread(target=self._run, name="loopwatch-store-writer", daemon=True)
        self._thread.start()

    # -- producers (any thread) ----------------------------------------------------

    def _closing(self) -> float | None:
        """Since when the writer is closing (monotonic), None while it runs."""
        return None if self.state == "running" else self._closing_since

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
            return replace(
                self._stats,
                pending=self.rows.queued(),
                spilled=self._spill.total if self._spill is not None else 0,
                disk_full=self._full.full,
            )

    def backlog(self) -> int:
        """Rows waiting (read without the lock: a hint, for pacing)."""
        return self.rows.queued()

    @property
    def enqueued(self) -> int:
        """Rows given to :meth:`enqueue` so far (see :class:`~monitor.store.backlog.Backlog`)."""
        return self.rows.enqueued

    @property
    def done(self) -> int:
        """How many of them are committed, refused or dropped."""
        return self.rows.done

    def enqueue(self, kind: str, rows: list[list[Any]]) -> None:
        """Queue rows: in memory, else in the spill file, else (after up to
        ``block_seconds``) dropped and counted (:meth:`Backlog.enqueue`)."""
        with self._cond:
            self._check_running()
            self.rows.enqueue(kind, rows, lambda: self.state == "running")

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
        said = self._full.stated == self._stats.dropped  # by how the full disk ended
        if self._stats.failed or (self._stats.dropped and not said):
            log.warning(
                "the store lost %d rows this run (%d dropped, %d refused)",
                self._stats.dropped + self._stats.failed,
                self._stats.dropped,
                self._stats.failed,
            )

    # -- the thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # a bug, not a database error: fail loudly, never hang
            log.critical("the store writer STOPPED: nothing more will be recorded this run", exc_info=True)
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
                    oldest = self.rows.oldest_at if self.rows.oldest_at is not None else now
                    queued = self.rows.queued()
                    # Idle, a row is committed at once (a printed detection is durable
                    # within a transaction); busy, rows wait for a batch or the window.
                    eager_at = self._commits[0] + flush if len(self._commits) == EAGER_COMMITS else now
                    rows_due = queued > 0 and (
                        closing or queued >= self.batch_size or now >= min(oldest + flush, eager_at)
                    )
                    sessions_waiting = bool(self._dirty or self._tx.derived)
                    sessions_due = sessions_waiting and (closing or now >= self._tx.sessions_at + every)
                    full_wait = self._full.waiting(now)
                    if full_wait:
                        rows_due = sessions_due = False  # the disk is full: wait for the retry
                        if closing and not self._requests and now - self._closing_since > self.close_seconds:
                            self._give_up()
                            return
                    prune_due = self.retention_days > 0 and now >= next_prune
                    if self._requests or rows_due or sessions_due or prune_due:
                        break
                    if closing and not (queued or sessions_waiting):  # everything is written
                        return
                    self._cond.wait(self._idle_for(now, next_prune, full_wait, queued, sessions_waiting))
                request = self._requests.popleft() if self._requests else None
                if request is None and not prune_due:
                    rows = self.rows.take(self.batch_size if rows_due else 0)
                    sessions = self._take_sessions() if sessions_due else None
            if request is not None:
                self._serve(request)
            elif prune_due:
                next_prune = time.monotonic() + PRUNE_INTERVAL
                self._tx.prune()
            else:
                self._write(rows, sessions)

    def _idle_for(
        self, now: float, next_prune: float, full_wait: bool, queued: int, sessions_waiting: bool
    ) -> float | None:
        """How long the thread may wait (lock held; None: until notified)."""
        waits = [next_prune - now] if self.retention_days > 0 else []
        if full_wait:  # nothing is written before the retry (or, closing, the giving up)
            waits.append(self._full.retry_at - now)
            if self.state != "running":
                waits.append(self._closing_since + self.close_seconds - now)
        else:
            if queued:
                oldest = self.rows.oldest_at if self.rows.oldest_at is not None else now
                eager_at = (
                    self._commits[0] + self.flush_seconds if len(self._commits) == EAGER_COMMITS else now
                )
                waits.append(min(oldest + self.flush_seconds, eager_at) - now)
            if sessions_waiting:
                waits.append(self._tx.sessions_at + self.session_seconds - now)
        return max(min(waits), 0.001) if waits else None

    def _take_sessions(self) -> Sessions:
        sessions, self._dirty = self._dirty, {}
        return sessions

    def _serve(self, request: Request) -> None:
        try:
            if request.kind == "flush":
                self._flush()
            elif request.kind == "begin_action":
                request.result = self._tx.begin_action(request.args[0])
            elif request.kind == "finish_action":
                request.result = self._tx.finish_action(*request.args[0])
            elif request.kind == "prune":
                request.result = self._tx.prune()
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
            remaining = self.rows.queued()
        while remaining > 0:
            with self._cond:
                rows = self.rows.take(min(remaining, self.batch_size))
            if not rows:
                break
            remaining -= len(rows)
            if not self._write(rows, None):
                return  # the disk is full: what is queued waits for the writer's retries
        with self._cond:
            sessions = self._take_sessions()
        if sessions or self._tx.derived:
            self._write([], sessions)

    def _write(self, rows: Rows, sessions: Sessions | None) -> bool:
        """Commit a batch (every write goes through here); False if the disk is full."""
        try:
            self._tx.write(rows, sessions)
        except NoSpace as full:
            self._written(full.committed)
            self._keep(rows[full.committed :], sessions, str(full))
            return False
        if self._full.full:
            with self._cond:
                self._full.resumed(self._stats.dropped)
        if rows:
            self._commits.append(time.monotonic())
        self._written(len(rows))
        return True

    # -- a full disk -------------------------------------------------------------------

    def _give_up(self) -> None:
        """Closing, and the disk stayed full for ``close_seconds`` (lock held): what is
        queued is lost and counted, and the run is told how the full disk ended."""
        sessions = len(self._dirty.keys() | self._tx.derived.keys())
        self._dirty = {}
        self._tx.derived = {}
        lost = self.rows.give_up()
        self._full.gave_up(lost, self._stats.dropped, sessions)

    def _keep(self, rows: Rows, sessions: Sessions | None, error: str) -> None:
        """The disk is full: put the batch back at the head of the queue (in
        memory, bounded by ``max_pending`` with what producers add: beyond it
        rows go to the spill file or are counted lost) and retry later."""
        now = time.monotonic()
        with self._cond:
            self.rows.put_back(rows, now)
            if sessions:
                for session, info in self._dirty.items():  # newer updates merged into the kept ones
                    if session in sessions:
                        merge_update(sessions[session], info)
                    else:
                        sessions[session] = info
                self._dirty = sessions
            self._stats.last_error = f"disk full: {error}"
            self._full.failed(error)

    def add_listener(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(done)`` (on the writer thread) after each write."""
        self._listeners.append(callback)

    def _written(self, count: int) -> None:
        if not count:
            return
        with self._cond:
            self.rows.done += count
            done = self.rows.done
        for callback in self._listeners:
            try:
                callback(done)
            except Exception:
                log.exception("store write listener failed")
