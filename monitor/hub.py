"""The live core: sources → engine → escalation → store → subscribers.

One :class:`Hub` runs on one asyncio loop (the headless watcher's, or
Textual's).  Sources :meth:`Hub.submit` batches of events into a bounded queue
(a full queue makes them wait: back-pressure instead of unbounded memory); one
worker feeds them through the :class:`~monitor.detect.engine.Engine`, queues
them for the :class:`~monitor.store.Store`, and tells subscribers what changed.

Sessions are created on first sight and closed (their detector state freed) on
``session_end`` or when idle for ``[sources] idle_timeout_seconds``; a closed
session that speaks again is revived, and ended when its process (when one was
proven to be its) exits.  A session is ``live`` only while a source delivers it: replayed history (events older than ten idle timeouts) goes
idle a few seconds after its source went quiet, and when the hub stops, every
session not ended is ``stopped`` (its watcher stopped), in the store too.

After a delivered inject a session is *nudged* (``SessionInfo.nudged``) until
the agent has made ``RECOVERY_STEPS`` calls or replies in a row without a
detection at warn or above: then it is back to watching (out of the open
warnings; its detections, peak and the inject stay in the history).  Each is described by an immutable
:class:`SessionInfo` snapshot, rebuilt lazily when it changed.

Operator actions go through :meth:`Hub.act`: the action is committed to the
store *before* it is carried out, delivered through the session's channel (its
socket, the inbox file next to a native log, a hook mailbox) or, for kills, by
signalling the process whose identity was captured when its pid was first
seen; the outcome is recorded and published as :class:`ActionFinished`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from monitor.config import Config
from monitor.detect.base import Detection
from monitor.detect.calls import CallWindow
from monitor.detect.calls import events as recalled_events
from monitor.detect.engine import Engine
from monitor.detect.escalation import FALSE_POSITIVE
from monitor.events import Event, Kind, Level
from monitor.formats.base import Problem
from monitor.identity import current_user

log = logging.getLogger("loopwatch.hub")

ACTION_KINDS = ("ack", "inject", "kill", "false_positive", "mute")
#: Events per queued item; bigger submissions are split.
BATCH_EVENTS = 512
#: Queued items before :meth:`Hub.submit` waits.
QUEUE_ITEMS = 64
#: ...or queued events: what a newly arrived event waits behind.  At the
#: ~10k events/s one core processes, 2,048 events is ~0.2 s of work at most.
QUEUE_EVENTS = 2048
#: Subscribers get coalesced SessionChanged updates at most this often under load.
PUBLISH_INTERVAL = 0.05
#: Session rows are written to the store at most this often per session.
STORE_INTERVAL = 1.0
#: Closed (ended or idle) sessions remembered for the UI and history.
MAX_CLOSED_SESSIONS = 2000
#: Auto-responses only answer detections this recent (not replayed history).
AUTO_MAX_AGE_SECONDS = 60.0
#: A session still receiving events within this many seconds is never idle.
IDLE_ARRIVAL_SECONDS = 60.0
#: Problems published per source before they are only counted.
PROBLEMS_PER_SOURCE = 200
AUTO_WHO = "loopwatch (auto)"
#: Calls or assistant replies in a row, after a nudge, without a warning: the loop stopped.
RECOVERY_STEPS = 5
#: Sessions whose latest event is older than this many idle timeouts are replayed
#: history: idle once nothing arrived for them for REPLAY_QUIET_SECONDS.
REPLAY_AGE_TIMEOUTS = 10
REPLAY_QUIET_SECONDS = 5.0
#: Every this many ticks, live sessions with a known process are checked for its exit.
EXIT_CHECK_TICKS = 5
#: Recent events per live session shown in the UI's window when the
#: detectors compare none (bounded copies: see :func:`window_copy`).
RECENT_EVENTS = 24
#: Characters of content (and of each argument) kept in those copies.
WINDOW_CHARS = 512
#: Detections kept for a UI that subscribes late, and per session of them.
RECENT_DETECTIONS = 500
RECENT_DETECTIONS_PER_SESSION = 50
#: The cyclic garbage collector's first threshold while a hub runs (CPython's
#: default is 700): see :func:`_collect_rarely`.
LIVE_GC_THRESHOLD = 10_000


# -- what subscribers see -----------------------------------------------------------------


@dataclass(frozen=True)
class SessionInfo:
    """An immutable snapshot of one session; the hub replaces it on every change."""

    id: str
    agent: str | None
    source: str
    origin: str  # "file" | "socket" | "hook" | "otlp"
    pid: int | None
    parent: str | None
    first_ts: float
    last_ts: float
    events: int
    status: str  # "live" | "idle" | "ended"
    level: Level
    detector: str | None
    reason: str
    nudge: str
    similarity: tuple[float, ...]
    detector_similarity: dict[str, tuple[float, ...]]
    window: tuple[Event, ...]  # built when first read: see _WindowField
    last_detection: Detection | None
    muted: frozenset[str]
    channel: str  # "socket" | "inbox" | "hook" | "none"
    kill: str  # "" when it can be killed, else why not
    #: Event time of a delivered inject the session has not yet recovered from (0: none).
    nudged: float = 0.0
    #: Event time an acknowledgement quiets its patterns until (0: none).
    quiet_until: float = 0.0


class LazyWindow:
    """A session's detection window as it was when its snapshot was taken,
    turned into events only when first read, then kept.

    The hub rebuilds the snapshot of every changed session on every publish
    (1,000 live sessions: several thousand a second), while the UI shows the
    window of one, the selected session: so a snapshot keeps the call
    detectors' records as they were (a tuple of at most a window's
    references; what a window event shows of a record -- its seq, time,
    tool, keys and evidence -- never changes once made) or the recent copies,
    and the events are made on demand, exactly as they would have been."""

    __slots__ = ("_records", "_recent", "_horizon", "_value")

    def __init__(self, records: tuple[Any, ...], recent: tuple[Event, ...] = (), horizon: int = 0):
        self._records = records
        self._recent = recent
        self._horizon = horizon
        self._value: tuple[Event, ...] | None = None

    def get(self) -> tuple[Event, ...]:
        value = self._value
        if value is None:
            if self._records:
                value = tuple(recalled_events(self._records))
            else:
                horizon = self._horizon
                value = tuple(event for event in self._recent if event.seq > horizon)
            self._value = value
            self._records = self._recent = ()  # what it was made from can go
        return value


class _WindowField:
    """``SessionInfo.window``: set to a tuple or a :class:`LazyWindow`, always
    read as the tuple (the same object on every read, so widgets that compare
    windows by identity see a change only when there is one)."""

    def __get__(self, info: Any, owner: Any = None) -> Any:
        if info is None:
            return self
        value = info.__dict__["_window"]
        return value.get() if value.__class__ is LazyWindow else value

    def __set__(self, info: Any, value: Any) -> None:
        # Only the dataclass' __init__ gets here: a frozen instance refuses
        # attribute assignment before descriptors are consulted.
        info.__dict__["_window"] = value if value.__class__ is LazyWindow else tuple(value)


SessionInfo.window = _WindowField()  # type: ignore[assignment]  # after @dataclass made __init__


@dataclass(frozen=True)
class ActionRecord:
    id: int
    kind: str
    session: str
    text: str | None
    ts: float
    who: str
    outcome: str  # "delivered" | "failed" | "unsupported" | "refused"
    detail: str


@dataclass(frozen=True)
class SessionChanged:
    info: SessionInfo


@dataclass(frozen=True)
class DetectionRaised:
    detection: Detection


@dataclass(frozen=True)
class ActionFinished:
    action: ActionRecord


@dataclass(frozen=True)
class ProblemReported:
    problem: Problem


@dataclass(frozen=True)
class Stats:
    events_total: int
    events_per_sec: float
    sessions_live: int
    warnings_open: int


# -- per-session bookkeeping ------------------------------------------------------------------


@dataclass(eq=False)
class _Session:
    id: str
    origin: str
    source: str
    first_ts: float
    last_ts: float = 0.0
    last_activity: float = 0.0  # min(event ts, arrival): idle timing immune to clocks ahead
    last_arrival: float = 0.0  # when its latest event reached the hub
    events: int = 0
    agent: str | None = None
    pid: int | None = None
    parent: str | None = None
    status: str = "live"
    channel: Any = None
    identity: Any = None
    claim: Any = None  # monitor.control.PidClaim: the pid, and what backs it
    kill_reason: str = "no process id is known for this session"
    muted: set[str] = field(default_factory=set)
    last_detection: Detection | None = None
    #: While live: the latest detection of each detector (for operator actions).
    latest: dict[str, Detection] = field(default_factory=dict)
    #: While live: bounded copies of its latest calls and messages (for the window).
    recent: deque[Event] = field(default_factory=lambda: deque(maxlen=RECENT_EVENTS))
    info: SessionInfo | None = None
    dirty: bool = True
    store_dirty: bool = True
    stored_at: float = 0.0
    auto_done: set[tuple] = field(default_factory=set)
    nudged: float = 0.0  # event time of the inject it has not recovered from
    stored_level: Level = Level.NONE  # the level its latest session row said
    steps_since_nudge: int = 0
    order: int = 0  # first-seen position: updates are published in this order


def _window_snapshot(engine_state: Any, recent: Sequence[Event]) -> LazyWindow | tuple[Event, ...]:
    """:func:`_window` now, as a :class:`LazyWindow` that builds it when read.

    The window the engine reports is the ``exact_repeat`` detector's
    (:meth:`SessionState.window`): its records are snapshotted as they are.  A
    session without that detector gets its window built now."""
    for detector in engine_state.detectors:
        if detector.name == "exact_repeat":
            calls = getattr(detector, "calls", None)
            if calls.__class__ is not CallWindow:
                break  # not the detector this knows: ask the engine
            records = tuple(calls.records)
            if records:
                return LazyWindow(records)
            return LazyWindow((), tuple(recent), engine_state.events - RECENT_EVENTS)
    return _window(engine_state, recent)


def _replies_window(state: "_Session", detector: str | None) -> tuple[Event, ...]:
    """For a session flagged for its replies (chanting, monologue, output or
    turn similarity): the replies its latest detection cites, not the call
    detectors' window (which showed one unrelated call)."""
    detection = state.latest.get(detector) if detector else None
    if detection is None or not detection.evidence:
        return ()
    if any(ref.kind != Kind.MESSAGE.value for ref in detection.evidence):
        return ()
    copies = {event.seq: event for event in state.recent}
    return tuple(copies[ref.seq] for ref in detection.evidence if ref.seq in copies)


def _window(engine_state: Any, recent: Sequence[Event]) -> tuple[Event, ...]:
    """What the detectors compare now: the call detectors' window (events,
    or references matched to ``recent`` copies), else the calls and messages
    among the session's last ``RECENT_EVENTS`` events."""
    compared = engine_state.window()
    if compared:
        if all(isinstance(item, Event) for item in compared):
            return tuple(compared)
        copies = {event.seq: event for event in recent}
        matched = tuple(copies[item.seq] for item in compared if item.seq in copies)
        if matched:
            return matched
    horizon = engine_state.events - RECENT_EVENTS
    return tuple(event for event in recent if event.seq > horizon)


def window_copy(event: Event) -> Event:
    """A copy of a call or message for the window, bounded in size: long
    content and arguments are cut to ``WINDOW_CHARS`` (a 1 MB message must
    not stay alive for the UI), the call's key kept for highlighting repeats."""
    content = event.content
    if len(content) > WINDOW_CHARS:
        content = content[:WINDOW_CHARS]
    args = event.args
    if args is not None and _size(args, WINDOW_CHARS * 4) < 0:
        args = {key: value[:WINDOW_CHARS] if isinstance(value, str) else "…"
                for key, value in list(args.items())[:16]}
    meta = event.meta if not event.meta or _size(event.meta, WINDOW_CHARS) >= 0 else {}
    copy = Event(event.kind, event.session, event.ts, event.source, event.line, event.agent, event.role,
                 content, event.call_id, event.tool, args, event.is_error, meta=meta, seq=event.seq)
    key = event.cache.get("call_key")
    if key is not None:
        # Equal keys stay equal and different ones differ (but for a hash collision).
        copy.cache["call_key"] = key if len(key) <= WINDOW_CHARS else f"{key[:WINDOW_CHARS]}#{hash(key):x}"
    return copy


def _size(value: Any, budget: int) -> int:
    """``budget`` less the characters in ``value`` (JSON-like), or -1 once spent."""
    if isinstance(value, str):
        budget -= len(value)
    elif isinstance(value, dict):
        budget -= len(value)
        for key, item in value.items():
            if budget < 0:
                return -1
            budget = _size(item, budget - len(key) if isinstance(key, str) else budget)
    elif isinstance(value, (list, tuple)):
        budget -= len(value)
        for item in value:
            if budget < 0:
                return -1
            budget = _size(item, budget)
    else:
        budget -= 8
    return budget if budget >= 0 else -1


def _origin_of(source: str, channel: Any) -> str:
    name = getattr(channel, "name", "")
    if name == "hook":
        return "hook"
    if name == "socket" or source.startswith("socket:"):
        return "socket"
    if source.startswith("hook:"):
        return "hook"
    if source.startswith("otlp:"):
        return "otlp"
    return "file"


_gc_users = 0
_gc_before: tuple[int, ...] | None = None


def _collect_rarely(on: bool) -> None:
    """While any hub runs, run the cyclic garbage collector rarely.

    At CPython's default threshold a live monitor with 1,000 sessions ran it
    about 25 times a second and, every few seconds, over the whole heap (a
    quarter of a million objects, ~0.2 s): about a sixth of the CPU it used
    at 5,000 events/s.  Events, detector state and store rows are freed by
    reference counting; the collector only ever finds the odd cycle (asyncio,
    the UI), which can wait for the next collection.  The threshold is put
    back when the last hub stops, unless someone else changed it meanwhile."""
    global _gc_users, _gc_before
    if on:
        _gc_users += 1
        if _gc_users == 1:
            _gc_before = before = gc.get_threshold()
            gc.set_threshold(max(LIVE_GC_THRESHOLD, before[0]), *before[1:])
        return
    _gc_users -= 1
    if _gc_users == 0 and _gc_before is not None:
        if gc.get_threshold()[0] == max(LIVE_GC_THRESHOLD, _gc_before[0]):
            gc.set_threshold(*_gc_before)
        _gc_before = None


class _Stop:
    """Queue sentinel: everything before it has been processed."""


class Hub:
    """Wires sources to the engine, the store and the subscribers."""

    def __init__(self, config: Config, store: Any = None, *, clock: Callable[[], float] = time.time,
                 queue_items: int = QUEUE_ITEMS):
        self.config = config
        self.store = store
        self.clock = clock
        self.engine = Engine(config, sparklines=True)
        self.who = current_user()
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=max(1, queue_items))
        self._queued_events = 0
        self._room = asyncio.Event()  # set when _queued_events drops below QUEUE_EVENTS
        self._room.set()
        self._sessions: dict[str, _Session] = {}
        self._channels: dict[str, Any] = {}  # registered before the session was seen
        #: Pids the agents proved their own (socket peer credentials), by session.
        self._proofs: OrderedDict[str, tuple[Any, str]] = OrderedDict()
        self._subscribers: list[tuple[Callable[[object], None], tuple[type, ...] | None]] = []
        self._worker: asyncio.Task | None = None
        self._ticker: asyncio.Task | None = None
        self._actions: set[asyncio.Task] = set()
        self._seen = 0
        self._closed_count = 0  # sessions not live (bounded by MAX_CLOSED_SESSIONS)
        self._detections: deque[Detection] = deque(maxlen=RECENT_DETECTIONS)
        self._changed: set[str] = set()  # sessions with a SessionChanged to publish
        self._store_changed: set[str] = set()  # sessions whose row must be written
        self._publish_handle: asyncio.TimerHandle | None = None
        #: A UI that flushes less often asks for snapshots as seldom (never
        #: more often than PUBLISH_INTERVAL): one build per changed session per flush.
        self.publish_interval = PUBLISH_INTERVAL
        self._rate: deque[list[float]] = deque(maxlen=8)  # [second, count]
        self._problems_by_source: dict[str, int] = {}
        self._store_failed = False
        self._store_losses_seen = (0, 0)  # (dropped, failed) last reported
        self._next_action_id = 0
        self.events_total = 0
        self._duplicates_seen = 0  # engine.duplicates when last accounted for
        self.detections_total = 0
        self.problems_total = 0
        self.started = False
        self.stopped = False
        self._collects_rarely = False

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        if self.started:
            return
        self.started = True
        _collect_rarely(True)
        self._collects_rarely = True
        self._worker = asyncio.create_task(self._work(), name="loopwatch-hub")
        self._ticker = asyncio.create_task(self._tick(), name="loopwatch-hub-ticker")

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
                _collect_rarely(False)

    async def _finish(self) -> None:
        if self._worker is not None:
            await self._queue.put(_Stop())
            await asyncio.gather(self._worker, return_exceptions=True)
        else:  # never started: still process what was queued
            await self._drain_now()
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        if self._actions:
            await asyncio.gather(*list(self._actions), return_exceptions=True)
        for state in self._sessions.values():
            if state.status != "ended":  # nobody delivers them any more
                state.status = "stopped"
                self._touch(state)
        self._publish_dirty()
        self._store_sessions(force=True)
        self._publish(self.stats())
        if self.store is not None:
            try:
                await asyncio.to_thread(self.store.flush)
            except Exception:
                log.exception("store flush failed")

    async def _drain_now(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            self._dequeued(item)
            if not isinstance(item, _Stop):
                self._process(*item)
            self._queue.task_done()

    # -- input ----------------------------------------------------------------------------

    @property
    def keeps_positions(self) -> bool:
        """File sources hand :meth:`submit` their read positions (to be stored)."""
        return self.store is not None

    async def submit(self, events: Sequence[Event], problems: Sequence[Problem] = (), *,
                     position: dict | None = None) -> None:
        """Queue events for processing; waits while the queue is full (back-pressure).

        ``position``: how far a file source has read, recorded in the store
        after these events (a restarted watcher resumes the file there)."""
        if self.stopped:
            raise RuntimeError("the hub is stopped")
        events = list(events)
        problems = list(problems)
        if not events and not problems and position is None:
            return
        arrival = self.clock()
        last = max(len(events) - 1, 0) // BATCH_EVENTS * BATCH_EVENTS
        for start in range(0, max(len(events), 1), BATCH_EVENTS):
            chunk = events[start:start + BATCH_EVENTS]
            await self._wait_for_room()
            self._queued_events += len(chunk)
            await self._queue.put((chunk, problems if start == 0 else [], arrival,
                                   position if start == last else None))

    def saturated(self) -> bool:
        """The queue is full: a source that can ask its sender to retry later should."""
        return self._queue.full() or self._queued_events >= QUEUE_EVENTS

    async def _wait_for_room(self) -> None:
        """Back-pressure by events, not only by items: a deep queue of big
        batches is latency for every session behind it."""
        while self._queued_events >= QUEUE_EVENTS:
            self._room.clear()
            await self._room.wait()

    def _dequeued(self, item: Any) -> None:
        if not isinstance(item, _Stop):
            self._queued_events -= len(item[0])
            if self._queued_events < QUEUE_EVENTS:
                self._room.set()

    async def join(self) -> None:
        """Wait until everything submitted so far has been processed and published."""
        await self._queue.join()
        self._publish_dirty()

    drain = join

    def register_channel(self, session: str, channel: Any) -> None:
        """``channel`` is how ``session``'s agent can be reached from now on."""
        state = self._sessions.get(session)
        if state is None:
            self._channels[session] = channel
            if len(self._channels) > 4 * MAX_CLOSED_SESSIONS:  # never-seen sessions must not pile up
                self._channels.pop(next(iter(self._channels)))
            return
        state.channel = channel
        origin = _origin_of(state.source, channel)
        if origin != "file" or state.origin == "file":
            state.origin = origin
        self._touch(state)

    def confirm_pid(self, session: str, identity: Any, how: str) -> None:
        """The agent of ``session`` proved ``identity`` is its process (``how``, in
        words): the only kind of pid ``auto_kill`` signals.  A log file alone never confirms."""
        self._proofs[session] = (identity, how)
        self._proofs.move_to_end(session)
        while len(self._proofs) > 4 * MAX_CLOSED_SESSIONS:
            self._proofs.popitem(last=False)
        state = self._sessions.get(session)
        if state is not None and state.claim is not None and not state.claim.confirmed:
            self._confirm(state)

    def _confirm(self, state: _Session) -> None:
        proof = self._proofs.get(state.id)
        claim = state.claim
        if proof is None or claim is None:
            return
        identity, how = proof
        if identity.pid == claim.identity.pid and identity.start_time == claim.identity.start_time:
            state.claim = replace(claim, confirmed=how)
            self._touch(state)

    # -- subscribers ---------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[object], None],
                  kinds: tuple[type, ...] | None = None) -> Callable[[], None]:
        """Call ``callback`` with each update (on the hub's loop; it must not
        block), or only with those of the classes in ``kinds``.

        Session snapshots are built to be published only while some
        subscriber takes :class:`SessionChanged` (a headless watcher's
        subscribers do not: with 1,000 live sessions that saves rebuilding
        thousands of snapshots a second); :meth:`sessions` and
        :meth:`session` build them on demand either way."""
        entry = (callback, tuple(kinds) if kinds is not None else None)
        self._subscribers.append(entry)

        def unsubscribe() -> None:
            try:
                self._subscribers.remove(entry)
            except ValueError:
                pass

        return unsubscribe

    def _wants_sessions(self) -> bool:
        return any(kinds is None or SessionChanged in kinds for _callback, kinds in self._subscribers)

    def _publish(self, update: object) -> None:
        for callback, kinds in list(self._subscribers):
            if kinds is not None and not isinstance(update, kinds):
                continue
            try:
                callback(update)
            except Exception:  # one broken subscriber must not stop the others
                log.exception("hub subscriber %r failed", callback)

    # -- reads ---------------------------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        return [self._info(state) for state in self._sessions.values()]

    def session(self, id: str) -> SessionInfo | None:
        state = self._sessions.get(id)
        return self._info(state) if state is not None else None

    def recent_detections(self) -> list[Detection]:
        """Detections raised lately in live sessions (at most
        ``RECENT_DETECTIONS_PER_SESSION`` each), oldest first: what a UI that
        subscribes now has missed."""
        live = self.engine.sessions
        per_session: dict[str, int] = {}
        found = []
        for detection in reversed(self._detections):
            session = detection.session
            count = per_session.get(session, 0)
            if session in live and count < RECENT_DETECTIONS_PER_SESSION:
                per_session[session] = count + 1
                found.append(detection)
        found.reverse()  # raised order among detections of one event
        return sorted(found, key=lambda d: (d.ts, d.session, d.seq))

    def stats(self) -> Stats:
        now = self.clock()
        second = int(now)
        window = [count for sec, count in self._rate if second - 5 <= sec < second]
        span = max(1, min(5, second - self._rate[0][0])) if self._rate else 1
        live = warnings = 0
        for state in self._sessions.values():
            if state.status == "live":
                live += 1
            if state.status != "ended" and self._level(state.id) >= Level.WARN:
                warnings += 1
        return Stats(self.events_total, sum(window) / span, live, warnings)

    def _level(self, session: str) -> Level:
        escalation = self.engine.policy.sessions.get(session)
        return escalation.level if escalation is not None else Level.NONE

    def describe_kill(self, session: str) -> str:
        """What a kill would do ("SIGTERM pid 123 (python agent.py) …"), or why it cannot."""
        state = self._sessions.get(session)
        if state is None:
            return f"unknown session {session!r}"
        grace = self.config.control.kill_grace_seconds
        if state.claim is not None:
            reason = state.claim.refusal()
            if reason is None:
                checks = "\n".join(f"  {fact}" for fact in state.claim.verified())
                return (f"SIGTERM {state.identity.describe()}, then SIGKILL after {grace:g} s\n"
                        f"Verified:\n{checks}")
            return reason
        if state.channel is not None:
            return (f"{state.kill_reason}; a kill request will be sent to the agent "
                    f"over its {state.channel.name} channel")
        return state.kill_reason

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
                    if isinstance(item, _Stop):
                        return
                    self._dequeued(item)
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
            if self._changed and self._publish_handle is None:
                # Coalesce: one SessionChanged per session per interval, however many events.
                self._publish_handle = asyncio.get_running_loop().call_later(
                    max(PUBLISH_INTERVAL, self.publish_interval), self._publish_dirty)
            # Let sources, the UI and actions run between batches.
            await asyncio.sleep(0)

    def _process(self, events: list[Event], problems: list[Problem], arrival: float,
                 position: dict | None = None) -> None:
        for problem in problems:
            self._problem(problem)
        if not events:
            self._store_position(position)
            return
        found: list[Detection] = []
        engine = self.engine
        second = int(arrival)
        if self._rate and self._rate[-1][0] == second:
            self._rate[-1][1] += len(events)
        else:
            self._rate.append([second, len(events)])
        duplicates = engine.duplicates
        for event in events:
            state = self._sessions.get(event.session)
            if state is None:
                state = self._new_session(event)
            elif state.status != "live":
                self._revive(state, event)
            detections = engine.process(event)
            if engine.duplicates != duplicates:
                # The same call from a second channel (a tailed transcript and
                # the hook): counted once, stored once.
                duplicates = engine.duplicates
                continue
            if detections and any(d.suppressed == FALSE_POSITIVE for d in detections):
                # Marked a false positive by the operator: not shown, not stored, level untouched.
                detections = [d for d in detections if d.suppressed != FALSE_POSITIVE]
            self._observe(state, event, arrival)
            kind = event.kind
            if (kind is Kind.TOOL_CALL or kind is Kind.MESSAGE) and event.seq:
                recent = state.recent
                if not recent or recent[-1].seq < event.seq:  # not a duplicate the engine dropped
                    recent.append(window_copy(event))
            if state.nudged:
                self._follow_nudge(state, event, detections)
            if detections:
                found.extend(detections)
                self._detections.extend(detections)
                for detection in detections:
                    state.last_detection = detection
                    state.latest[detection.detector] = detection
            if event.kind is Kind.SESSION_END:
                self._close(state, "ended")
        if duplicates != self._duplicates_seen:
            self._duplicates_seen = duplicates
            events = [event for event in events
                      if event.seq or (event.kind is not Kind.TOOL_CALL and event.kind is not Kind.TOOL_RESULT)]
        self.events_total += len(events)
        store = self.store
        if store is not None and not self._store_failed:
            try:
                store.add_events(events)
                if found:
                    store.add_detections(found)
            except Exception:
                self._store_failed = True
                log.exception("store rejected writes; continuing without recording")
        self._store_position(position)
        if found and store is not None and not self._store_failed:
            # A level that changed is written now, not at the next tick: the
            # store merges the hub's row over what detection rows say, and an
            # older row (say, "watching" after an ack) must not outlast them.
            for session in {d.session for d in found}:
                state = self._sessions.get(session)
                if state is not None and self._level(session) != state.stored_level:
                    self._store_session(state)
        for detection in found:
            self.detections_total += 1
            self._publish(DetectionRaised(detection))
            self._auto_respond(detection)

    def _follow_nudge(self, state: _Session, event: Event, detections: list[Detection]) -> None:
        """Count the agent's steps since a nudge; enough without a warning: it recovered."""
        if any(d.level >= Level.WARN and not d.suppressed for d in detections):
            state.steps_since_nudge = 0  # still looping
            return
        if event.kind is Kind.TOOL_CALL or (event.kind is Kind.MESSAGE and event.role == "assistant"):
            state.steps_since_nudge += 1
            if state.steps_since_nudge >= RECOVERY_STEPS:
                state.nudged = 0.0
                self.engine.policy.recover(state.id, RECOVERY_STEPS)
                if self.store is not None and not self._store_failed:
                    self._store_session(state)  # history says so now, not at the next tick

    def _store_position(self, position: dict | None) -> None:
        """After the events read before it: so the database never has a
        position past events it lacks (they would never be read again)."""
        if position is None or self.store is None or self._store_failed:
            return
        try:
            self.store.add_position(position)
        except Exception:
            log.exception("store rejected a file position")

    def _new_session(self, event: Event) -> _Session:
        channel = self._channels.pop(event.session, None)
        self._seen += 1
        state = _Session(id=event.session, origin=_origin_of(event.source, channel),
                         source=event.source, first_ts=event.ts, channel=channel, order=self._seen)
        self._sessions[event.session] = state
        self._forget_old()
        return state

    def _revive(self, state: _Session, event: Event) -> None:
        """A closed session speaks again: fresh detector state, same mutes."""
        state.status = "live"
        self._closed_count -= 1
        state.recent.clear()  # the engine starts the session afresh
        engine_state = self.engine.session(event.session, event)
        engine_state.muted |= state.muted

    def _observe(self, state: _Session, event: Event, arrival: float) -> None:
        state.events += 1
        state.last_ts = event.ts
        state.last_activity = min(event.ts, arrival)
        state.last_arrival = arrival
        if event.source and state.source != event.source and state.origin == "file":
            state.source = event.source
        if event.agent:
            state.agent = event.agent
        if event.parent:
            state.parent = event.parent
        if event.pid is not None and event.pid != state.pid:
            state.pid = event.pid
            self._capture(state, event)
        self._touch(state)

    def _capture(self, state: _Session, event: Event) -> None:
        """Remember who the event's pid is now, so that a later kill can check it
        is still them, and what backs the claim (see :class:`~monitor.control.PidClaim`)."""
        state.identity = state.claim = None
        pid = event.pid
        try:
            from monitor.control import PidClaim, ProcessIdentity
        except ImportError:
            state.kill_reason = "process control is not available"
            return
        identity = ProcessIdentity.capture(pid)
        if identity is None:
            state.kill_reason = f"pid {pid} is not running on this machine"
            return
        source = event.source
        from_file = bool(source) and _origin_of(source, None) == "file"
        state.claim = PidClaim(identity, since=event.ts, log_path=source if from_file else "")
        state.identity = identity
        self._confirm(state)
        state.kill_reason = state.claim.refusal() or ""

    def _close(self, state: _Session, status: str) -> None:
        """Free the session's detector state; keep its snapshot."""
        if state.status == status:
            return
        info = state.info = self._build_info(state)  # last window and sparklines, before they go
        info.window  # built now: the records it was made from must not outlive the session
        if state.status == "live":
            self._closed_count += 1
        state.status = status
        self.engine.close(state.id)
        state.recent.clear()
        state.latest.clear()
        state.stored_at = 0.0  # written at the next tick, not after the usual interval
        self._touch(state)

    def _forget_old(self) -> None:
        if self._closed_count <= MAX_CLOSED_SESSIONS:
            return
        closed = [s for s in self._sessions.values() if s.status != "live"]
        closed.sort(key=lambda s: s.last_activity)
        for state in closed[: len(closed) - MAX_CLOSED_SESSIONS]:
            del self._sessions[state.id]
            self.engine.policy.reset(state.id)
            self._closed_count -= 1

    def _problem(self, problem: Problem) -> None:
        self.problems_total += 1
        count = self._problems_by_source.get(problem.source, 0) + 1
        self._problems_by_source[problem.source] = count
        if count <= PROBLEMS_PER_SOURCE:
            self._publish(ProblemReported(problem))
        elif count == PROBLEMS_PER_SOURCE + 1:
            self._publish(ProblemReported(Problem(
                problem.source, problem.line,
                f"more than {PROBLEMS_PER_SOURCE} problems from this source; counting the rest silently")))

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
                self._publish_dirty()
                self._store_sessions()
                self._report_store_losses()
                self._publish(self.stats())
            except Exception:
                log.exception("hub tick failed")

    def sweep_exited(self) -> list[str]:
        """End live sessions whose process (captured when its pid was first seen) has exited."""
        try:
            from monitor.control import ProcessIdentity
        except ImportError:
            return []
        ended = []
        for state in list(self._sessions.values()):
            identity = state.identity
            if state.status != "live" or identity is None:
                continue
            now = ProcessIdentity.capture(identity.pid)
            if now is None or abs(now.start_time - identity.start_time) > 1e-6:
                self._close(state, "ended")
                ended.append(state.id)
        if ended:
            self._forget_old()
            self._publish_dirty()
        return ended

    def _report_store_losses(self) -> None:
        """Tell subscribers (the TUI's problems, the headless stderr) when the store
        drops or refuses rows, with the exact running count."""
        losses = getattr(self.store, "losses", None)
        if losses is None:
            return
        stats = self.store.stats
        counts = (stats.dropped, stats.failed)
        if counts != self._store_losses_seen and any(counts):
            self._store_losses_seen = counts
            self._publish(ProblemReported(Problem("store", None, losses() or "")))

    def sweep_idle(self) -> list[str]:
        """Close live sessions silent for longer than the idle timeout; return their ids.

        Silent means both: its latest event is older than the timeout (event
        time, so replayed history goes idle soon after the replay), and nothing
        arrived for it for a while (so a replay in progress, or an agent whose
        clock lags, is not closed and reset between two of its events).
        """
        timeout = self.config.sources.idle_timeout_seconds
        if timeout <= 0:
            return []
        quiet = min(timeout, IDLE_ARRIVAL_SECONDS)
        replayed = REPLAY_AGE_TIMEOUTS * timeout
        now = self.clock()
        closed = []
        for state in list(self._sessions.values()):
            if state.status != "live" or now - state.last_activity <= timeout:
                continue
            silent = now - state.last_arrival
            if silent > quiet or (now - state.last_activity > replayed and silent > REPLAY_QUIET_SECONDS):
                self._close(state, "idle")
                closed.append(state.id)
        if closed:
            self._forget_old()
            self._publish_dirty()
        return closed

    def _touch(self, state: _Session) -> None:
        """The session changed: rebuild its snapshot lazily, publish it and store it soon."""
        state.dirty = True
        state.store_dirty = True
        self._changed.add(state.id)
        self._store_changed.add(state.id)

    def _publish_dirty(self) -> None:
        if self._publish_handle is not None:
            self._publish_handle.cancel()
            self._publish_handle = None
        changed, self._changed = self._changed, set()
        if not self._wants_sessions():
            return  # nobody to tell: snapshots are built when asked for
        states = [self._sessions[s] for s in changed if s in self._sessions]
        for state in sorted(states, key=lambda state: state.order):  # deterministic, like the UI wants
            self._publish(SessionChanged(self._info(state)))

    def _store_sessions(self, force: bool = False) -> None:
        if self.store is None or self._store_failed:
            self._store_changed.clear()
            return
        now = time.monotonic()
        for session in list(self._store_changed):
            state = self._sessions.get(session)
            if state is None or not state.store_dirty:
                self._store_changed.discard(session)
            elif force or now - state.stored_at >= STORE_INTERVAL:
                self._store_session(state)
                self._store_changed.discard(session)

    def _store_session(self, state: _Session) -> None:
        state.store_dirty = False
        state.stored_at = time.monotonic()
        state.stored_level = self._level(state.id)
        escalation = self.engine.policy.sessions.get(state.id)
        try:
            self.store.upsert_session({
                "id": state.id, "agent": state.agent, "source": state.source, "kind": state.origin,
                "pid": state.pid, "parent": state.parent, "first_seen": state.first_ts,
                "last_seen": state.last_ts, "status": state.status,
                "level": self._level(state.id).label, "events": state.events,
                "detector": escalation.detector if escalation else None,
                "reason": escalation.reason if escalation else "",
            })
        except Exception:
            self._store_failed = True
            log.exception("store rejected a session row; continuing without recording")

    # -- snapshots ---------------------------------------------------------------------------------

    def _info(self, state: _Session) -> SessionInfo:
        if state.dirty or state.info is None:
            state.info = self._build_info(state)
            state.dirty = False
        return state.info

    def _build_info(self, state: _Session) -> SessionInfo:
        escalation = self.engine.policy.sessions.get(state.id)
        level = escalation.level if escalation else Level.NONE
        engine_state = self.engine.sessions.get(state.id) if state.status == "live" else None
        previous = state.info
        if engine_state is not None:
            similarity = engine_state.similarity_history()
            by_detector = engine_state.detector_similarity_history()
            window = _replies_window(state, escalation.detector if escalation and level else None)
            if not window:
                window = _window_snapshot(engine_state, state.recent)
            muted = frozenset(engine_state.muted | state.muted)
        elif previous is not None:  # the window as it was (the same object, built or not)
            similarity, by_detector = previous.similarity, previous.detector_similarity
            window = previous.__dict__["_window"]
            muted = frozenset(state.muted)
        else:
            similarity, by_detector, window, muted = (), {}, (), frozenset(state.muted)
        if state.identity is not None and not state.kill_reason:
            kill = ""
        elif state.channel is not None:
            kill = ""  # the agent can be asked to stop over its channel
        else:
            kill = state.kill_reason
        return SessionInfo(
            id=state.id, agent=state.agent, source=state.source, origin=state.origin,
            pid=state.pid, parent=state.parent, first_ts=state.first_ts, last_ts=state.last_ts,
            events=state.events, status=state.status, level=level,
            detector=escalation.detector if escalation else None,
            reason=escalation.reason if escalation else "",
            nudge=escalation.nudge if escalation else "",
            similarity=similarity, detector_similarity=by_detector, window=window,
            last_detection=state.last_detection, muted=muted,
            channel=state.channel.name if state.channel is not None else "none", kill=kill,
            nudged=state.nudged if state.status == "live" else 0.0,
            quiet_until=escalation.quiet_until if escalation and level < Level.WARN else 0.0,
        )

    # -- operator actions ---------------------------------------------------------------------------

    async def act(self, kind: str, session: str, *, text: str | None = None,
                  detection: Detection | None = None, detector: str | None = None) -> ActionRecord:
        """Record, then carry out, an operator action; publish its outcome."""
        return await self._act(kind, session, text=text, detection=detection, detector=detector,
                               who=self.who)

    async def _act(self, kind: str, session: str, *, text: str | None, detection: Detection | None,
                   detector: str | None, who: str) -> ActionRecord:
        if kind not in ACTION_KINDS:
            raise ValueError(f"unknown action {kind!r} (expected one of: {', '.join(ACTION_KINDS)})")
        state = self._sessions.get(session)
        escalation = self.engine.policy.sessions.get(session)
        if kind == "inject" and not text:
            text = (detection.nudge if detection is not None else "") or (escalation.nudge if escalation else "")
        if kind == "false_positive" and detection is None and state is not None:
            detection = self._pick_detection(state, detector)
        if kind == "mute" and detector is None:
            detector = detection.detector if detection is not None else (
                escalation.detector if escalation else None)
        detail = detector or (detection.detector if detection is not None else "") or ""
        ts = self.clock()
        # Nothing acknowledged is lost: the action is committed before it is carried out.
        if self.store is not None:
            try:
                # The store commits durably (fsync) before returning: off the loop.
                action_id = await asyncio.to_thread(self.store.begin_action, kind, session, text, who, detail)
            except Exception as exc:
                log.exception("could not record action")
                self._next_action_id -= 1
                record = ActionRecord(self._next_action_id, kind, session, text, ts, who, "failed",
                                      f"not carried out: could not record it ({exc})")
                self._publish(ActionFinished(record))
                return record
        else:
            self._next_action_id += 1
            action_id = self._next_action_id
        try:
            status, outcome_detail = await self._carry_out(kind, session, state, text, detection, detector,
                                                           auto=who == AUTO_WHO)
        except Exception as exc:
            log.exception("action %s on %s failed", kind, session)
            status, outcome_detail = "failed", f"{type(exc).__name__}: {exc}"
        if self.store is not None:
            try:
                await asyncio.to_thread(self.store.finish_action, action_id, status, outcome_detail)
            except Exception:
                log.exception("could not record the outcome of action %s", action_id)
        record = ActionRecord(action_id, kind, session, text, ts, who, status, outcome_detail)
        if state is not None:
            self._touch(state)
            if self.store is not None and not self._store_failed:
                self._store_session(state)
            if self._wants_sessions():
                self._publish(SessionChanged(self._info(state)))
        self._publish(ActionFinished(record))
        return record

    def _pick_detection(self, state: _Session, detector: str | None) -> Detection | None:
        """The detection an operator means: the one that set the level, else the latest (of ``detector``)."""
        escalation = self.engine.policy.sessions.get(state.id)
        engine_state = self.engine.sessions.get(state.id)
        candidates = [escalation.last if escalation else None]
        candidates += list(reversed(engine_state.detections)) if engine_state else []
        candidates += [state.latest.get(detector) if detector else None, state.last_detection]
        for candidate in candidates:
            if candidate is not None and (detector is None or candidate.detector == detector):
                return candidate
        return None

    async def _carry_out(self, kind: str, session: str, state: _Session | None, text: str | None,
                         detection: Detection | None, detector: str | None,
                         auto: bool = False) -> tuple[str, str]:
        if state is None:
            return "failed", f"unknown session {session!r}"
        policy = self.engine.policy
        if kind == "ack":
            # Escalation runs on event time: the cool-down starts at the session's latest event.
            policy.acknowledge(session, state.last_ts)
            state.nudged = 0.0
            state.auto_done = {key for key in state.auto_done if key[0] != "inject"}
            if state.channel is None:
                return "delivered", "acknowledged in loopwatch (the session has no channel to tell the agent)"
            extra = {"detector": detection.detector, "pattern": detection.pattern} if detection else {}
            status, detail = await self._send(state, "ack", **extra)
            if status != "delivered":  # the acknowledgement itself took effect here regardless
                return "delivered", f"acknowledged in loopwatch; telling the agent failed: {detail}"
            return status, detail
        if kind == "inject":
            if not text:
                return "failed", "nothing to inject: no text given and the session has no current nudge"
            if state.channel is None:
                return "unsupported", (f"this {state.origin} session has no control channel (only socket "
                                       "sessions, hook sessions and native-format log files can be reached)")
            status, detail = await self._send(state, "inject", text=text)
            if status == "delivered" and self._level(session) >= Level.WARN:
                state.nudged = state.last_ts or self.clock()
                state.steps_since_nudge = 0
            return status, detail
        if kind == "kill":
            return await self._kill(state, auto=auto)
        if kind == "false_positive":
            if detection is None:
                return "failed", "no detection to mark as a false positive"
            policy.mark_false_positive(detection)
            return "delivered", (f"{detection.detector} no longer flags this in this session: "
                                 f"{detection.message[:120]}")
        # mute
        if not detector:
            return "failed", "no detector named to mute"
        state.muted.add(detector)
        if state.status == "live":  # a closed session gets its mutes back when it is revived
            self.engine.mute(session, detector)
        return "delivered", f"{detector} muted for this session"

    async def _send(self, state: _Session, kind: str, **fields: Any) -> tuple[str, str]:
        from monitor.control import control_message

        outcome = await state.channel.send(control_message(kind, state.id, **fields))
        return outcome.status, outcome.detail

    async def _kill(self, state: _Session, auto: bool = False) -> tuple[str, str]:
        claim = state.claim
        if claim is not None:
            reason = claim.refusal()
            if reason is not None:
                return "refused", reason
        unconfirmed = auto and claim is not None and not claim.confirmed
        if claim is None or unconfirmed:
            reason = state.kill_reason
            if unconfirmed:
                reason = (f"auto_kill signals only a pid the agent confirmed itself (socket peer "
                          f"credentials or a hook); pid {claim.identity.pid} is named by "
                          f"{claim.log_path or 'a record'} only")
            if state.channel is not None:
                status, detail = await self._send(state, "kill")
                return status, f"{reason}; asked the agent to stop instead: {detail}"
            return "refused", reason
        try:
            from monitor.control import terminate
        except ImportError:
            return "unsupported", "process control is not available"
        if state.channel is not None:  # tell the agent why, best effort, before the signal
            try:
                await asyncio.wait_for(self._send(state, "kill"), 1.0)
            except Exception:
                pass
        outcome = await terminate(state.identity, grace=self.config.control.kill_grace_seconds)
        return outcome.status, outcome.detail

    # -- auto-response --------------------------------------------------------------------------------

    def _auto_respond(self, detection: Detection) -> None:
        control = self.config.control
        if not (control.auto_inject or control.auto_kill) or detection.suppressed:
            return
        if detection.level < Level.WARN or self.clock() - detection.ts > AUTO_MAX_AGE_SECONDS:
            return  # replayed history: the agent is not waiting for an answer now
        state = self._sessions.get(detection.session)
        if state is None or state.status != "live":
            return
        if control.auto_kill and detection.level >= Level.TERMINATE:
            key: tuple = ("kill",)
            if key not in state.auto_done:
                state.auto_done.add(key)
                self._spawn(self._act("kill", state.id, text=None, detection=detection, detector=None,
                                      who=AUTO_WHO))
            return
        if control.auto_inject and detection.nudge:
            # One nudge per rung the session reaches (several detectors may flag
            # the same loop); an acknowledgement re-arms it.
            key = ("inject", int(detection.level))
            if key not in state.auto_done:
                state.auto_done.add(key)
                self._spawn(self._act("inject", state.id, text=detection.nudge, detection=detection,
                                      detector=None, who=AUTO_WHO))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._actions.add(task)
        task.add_done_callback(self._actions.discard)


__all__ = [
    "ActionFinished", "ActionRecord", "DetectionRaised", "Hub", "ProblemReported",
    "SessionChanged", "SessionInfo", "Stats",
]
