"""The hub's input: a queue bounded twice (by queued items and by queued
events), how much of a source's bad input is reported, and the input rate.

A full queue makes :meth:`Intake.put` wait (back-pressure instead of
unbounded memory); counting events too keeps a deep queue of big batches from
becoming latency for every session behind it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from monitor.events import Event
from monitor.formats.base import Problem

#: Events per queued item; bigger submissions are split.
BATCH_EVENTS = 512
#: Queued items before :meth:`Intake.put` waits.
QUEUE_ITEMS = 64
#: ...or queued events: what a newly arrived event waits behind (a fraction
#: of a second of work: see benchmarks/README.md).
QUEUE_EVENTS = 2048
#: Problems published per source before they are only counted.
PROBLEMS_PER_SOURCE = 200


class Stop:
    """Queue sentinel: everything before it has been processed."""


class Intake:
    """Batches of ``(events, problems, arrival, position)`` waiting for the worker."""

    def __init__(self, items: int = QUEUE_ITEMS):
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=max(1, items))
        self.events = 0  # queued events
        self._room = asyncio.Event()  # set when fewer than QUEUE_EVENTS are queued
        self._room.set()
        self._problems_by_source: dict[str, int] = {}
        self._rate: deque[list[float]] = deque(maxlen=8)  # [arrival second, events processed]

    async def put(
        self, events: list[Event], problems: list[Problem], arrival: float, position: dict | None
    ) -> None:
        last = max(len(events) - 1, 0) // BATCH_EVENTS * BATCH_EVENTS
        for start in range(0, max(len(events), 1), BATCH_EVENTS):
            chunk = events[start : start + BATCH_EVENTS]
            while self.events >= QUEUE_EVENTS:
                self._room.clear()
                await self._room.wait()
            self.events += len(chunk)
            await self.queue.put(
                (chunk, problems if start == 0 else [], arrival, position if start == last else None)
            )

    def saturated(self) -> bool:
        return self.queue.full() or self.events >= QUEUE_EVENTS

    def taken(self, item: Any) -> None:
        """The worker took ``item`` off the queue."""
        if not isinstance(item, Stop):
            self.events -= len(item[0])
            if self.events < QUEUE_EVENTS:
                self._room.set()

    def count(self, arrival: float, events: int) -> None:
        """``events`` that arrived at ``arrival`` were processed."""
        second = int(arrival)
        rate = self._rate
        if rate and rate[-1][0] == second:
            rate[-1][1] += events
        else:
            rate.append([second, events])

    def rate(self, now: float) -> float:
        """Events per second processed over the last five whole seconds."""
        second = int(now)
        rate = self._rate
        window = [count for sec, count in rate if second - 5 <= sec < second]
        span = max(1, min(5, second - rate[0][0])) if rate else 1
        return sum(window) / span

    def reported(self, problem: Problem) -> Problem | None:
        """What to publish about bad input from ``problem``'s source: the
        problem itself, once a note that the rest are only counted, then nothing."""
        count = self._problems_by_source.get(problem.source, 0) + 1
        self._problems_by_source[problem.source] = count
        if count <= PROBLEMS_PER_SOURCE:
            return problem
        if count == PROBLEMS_PER_SOURCE + 1:
            return Problem(
                problem.source,
                problem.line,
                f"more than {PROBLEMS_PER_SOURCE} problems from this source; counting the rest silently",
            )
        return None
