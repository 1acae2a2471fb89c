"""Fair sharing of the socket server's ingest slots between connections.

A few slots bound how many connections read, decode and hand events to the
hub at once (back-pressure with bounded memory).  Handed out first come first
served, one agent flooding its socket takes a slot as often as any other and
every quiet agent waits behind a queue of its chunks.  :class:`FairSlots`
hands a free slot to the waiting connection that read the least lately (bytes,
halved every :data:`HALF_LIFE` seconds), so a quiet session's few events go
next, and a noisy one gets what the others leave.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time

#: Seconds over which a connection's recent reading counts half as much.
HALF_LIFE = 1.0


class Usage:
    """Bytes read recently by one connection, decaying with time."""

    __slots__ = ("value", "at")

    def __init__(self) -> None:
        self.value = 0.0
        self.at = time.monotonic()

    def now(self) -> float:
        now = time.monotonic()
        if now > self.at:
            self.value *= 0.5 ** ((now - self.at) / HALF_LIFE)
            self.at = now
        return self.value

    def add(self, count: int) -> None:
        self.now()
        self.value += count


class FairSlots:
    """A semaphore whose waiters are served lightest first (ties: first come)."""

    def __init__(self, slots: int):
        self.free = slots
        self._waiting: list[tuple[float, int, asyncio.Future]] = []
        self._order = itertools.count()

    async def acquire(self, usage: float = 0.0) -> None:
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (usage, next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # handed a slot just as we were cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _usage, _n, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)
                return
        self.free += 1
