"""The rows waiting for the store's writer thread: memory first, then the spill file.

:class:`Backlog` is the producers' half of :mod:`monitor.store.writer`: rows
queued in memory up to ``max_pending``, beyond that in the spill file (in
order: once rows are on disk, later ones follow them there), and only when
that is full too waited for and then dropped, every row counted.  The writer
thread takes batches from it and puts back a batch a full disk refused.  All
of it runs under the writer's lock (``cond``), which the producers share.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from monitor.store.fullness import DiskFull, no_space
from monitor.store.spill import Spill
from monitor.store.stats import StoreStats
from monitor.store.transactions import Rows

log = logging.getLogger("loopwatch.store")


class Backlog:
    """Queued rows, their overflow file, and the count of those given and done with."""

    def __init__(
        self,
        cond: threading.Condition,
        stats: StoreStats,
        full: DiskFull,
        *,
        max_pending: int,
        batch_size: int,
        block_seconds: float,
        spill: Spill | None,
    ):
        self.cond = cond
        self.stats = stats
        self.full = full
        self.max_pending = max_pending
        self.batch_size = batch_size
        self.block_seconds = block_seconds
        self.spill = spill
        self.pending: deque[tuple[str, list[Any]]] = deque()
        self.oldest_at: float | None = None  # monotonic time the oldest queued row came
        #: Rows given to enqueue so far, and how many of them are done with
        #: (committed, refused or dropped): a caller that noted ``enqueued``
        #: after adding a row knows it is on disk once ``done`` reaches it.
        self.enqueued = 0
        self.done = 0
        self._torn_seen = 0
        self._warned_drop = -1e9  # monotonic time of the last drop warning
        self._warned_spill = False

    def queued(self) -> int:
        """Rows waiting, in memory and in the spill file (lock held; without it, a hint)."""
        spill = self.spill
        return len(self.pending) + (spill.count if spill is not None else 0)

    def enqueue(self, kind: str, rows: list[list[Any]], running: Callable[[], bool]) -> None:
        """Queue rows (lock held): memory, else the spill file, else wait up to
        ``block_seconds`` (while ``running()``) and drop the overflow, counted."""
        deadline: float | None = None
        self.enqueued += len(rows)
        index = 0
        while index < len(rows):
            spill = self.spill
            space = self.max_pending - len(self.pending)
            if spill is not None and (spill.count or space <= 0):
                lines = spill.room([(kind, row) for row in rows[index:]])
                if lines is not None:
                    self._to_spill(spill, lines)
                    return
            elif space > 0:
                chunk = rows[index : index + space]
                self.pending.extend((kind, row) for row in chunk)
                index += len(chunk)
                if self.oldest_at is None:
                    self.oldest_at = time.monotonic()
                    self.cond.notify_all()
                elif len(self.pending) >= self.batch_size:
                    self.cond.notify_all()
                continue
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + self.block_seconds
            if now >= deadline or not running():
                self.drop(len(rows) - index)
                return
            self.cond.notify_all()
            self.cond.wait(deadline - now)

    def _to_spill(self, spill: Spill, lines: list[bytes]) -> None:
        try:
            spill.append(lines)
        except OSError as exc:  # a full or failing disk: count the rows, never raise
            self.stats.last_error = f"spill file: {exc}"
            full = no_space(exc)
            if full:
                self.full.spill_failed()
            self.drop(len(lines), full=full)
            return
        if self.oldest_at is None:
            self.oldest_at = time.monotonic()
        self.cond.notify_all()
        if not self._warned_spill:
            self._warned_spill = True
            log.warning(
                "the database is not keeping up (locked by another process, or a slow "
                "disk): rows wait in a spill file; nothing is dropped"
            )

    def drop(self, count: int, *, full: bool = False) -> None:
        """``count`` rows are lost: counted (as lost to a full disk while it is full), said."""
        self.stats.dropped += count
        full = full or self.full.full
        if full:
            self.stats.lost_full += count
        self.done += count
        now = time.monotonic()
        if not full and now - self._warned_drop >= 5.0:
            self._warned_drop = now
            log.warning(
                "store queue and spill file full: %d rows dropped so far this run "
                "(the disk is slower than the agents; see stats.dropped)",
                self.stats.dropped,
            )

    def take(self, limit: int) -> Rows:
        """Up to ``limit`` queued rows (lock held); wakes producers waiting for space."""
        spill = self.spill
        if spill is not None and spill.count and len(self.pending) < max(limit, 1):
            # The oldest rows on disk come back behind what is in memory.
            self.pending.extend(spill.take(self.max_pending // 2))
            if spill.torn != self._torn_seen:  # lines that did not decode: lost, counted
                self.drop(spill.torn - self._torn_seen)
                self._torn_seen = spill.torn
        count = min(limit, len(self.pending))
        rows = [self.pending.popleft() for _ in range(count)]
        if not self.pending and not (spill is not None and spill.count):
            self.oldest_at = None
        # (otherwise the rest is at least as old: the next batch goes right away)
        if rows:
            self.cond.notify_all()
        return rows

    def put_back(self, rows: Rows, now: float) -> None:
        """A batch the disk refused goes back at the head of the queue (lock held)."""
        self.pending.extendleft(reversed(rows))
        if rows and self.oldest_at is None:
            self.oldest_at = now

    def give_up(self) -> int:
        """Closing on a disk still full: what is queued is lost, counted (lock held); how many."""
        lost = self.queued()
        self.pending.clear()
        self.oldest_at = None
        if self.spill is not None:
            self.spill.count = 0
        self.drop(lost, full=True)
        self.stats.lost_closing += lost
        return lost
