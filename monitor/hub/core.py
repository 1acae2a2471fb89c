"""The :class:`Hub`: its queue, its worker and what it publishes.

Sources :meth:`Hub.submit` batches of events into a bounded queue (a full
queue makes them wait: back-pressure instead of unbounded memory); one worker
feeds them through the :class:`~monitor.detect.engine.Engine`, hands them to
the store (:mod:`monitor.hub.recording`), and tells subscribers what changed
(:mod:`monitor.updates`), coalescing session snapshots under load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from monitor import collector
from monitor.alerts import Alerts
from monitor.config import Config
from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.detect.episodes import ESCALATED, OPENED, EpisodeChange
from monitor.detect.escalation import FALSE_POSITIVE
from monitor.events import Event, Kind, Level
from monitor.formats.base import Problem
from monitor.hub.actions import AUTO_MAX_AGE_SECONDS, AUTO_WHO, Actions
from monitor.hub.guard import Guard
from monitor.hub.intake import BATCH_EVENTS, QUEUE_ITEMS, Intake, Stop
from monitor.hub.pausing import resume_paused
from monitor.hub.publishing import Publisher
from monitor.hub.recording import Recorder
from monitor.hub.seeding import seed_hub
from monitor.hub.sessions import Lifecycle
from monitor.hub.snapshots import Snapshots, latest_per_session, window_copy
from monitor.hub.state import HubSession
from monitor.hub.waiting import follow_event as follow_wait
from monitor.hub.waiting import overdue as overdue_waits
from monitor.identity import current_user
from monitor.updates import (
    ActionRecord,
    DetectionRaised,
    EpisodeChanged,
    ProblemReported,
    SessionInfo,
    Stats,
    WaitingNotice,
)

log = logging.getLogger("loopwatch.hub")

#: How often a file source paused behind a busy store looks again.
FILE_PAUSE_SECONDS = 0.02
#: Every this many ticks, live sessions with a known process are checked for its exit.
EXIT_CHECK_TICKS = 5
#: Detections kept for a UI that subscribes late, and per session of them.
RECENT_DETECTIONS = 500
RECENT_DETECTIONS_PER_SESSION = 50
#: The cyclic garbage collector's first threshold while any hub runs (CPython's
#: default is 700): the hub makes no cycles worth collecting (benchmarks/README.md).
LIVE_GC_THRESHOLD = 10_000


class Hub:
    """Wires sources to the engine, the store and the subscribers."""

    def __init__(
        self,
        config: Config,
        store: Any = None,
        *,
        clock: Callable[[], float] = time.time,
        queue_items: int = QUEUE_ITEMS,
    ):
        self.config = config
        self.store = store
        self.clock = clock
        self.engine = Engine(config, sparklines=True)
        self.who = current_user()
        self.snapshots = Snapshots(self.engine, config.control.guard)
        self.recorder = Recorder(store, self.engine)
        self.publisher = Publisher(self.snapshots, self.recorder)
        self.lifecycle = Lifecycle(config, self.engine, self.snapshots, clock, self.publisher.touch)
        self.publisher.sessions = self.lifecycle.sessions
        if self.recorder.on:
            self.lifecycle.on_forget = self.recorder.session
        self.lifecycle.on_episodes = self.episodes_changed
        self.actions = Actions(self)
        self.guard = Guard(self)
        self.alerts = Alerts(config.alerts)  # its thread runs only when an alert is configured
        self.intake = Intake(queue_items)
        self._queue = self.intake.queue
        self._worker: asyncio.Task | None = None
        self._ticker: asyncio.Task | None = None
        self._detections: deque[Detection] = deque(maxlen=RECENT_DETECTIONS)
        self.events_total = 0
        self.detections_total = 0
        self.problems_total = 0
        self.started = False
        self.stopped = False
        self.file_pauses = 0  # times a file source waited for the store (room_for_files)
        self._collects_rarely = False

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        if self.started:
            return
        self.started = True
        await seed_hub(self)  # what an earlier watcher recorded: shown, escalating on (hub.seeded)
        collector.hold(LIVE_GC_THRESHOLD)
        self._collects_rarely = True
        self._worker = asyncio.create_task(self._work(), name="loopwatch-hub")
        self._ticker = asyncio.create_task(self._tick(), name="loopwatch-hub-ticker")
        self.alerts.start(self.publish)

    async def stop(self) -> None:
        """Process everything queued, finish running actions, flush the store."""
        if self.stopped:
            return
        self.stopped = True
        try:
            await self._finish()
        finally:
            if self._collects_rarely:
                self._collects_rarely = False
                collector.release(LIVE_GC_THRESHOLD)

    async def _finish(self) -> None:
        await _finish(self)

    async def _drain_now(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            self.intake.taken(item)
            if not isinstance(item, Stop):
                self._process(*item)
            self._queue.task_done()

    # -- input ----------------------------------------------------------------------------

    @property
    def keeps_positions(self) -> bool:
        """File sources hand :meth:`submit` their read positions (to be stored)."""
        return self.store is not None

    async def submit(
        self, events: Sequence[Event], problems: Sequence[Problem] = (), *, position: dict | None = None
    ) -> None:
        """Queue events for processing; waits while the queue is full (back-pressure).

        ``position``: how far a file source has read, recorded in the store
        after these events (a restarted watcher resumes the file there)."""
        if self.stopped:
            raise RuntimeError("the hub is stopped")
        events = list(events)
        problems = list(problems)
        if not events and not problems and position is None:
            return
        await self.intake.put(events, problems, self.clock(), position)

    async def room_for_files(self) -> None:
        """Wait while the store is behind (``Store.backlogged``).  A file source
        awaits this before each batch: a file is read later, not dropped, while
        events that cannot wait (sockets, OTLP) keep the store's queue to themselves."""
        store = self.store
        backlogged = getattr(store, "backlogged", None)
        if backlogged is None or not backlogged():
            return
        self.file_pauses += 1
        while not self.stopped and backlogged():
            await asyncio.sleep(FILE_PAUSE_SECONDS)

    def saturated(self) -> bool:
        """The queue is full or the store is behind (``Store.backlogged``): a source
        that can ask its sender to retry later should (OTLP answers 503), as files pause."""
        backlogged = getattr(self.store, "backlogged", None)
        return self.intake.saturated() or (backlogged is not None and backlogged())

    async def join(self) -> None:
        """Wait until everything submitted so far has been processed and published."""
        await self._queue.join()
        await self.guard.settled()  # a denial's message is in its mailbox before a poll drains it
        self.publisher.now()

    async def processed(self) -> None:
        """Wait until everything submitted so far has been processed; unlike
        :meth:`join`, updates stay coalesced (a source pacing itself calls it often)."""
        await self._queue.join()

    def register_channel(self, session: str, channel: Any) -> None:
        """``channel`` is how ``session``'s agent can be reached from now on."""
        self.lifecycle.register_channel(session, channel)

    def confirm_pid(self, session: str, identity: Any, how: str) -> None:
        """The agent of ``session`` proved ``identity`` is its process (``how``, in
        words): the only kind of pid ``auto_kill`` signals.  A log file alone never confirms."""
        self.lifecycle.confirm_pid(session, identity, how)

    # -- subscribers ---------------------------------------------------------------------------

    def subscribe(
        self, callback: Callable[[object], None], kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        """See :meth:`~monitor.hub.subscribers.Subscribers.subscribe`; returns what unsubscribes."""
        return self.publisher.subscribe(callback, kinds)

    def wants_sessions(self) -> bool:
        return self.publisher.subscribers.want_sessions()

    def publish(self, update: object) -> None:  # to the subscribers that take its kind
        self.publisher.publish(update)

    def episodes_changed(self, changes: Sequence[EpisodeChange]) -> None:
        """Store and publish episode changes made outside event processing (an ack, a close…)."""
        self.recorder.episodes(changes)
        for change in changes:
            self.publish(EpisodeChanged(change))

    def touch(self, state: HubSession) -> None:
        """The session changed: publish it and store it soon (:meth:`Publisher.touch`)."""
        self.publisher.touch(state)

    @property
    def publish_interval(self) -> float:
        """How often changed sessions are published (a UI that flushes less often raises it)."""
        return self.publisher.interval

    @publish_interval.setter
    def publish_interval(self, seconds: float) -> None:
        self.publisher.interval = seconds

    # -- reads ---------------------------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        info = self.snapshots.info
        return [info(state) for state in self.lifecycle.sessions.values()]

    def session(self, id: str) -> SessionInfo | None:
        state = self.lifecycle.sessions.get(id)
        return self.snapshots.info(state) if state is not None else None

    def recent_detections(self) -> list[Detection]:
        """Detections raised lately in live sessions (at most
        ``RECENT_DETECTIONS_PER_SESSION`` each), oldest first: what a UI that
        subscribes now has missed."""
        return latest_per_session(self._detections, self.lifecycle.live, RECENT_DETECTIONS_PER_SESSION)

    def pattern_history(self, session: str, detector: str, pattern: str) -> tuple[int, float | None]:
        """How often ``detector`` flagged ``pattern`` in ``session``, and the
        event time an acknowledgement quiets it until (``None``: not acknowledged)."""
        return self.engine.pattern_history(session, detector, pattern)

    def stats(self) -> Stats:
        live, warnings = _live_and_warning(self.lifecycle.sessions.values(), self.recorder.level)
        return Stats(
            self.events_total,
            self.intake.rate(self.clock()),
            live,
            warnings,
            self.engine.costs.day(self.clock()),
            self.recorder.banner(),
        )

    def describe_kill(self, session: str) -> str:
        """What a kill would do ("SIGTERM pid 123 (python agent.py) …"), or why it cannot."""
        return self.actions.describe_kill(session)

    async def act(
        self,
        kind: str,
        session: str,
        *,
        text: str | None = None,
        detection: Detection | None = None,
        detector: str | None = None,
    ) -> ActionRecord:
        """Record, then carry out, an operator action; publish its outcome."""
        return await self.actions.act(
            kind, session, text=text, detection=detection, detector=detector, who=self.who
        )

    # -- the worker ------------------------------------------------------------------------------

    async def _work(self) -> None:
        queue = self._queue
        while True:
            item = await queue.get()
            # Then what else is queued already, up to BATCH_EVENTS events: one
            # round of the event loop per backlog, not per queued item (1,000
            # tailed files submit a line or two each).
            budget = BATCH_EVENTS
            while True:
                try:
                    if isinstance(item, Stop):
                        return
                    self.intake.taken(item)
                    try:
                        self._process(*item)
                    except Exception:  # a bug must cost one batch, not the monitor
                        log.exception("hub failed to process a batch")
                    budget -= len(item[0]) + 1
                finally:
                    queue.task_done()
                if budget <= 0 or queue.empty():
                    break
                item = queue.get_nowait()
            self.publisher.soon()  # coalesced: one SessionChanged per session per interval
            # Let sources, the UI and actions run between batches.
            await asyncio.sleep(0)

    def _process(
        self, events: list[Event], problems: list[Problem], arrival: float, position: dict | None = None
    ) -> None:
        self._report(problems)
        if not events:
            self.recorder.position(position)
            return
        found: list[Detection] = []
        changes: list[EpisodeChange] = []  # what the events did to loop episodes
        engine = self.engine
        lifecycle = self.lifecycle
        sessions = lifecycle.sessions
        self.intake.count(arrival, len(events))
        dropped: set[int] = set()  # the events the engine dropped (by id)
        for event in events:
            state = sessions.get(event.session)
            if state is None:
                state = lifecycle.new_session(event)
            elif state.status != "live":
                lifecycle.revive(state)
            processed = engine.process(event)
            if processed.dropped:
                # The same call from a second channel (a tailed transcript and
                # the hook): counted once, stored once.
                dropped.add(id(event))
                continue
            detections: Sequence[Detection] = processed.detections
            changes.extend(processed.episodes)
            if detections and any(d.suppressed == FALSE_POSITIVE for d in detections):
                # Marked a false positive by the operator: not shown, not stored, level untouched.
                detections = [d for d in detections if d.suppressed != FALSE_POSITIVE]
            follow_wait(state, event)
            lifecycle.observe(state, event, arrival)
            remember(state, event, detections)
            self.guard.observe(state, event, detections)
            if state.nudged:
                self.actions.follow_nudge(state, event, detections)
            if detections:
                found.extend(detections)
                self._detections.extend(detections)
            if event.kind is Kind.SESSION_END:
                lifecycle.close(state, "ended")
        if dropped:
            events = [event for event in events if id(event) not in dropped]
        self.events_total += len(events)
        self.recorder.add(events, found, position, sessions, changes)
        for change in changes:
            self.publish(EpisodeChanged(change))
        auto_respond = self.actions.auto_respond
        for detection in found:
            self.detections_total += 1
            self.publish(DetectionRaised(detection))
            auto_respond(detection)
        if self.alerts.on:
            _alert(self, changes, sessions)

    def _report(self, problems: list[Problem]) -> None:  # bad input: counted, published as bounded
        for problem in problems:
            self.problems_total += 1
            reported = self.intake.reported(problem)
            if reported is not None:
                self.publish(ProblemReported(reported))

    # -- periodic work ------------------------------------------------------------------------------

    async def _tick(self) -> None:
        idle = self.config.sources.idle_timeout_seconds
        period = min(1.0, max(0.05, idle / 10)) if idle > 0 else 1.0
        ticks = 0
        while True:
            await asyncio.sleep(period)
            ticks += 1
            try:
                if ticks % EXIT_CHECK_TICKS == 0:
                    self.sweep_exited()
                self.sweep_idle()
                self.notice_waits()
                self.publisher.now()
                self.recorder.sessions(self.lifecycle.sessions)
                for problem in self.recorder.losses():
                    self.publish(ProblemReported(problem))
                self.publish(self.stats())
            except Exception:
                log.exception("hub tick failed")

    def sweep_exited(self) -> list[str]:
        """End live sessions whose process (captured when its pid was first seen) has exited."""
        ended = self.lifecycle.sweep_exited()
        if ended:
            self.publisher.now()
        return ended

    def notice_waits(self) -> list[WaitingNotice]:
        """Publish a notice per session waiting past ``[sources] waiting_notice_seconds`` (once a wait)."""
        return _notice_waits(self)

    def sweep_idle(self) -> list[str]:
        """Close live sessions silent for longer than the idle timeout; return their ids."""
        closed = self.lifecycle.sweep_idle()
        if closed:
            self.publisher.now()
        return closed


def _live_and_warning(sessions: Iterable[HubSession], level: Callable[[str], Level]) -> tuple[int, int]:
    """How many of ``sessions`` are live, and how many not ended are at warn or above."""
    live = warnings = 0
    for state in sessions:
        if state.status == "live":
            live += 1
        if state.status != "ended" and level(state.id) >= Level.WARN:
            warnings += 1
    return live, warnings


def _alert(hub: Hub, changes: Iterable[EpisodeChange], sessions: dict[str, HubSession]) -> None:
    """One alert per loop episode reaching a rung (opened or escalated), rate-limited per episode."""
    for change in changes:
        detection = change.detection
        if change.kind not in (OPENED, ESCALATED) or detection is None:
            continue
        if hub.clock() - detection.ts <= AUTO_MAX_AGE_SECONDS:  # not for an old log read from the start
            agent = getattr(sessions.get(detection.session), "agent", None)
            hub.alerts.offer(detection, agent, key=(detection.session, change.episode.number))


def _notice_waits(hub: Hub) -> list[WaitingNotice]:
    seconds = hub.config.sources.waiting_notice_seconds
    notices = overdue_waits(hub.lifecycle.sessions.values(), hub.clock(), seconds)
    for notice in notices:
        hub.publish(notice)
    return notices


async def _finish(hub: Hub) -> None:
    """Stop the worker and ticker, finish actions and alerts, flush the store."""
    if hub._worker is not None:
        await hub._queue.put(Stop())
        await asyncio.gather(hub._worker, return_exceptions=True)
    else:  # never started: still process what was queued
        await hub._drain_now()
    if hub._ticker is not None:
        hub._ticker.cancel()
        await asyncio.gather(hub._ticker, return_exceptions=True)
    if hub.actions.running:
        await asyncio.gather(*list(hub.actions.running), return_exceptions=True)
    await hub.guard.settled()
    await resume_paused(hub.actions.act, hub.lifecycle.sessions.values(), AUTO_WHO)
    await asyncio.to_thread(hub.alerts.stop)
    hub.lifecycle.stop_all()
    hub.publisher.now()
    hub.recorder.sessions(hub.lifecycle.sessions, force=True)
    hub.publish(hub.stats())
    await _flush(hub.store)


async def _flush(store: Any) -> None:
    """Wait until ``store`` (if any) has written everything it was given."""
    if store is not None:
        try:
            await asyncio.to_thread(store.flush)
        except Exception:
            log.exception("store flush failed")


def remember(state: HubSession, event: Event, detections: Sequence[Detection]) -> None:
    """What a session keeps of an event the engine took: where OTLP reached it (no automatic action
    on what OTLP alone says), a copy for its window, its latest detections."""
    if event.source.startswith("otlp:"):
        state.otlp_seq = event.seq or state.otlp_seq
    kind = event.kind
    if (kind is Kind.TOOL_CALL or kind is Kind.MESSAGE) and event.seq:
        recent = state.recent
        if not recent or recent[-1].seq < event.seq:  # not a duplicate the engine dropped
            recent.append(window_copy(event))
    for detection in detections:
        state.last_detection = detection
        state.latest[detection.detector] = detection
