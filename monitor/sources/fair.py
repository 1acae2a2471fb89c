"""Fair, coalesced hand-over of the sources' events to the hub.

Each socket connection, each followed file and the OTLP receiver decode what
they read into their own :class:`Lane`; one pump
(:class:`IngestMux`) gathers what the lanes hold into a single hub submission
of at most :data:`BATCH_EVENTS` events, and gathers the next only once the hub
has processed it.  So:

* however many connections deliver a few lines each, the hub gets one batch
  per round, not one per read (coalescing);
* the hub's queue stays one batch deep: a newly arrived event waits behind
  at most the batch being processed, never behind a backlog; and the batch
  size adapts (:data:`MIN_BATCH_EVENTS`..:data:`BATCH_EVENTS`) so a round
  takes about :data:`ROUND_SECONDS` when the monitor has the CPU for it;
* each batch takes lanes lightest first (events handed over lately, halved
  every :data:`HALF_LIFE` seconds), each at most its share of the batch, so a
  quiet session's few events go in the next batch and a flooding agent gets
  what the others leave (fair sharing);
* reading is shared out too (:class:`ReadTurns`): each round the
  connections read about two batches' worth of bytes, lightest lane first,
  so a hundred backlogged connections never all decode a chunk in one turn
  of the event loop (that stalled it for most of a second);
* a connection whose lane is full (:data:`LANE_EVENTS`, or
  :data:`TOTAL_EVENTS` waiting in all) stops reading its socket until the
  pump took from it: the backlog waits in the kernel's socket buffers and
  then in the client, which blocks (back-pressure); nothing is dropped;
* while the store is behind but catching up (``Store.backlogged``, its
  ``written`` count moving) the pump gives each lane a slice of
  :data:`MIN_SHARE` events every :data:`STORE_POLL_SECONDS` and files none:
  a quiet agent's few events still go at once, a flood waits in its lane and
  behind it, so what was accepted but not yet stored stays a few batches and
  a shutdown, which stores all of it, stays short under any flood.  A store
  that does not move for :data:`STORE_STALL_SECONDS` (locked by another
  process, a full disk) is not waited for: agents are never held up by it,
  their events go to the store's memory queue and spill file as they come
  (counted if lost).

Events of one lane are handed over in the order they were put, so the order
of each session's events on a connection is kept.  A file's lane carries its
read position: handed to the hub once every event read before it was, so a
restart resumes exactly there; and on close what a file's lane still holds is
left to be read again by the next run (from that position) instead of
holding the shutdown up (``rereadable``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from monitor.events import Event
from monitor.formats.base import Problem

if TYPE_CHECKING:
    from monitor.sources import LiveSink

log = logging.getLogger("loopwatch.sockets")

#: Seconds over which a lane's recent hand-overs count half as much.
HALF_LIFE = 1.0
#: Events per hub submission at most (the hub's own batch size)...
BATCH_EVENTS = 512
#: ...and at least, when the batch size adapts to the time a round takes
#: (smaller batches cost ~10 % more CPU per event on a starved core).
MIN_BATCH_EVENTS = 128
#: Wall time one round (a batch processed, plus the reads meanwhile) should
#: take: a newly arrived event waits about two rounds, so on a starved core
#: the batch shrinks.
ROUND_SECONDS = 0.02
#: The least a lane gets of a batch when many lanes wait (with 100 lanes,
#: 512 // 100 would be 5: a quiet agent's step still fits).
MIN_SHARE = 8
#: Bytes the connections read per round, whatever two batches' worth comes to.
READ_BUDGET_MIN = 16 * 1024
READ_BUDGET_MAX = 1 << 20
#: A store behind that committed nothing for this long is stuck, not slow: not waited for.
STORE_STALL_SECONDS = 2.0
#: Time between the slices the pump gives while the store is behind.
STORE_POLL_SECONDS = 0.02
#: A connection stops reading while this many of its events wait...
LANE_EVENTS = 1024
#: ...or while it has some waiting and this many wait in all lanes.
TOTAL_EVENTS = 8192


class Usage:
    """A count (events handed over) decaying with time."""

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


class Lane:
    """What one connection decoded and the hub has not been handed yet."""

    __slots__ = (
        "name",
        "events",
        "problems",
        "position",
        "rereadable",
        "apart",
        "usage",
        "in_flight",
        "taken",
        "_room",
        "_flush",
    )

    def __init__(self, name: str, *, rereadable: bool = False, apart: bool = False):
        self.name = name
        self.events: list[Event] = []
        self.problems: list[Problem] = []
        #: A file's read position after the events put so far (the hub records it after them).
        self.position: dict | None = None
        #: What it holds can be read again from its source (a file): not flushed on close.
        self.rereadable = rereadable
        #: Its source bounds it itself (OTLP answers 503 beyond its backlog): its
        #: events do not count towards TOTAL_EVENTS, which pauses the other lanes.
        self.apart = apart
        self.usage = Usage()
        self.in_flight = False  # taken into the batch being submitted
        self.taken = 0  # how many of its events that batch holds
        self._room: list[asyncio.Future] = []  # the connection, waiting to read again
        self._flush: list[asyncio.Future] = []  # a poll, waiting for what came before it

    def __len__(self) -> int:
        return len(self.events)

    @staticmethod
    def _wake(waiters: list[asyncio.Future]) -> None:
        for future in waiters:
            if not future.done():
                future.set_result(None)
        waiters.clear()

    @staticmethod
    async def _wait(waiters: list[asyncio.Future]) -> None:
        future = asyncio.get_running_loop().create_future()
        waiters.append(future)
        await future


class ReadTurns:
    """Who reads (and decodes) next: a byte budget per round, lightest lane first.

    Without it, every connection with a backlog reads and decodes a chunk in
    the same turn of the event loop: 100 of them stalled the loop for most of
    a second.  While the round's budget lasts a connection reads at once;
    after that it waits, and the next round hands turns to the waiting lanes
    that were served least lately (a quiet agent's first).
    """

    def __init__(self, budget: int):
        self.budget = budget
        self.spent = 0
        self.read_size = (
            float(READ_BUDGET_MIN) / 4
        )  # bytes per read, smoothed: how many turns a budget allows
        self._waiting: list[tuple[float, int, asyncio.Future]] = []
        self._order = itertools.count()
        self.on_wait = lambda: None

    @property
    def waiting(self) -> bool:
        while self._waiting and self._waiting[0][2].done():
            heapq.heappop(self._waiting)  # cancelled (the connection closed)
        return bool(self._waiting)

    async def take(self, lane: Lane) -> None:
        if self.spent < self.budget and not self.waiting:
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (lane.usage.now(), next(self._order), future))
        self.on_wait()
        await future

    def spend(self, count: int) -> None:
        self.spent += count
        self.read_size += (count - self.read_size) / 8

    def new_round(self, budget: int) -> int:
        """Reset the budget and hand turns to the lightest waiters it covers; how many."""
        self.budget, self.spent = budget, 0
        granted = 0
        expected = 0.0
        while expected < budget and self.waiting:
            _usage, _n, future = heapq.heappop(self._waiting)
            future.set_result(None)
            granted += 1
            expected += max(1.0, self.read_size)
        return granted


class IngestMux:
    """Gathers the lanes' events into hub submissions, lightest lane first."""

    def __init__(
        self,
        hub: LiveSink,
        *,
        batch_events: int = BATCH_EVENTS,
        lane_events: int = LANE_EVENTS,
        total_events: int = TOTAL_EVENTS,
    ):
        self.hub = hub
        self.batch_events = max(1, batch_events)
        self.batch_size = self.batch_events  # adapted to ROUND_SECONDS as rounds are timed
        self.lane_events = max(1, lane_events)
        self.total_events = max(1, total_events)
        self.ready: dict[Lane, None] = {}  # lanes with something waiting, in arrival order
        self.pending = 0  # events waiting in all lanes
        self.batches = 0  # hub submissions made
        self.submitted = 0  # events handed to the hub
        self.lost = 0  # events the hub refused (it was stopped): logged, never silent
        self.left = 0  # events of files left on close, to be read again from their positions
        self.apart = 0  # events waiting in lanes bounded by their source (Lane.apart)
        self.slowest_round = 0.0  # seconds, for benchmarks (reset by them)
        self._wake = asyncio.Event()
        self.turns = ReadTurns(READ_BUDGET_MIN)
        self.turns.on_wait = self._wake.set
        self._bytes = self._decoded = 0  # for the bytes an event takes, lately
        self._closing = False
        self._task: asyncio.Task | None = None
        self.store_waits = 0  # rounds that waited for the store to catch up
        self._store_done = -1.0  # the store's written count when last looked at...
        self._store_moved_at = 0.0  # ...and when it last moved

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._pump(), name="loopwatch-socket-ingest")

    async def close(self) -> None:
        """Hand everything still waiting to the hub, then stop the pump."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # -- the connections' side -----------------------------------------------------------------

    def lane(self, name: str, *, rereadable: bool = False, apart: bool = False) -> Lane:
        return Lane(name, rereadable=rereadable, apart=apart)

    def closing(self) -> bool:
        """Closing: a source that can read again later should stop putting."""
        return self._closing

    async def turn(self, lane: Lane) -> None:
        """Wait for ``lane``'s connection's turn to read (see :class:`ReadTurns`)."""
        await self.turns.take(lane)

    def read(self, count: int) -> None:
        """A connection read ``count`` bytes on its turn."""
        self.turns.spend(count)
        self._bytes += count

    def _read_budget(self) -> int:
        """Bytes to read per round: about two batches' worth of events."""
        if self._decoded > 100_000:  # keep it recent
            self._bytes //= 2
            self._decoded //= 2
        per_event = self._bytes / self._decoded if self._decoded else 256
        return int(min(READ_BUDGET_MAX, max(READ_BUDGET_MIN, 2 * self.batch_size * per_event)))

    def put(
        self, lane: Lane, events: list[Event], problems: list[Problem], position: dict | None = None
    ) -> None:
        """Queue a source's decoded events (never waits: see :meth:`room`);
        ``position``: where a file was read to, recorded after these events."""
        self._decoded += len(events)
        if position is not None:
            lane.position = position
        elif not events and not problems:
            return
        lane.events.extend(events)
        lane.problems.extend(problems)
        self.pending += len(events)
        if lane.apart:
            self.apart += len(events)
        self.ready[lane] = None
        self._wake.set()

    def withdraw(self, lane: Lane) -> list[Event]:
        """Take back the events ``lane`` holds that the hub was not handed yet
        (its source keeps them: OTLP writes them to a pending file at stop)."""
        events, lane.events = lane.events, []
        self.pending -= len(events)
        if lane.apart:
            self.apart -= len(events)
        if lane in self.ready and not lane.problems:
            del self.ready[lane]
        lane._wake(lane._room)
        if not lane.in_flight:
            lane._wake(lane._flush)
        return events

    def full(self, lane: Lane) -> bool:
        return bool(lane.events) and (
            len(lane.events) >= self.lane_events or self.pending - self.apart >= self.total_events
        )

    async def room(self, lane: Lane) -> None:
        """Wait until ``lane`` may take another read's events.  A lane with
        nothing waiting always may: a quiet agent never waits behind the total."""
        while self.full(lane):
            await lane._wait(lane._room)

    async def flushed(self, lane: Lane) -> None:
        """Wait until everything put in ``lane`` so far is in the hub's queue."""
        while lane in self.ready or lane.in_flight:
            await lane._wait(lane._flush)

    # -- the pump ---------------------------------------------------------------------------------

    async def _pump(self) -> None:
        while True:
            if self.turns.new_round(self._read_budget()):
                await asyncio.sleep(0)  # the connections given a turn read before the batch is gathered
            if not self.ready:
                if self._closing:
                    return
                if self.turns.waiting:
                    continue  # the next round's turns
                self._wake.clear()
                await self._wake.wait()
                continue
            slow = self._store_slow()
            events, problems, served = self.gather(MIN_SHARE if slow else None)
            started = time.monotonic()
            try:
                await self.hub.submit(events, problems)
                await self._positions(served)
                self.batches += 1
                self.submitted += len(events)
            except Exception:  # the hub stopped under us: say how much, never silently
                self.lost += len(events)
                log.exception("socket ingest: %d events could not be handed to the hub", len(events))
            finally:
                for lane in served:
                    lane.in_flight = False
                    lane.taken = 0
                    lane._wake(lane._flush)
                    if lane._room and not self.full(lane):  # not every served lane: 100 wake-ups a round cost
                        lane._wake(lane._room)
            if not self._closing:
                # Keep the hub's queue one batch deep: what arrives meanwhile
                # is shared out fairly in the next batch instead of queued FIFO.
                await self.hub.processed()
                seconds = time.monotonic() - started
                self.slowest_round = max(self.slowest_round, seconds)
                self._adapt(len(events), seconds)
                if slow:
                    self.store_waits += 1
                    await asyncio.sleep(STORE_POLL_SECONDS)  # the store's turn

    def _store_slow(self) -> bool:
        """The store is behind and catching up (see the module's docstring)."""
        store: Any = getattr(self.hub, "store", None)
        backlogged = getattr(store, "backlogged", None)
        if backlogged is None or self._closing or not backlogged():
            return False
        now = time.monotonic()
        done = store.written()
        if done != self._store_done:
            self._store_done, self._store_moved_at = done, now
            return True
        return now - self._store_moved_at < STORE_STALL_SECONDS  # else stuck: not waited for

    async def _positions(self, served: list[Lane]) -> None:
        """The read positions of the files whose lanes were emptied, queued behind their events."""
        for lane in served:
            if lane.position is not None and not lane.events:
                where, lane.position = lane.position, None
                await self.hub.submit([], [], position=where)  # type: ignore[call-arg]

    def _adapt(self, count: int, seconds: float) -> None:
        """Size the next batch so that a round takes about ROUND_SECONDS."""
        if count < MIN_BATCH_EVENTS or seconds <= 0:
            return  # too small to say what an event costs
        fits = ROUND_SECONDS * count / seconds
        size = (self.batch_size + fits) / 2  # smoothed: one slow round is not a trend
        self.batch_size = int(min(self.batch_events, max(MIN_BATCH_EVENTS, size)))

    def gather(self, slice_: int | None = None) -> tuple[list[Event], list[Problem], list[Lane]]:
        """One batch: lanes lightest first, each up to its share, in rounds
        until the batch is full or every lane is empty.  ``slice_``: the store
        is behind; each lane gives at most that many, files none (they wait)."""
        if self._closing:
            self._leave_rereadable()
        lanes = sorted(self.ready, key=lambda lane: lane.usage.now())
        if slice_ is not None:
            lanes = [lane for lane in lanes if not lane.rereadable]
            if not lanes:
                return [], [], []
        budget = self.batch_size
        share = max(MIN_SHARE, budget // len(lanes)) if slice_ is None else slice_
        events: list[Event] = []
        problems: list[Problem] = []
        served: list[Lane] = []
        for lane in lanes:
            if lane.problems:
                problems.extend(lane.problems)
                lane.problems = []
            served.append(lane)
            lane.in_flight = True
        while budget > 0:
            took = 0
            for lane in lanes:
                take = min(len(lane.events), share, budget - took)
                if take <= 0:
                    continue
                events.extend(lane.events[:take])
                del lane.events[:take]
                lane.usage.add(take)
                lane.taken += take
                if lane.apart:
                    self.apart -= take
                took += take
            budget -= took
            if not took or slice_ is not None:
                break
        self.pending -= len(events)
        for lane in lanes:
            if not lane.events:
                del self.ready[lane]
        return events, problems, served

    def _leave_rereadable(self) -> None:
        """Closing: what files' lanes hold is read again by the next run from
        their stored position (not yet moved past it), so it does not hold the shutdown up."""
        for lane in [lane for lane in self.ready if lane.rereadable]:
            self.pending -= len(lane.events)
            self.left += len(lane.events)
            lane.events.clear()
            lane.position = None
            if not lane.problems:
                del self.ready[lane]
            lane._wake(lane._room)
