"""The detection engine: the one pipeline ``scan``, ``watch`` and the TUI share.

:class:`Engine` takes normalized events in any order of sessions and keeps one
:class:`SessionState` per session (created on first sight).  For each event,
:meth:`Engine.process` runs four steps in a row:

1. **drop a duplicate**: a tool call or result whose call id the session
   reported lately (:class:`SeenIds`) -- a hook and a transcript of one
   session both report every call -- or an assistant message or compaction
   both reported (:mod:`~monitor.detect.echoes`); a ``waiting`` event (the agent
   waits for the person) is followed (:mod:`~monitor.detect.input_wait`),
   numbered, and seen by no detector;
2. **enrich**: number the event, pair a result with its call (and the call's
   record with its result), mark a call made after a wait
   (:mod:`~monitor.detect.analysis.waits`), follow the session's lifecycle
   and usage;
3. **observe**: call ``observe`` of every detector whose ``kinds`` hold the
   event's kind, in run order (none for a call the harness made by itself:
   :mod:`~monitor.detect.analysis.origin`), and ``judge`` of each turn detector when the
   event completed an assistant turn (one tracker per session does the
   grouping);
4. **conclude**: drop detections of one event that cite the same evidence,
   pass the rest through the :class:`~monitor.detect.escalation.EscalationPolicy`,
   charge their cost, and note how much the event's step repeated (for the
   sparklines).

It returns a :class:`Processed`: whether the event was dropped, its
detections, the session's level after it, and what the event did to the
session's loop episodes (:mod:`~monitor.detect.episodes`: opened, updated,
escalated, closed).  What the engine knows of a
session is read through :meth:`Engine.summary` (:mod:`~monitor.detect.summary`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from monitor.config import Config
from monitor.cost import LoopCosts
from monitor.detect.analysis.calls import attach_result
from monitor.detect.analysis.origin import by_harness
from monitor.detect.analysis.turns import Turn, TurnTracker
from monitor.detect.analysis.waits import mark as mark_waited
from monitor.detect.base import Detection, Detector, SessionView, TurnDetector
from monitor.detect.corroboration import OutcomeLedger
from monitor.detect.detectors import REGISTRY
from monitor.detect.echoes import Echoes
from monitor.detect.episodes import ACKNOWLEDGED, ENDED, FALSE_POSITIVE, STOPPED, EpisodeBook, EpisodeChange
from monitor.detect.episodes import episode_gap as gap_of
from monitor.detect.escalation import EscalationPolicy, Rungs, seed_escalation, settings_for
from monitor.detect.input_wait import asks_the_person, unhold
from monitor.detect.input_wait import follow as follow_wait
from monitor.detect.reads import EngineReads
from monitor.detect.summary import SparkHistory
from monitor.events import (
    COMPACTION,
    MESSAGE,
    SESSION_END,
    SESSION_START,
    TOOL_CALL,
    TOOL_RESULT,
    USAGE,
    WAITING,
    Event,
    EventRef,
    Kind,
    Level,
)
from monitor.text import known_call_key

#: Tool calls awaiting their result, per session.  Calls whose results never
#: arrive must not grow memory.
MAX_PENDING_CALLS = 64
#: Call ids remembered per session to drop the same call seen twice (a hook
#: and the transcript of one Claude Code session both report every call).
MAX_SEEN_IDS = 256
#: Detections kept per session: the latest, for operator actions (the hub,
#: the UI's feed and the store keep their own history).
RECENT_DETECTIONS = 1


class SeenIds:
    """The last ``size`` ids added: "seen lately?" is one lookup.

    Holds the ids' hashes (a call's and its result's apart), not the
    strings: a session keeps hundreds of them.  Two different ids with one
    64-bit ``hash()`` would make the second look like a duplicate; with 256
    ids held that is about one in 10**16 per id.  A dict holds them for the
    lookup (a set losing and gaining a key on every call is doubled by
    CPython to 2,048 slots: 45 KB with its ring, the dict about 28 KB); a
    list of the same ints in the order added, used as a ring once full, says
    which is the oldest (finding it as the dict's first key walks past every
    key deleted since the dict was last resized: ~1,600 instructions an id)."""

    __slots__ = ("ids", "order", "oldest", "size")

    def __init__(self, size: int):
        self.ids: dict[int, None] = {}
        self.order: list[int] = []
        self.oldest = 0  # the index in ``order`` of the oldest id, once full
        self.size = size

    def admit(self, event: Event) -> bool:
        """Remember the call id of the tool call or result ``event``; False
        when it was there already (a duplicate)."""
        key = hash(event.call_id)
        if event.kind is TOOL_RESULT:
            key = ~key  # a call and its result have one id
        ids = self.ids
        if key in ids:
            return False
        ids[key] = None
        order = self.order
        if len(order) < self.size:
            order.append(key)
        elif order:  # (a memory of no ids keeps none)
            oldest = self.oldest
            del ids[order[oldest]]
            order[oldest] = key
            self.oldest = (oldest + 1) % self.size
        else:
            del ids[key]
        return True


class Processed(NamedTuple):
    """What :meth:`Engine.process` did with one event (immutable: the
    results of events that found nothing are shared)."""

    #: The event was a duplicate and went no further.
    dropped: bool
    #: Its detections, after escalation.
    detections: tuple[Detection, ...]
    #: The session's escalation level after it.
    level: Level
    #: What it did to the session's loop episodes (most events: nothing).
    episodes: tuple[EpisodeChange, ...] = ()


#: By level, the result of an event that found nothing, and of a dropped one.
_QUIET = tuple(Processed(False, (), level) for level in Level)
_DROPPED = tuple(Processed(True, (), level) for level in Level)


#: The step of one detector for one kind of event: what to call, a detector's
#: ``observe`` (the ``same_turn_seconds`` is ``None``) or a turn detector's
#: ``judge`` and the ``same_turn_seconds`` of the tracker whose turns it judges;
#: the session's outcome ledger observes results last (detect/corroboration.py).
#: (Bound methods made once per route, not once per event and detector.)
Step = tuple[Callable[..., Any], float | None]


@dataclass
class SessionState:
    """Everything the engine holds for one session; bounded in size."""

    id: str
    view: SessionView
    detectors: list[Detector[Any]]
    #: Its loop episodes (the engine's, which outlive this state).
    book: EpisodeBook
    agent: str | None = None
    source: str = ""
    pid: int | None = None
    parent: str | None = None
    first_ts: float = 0.0
    last_ts: float = 0.0
    events: int = 0
    ended: bool = False
    status: str | None = None
    muted: set[str] = field(default_factory=set)
    #: Calls awaiting their result by call id (insertion order: oldest first).
    pending: dict[str, Event] = field(default_factory=dict)
    #: The call ids seen lately (made at the session's first call id).
    seen: SeenIds | None = None
    #: Overall per-step similarity, the oldest first (when the engine keeps sparklines).
    similarity: SparkHistory = field(default_factory=SparkHistory)
    #: Per detector, its non-zero per-step similarity scores.
    detector_similarity: dict[str, SparkHistory] = field(default_factory=dict)
    detections: deque[Detection] = field(default_factory=lambda: deque(maxlen=RECENT_DETECTIONS))
    #: The engine's global detectors (shared by every session).
    global_detectors: list[Detector[Any]] = field(default_factory=list)
    #: Per kind, the steps to run: this session's unmuted detectors that
    #: observe the kind, in run order, then the global ones (see :meth:`route`).
    steps: dict[Kind, tuple[Step, ...]] = field(default_factory=dict)
    #: Per kind, the ``observe`` of each of those steps but the turn
    #: detectors': what runs for an event that completes no turn (most).
    observers: dict[Kind, tuple[Callable[[Event, SessionView], Any], ...]] = field(default_factory=dict)
    #: The assistant turns, one tracker per ``same_turn_seconds`` of a turn
    #: detector (kept while it is muted: unmuted, it goes on where it was).
    trackers: dict[float, TurnTracker] = field(default_factory=dict)
    #: The trackers fed, those of the unmuted turn detectors.
    fed: tuple[tuple[float, TurnTracker], ...] = ()
    #: Assistant messages lately, to drop the second copy of one (hook and transcript).
    echoes: Echoes = field(default_factory=Echoes)
    #: Its recent results' outcomes, for the corroboration of warnings (detect/corroboration.py).
    ledger: OutcomeLedger = field(default_factory=OutcomeLedger)

    def route(self) -> None:
        """Work out the steps of each kind (after creation or a mute)."""
        active = [d for d in self.detectors if d.name not in self.muted]
        seconds: list[float] = []
        for detector in active:
            if isinstance(detector, TurnDetector) and detector.settings.same_turn_seconds not in seconds:
                seconds.append(detector.settings.same_turn_seconds)
        for each in seconds:
            if each not in self.trackers:
                self.trackers[each] = TurnTracker(same_turn_seconds=each)
        self.fed = tuple((each, self.trackers[each]) for each in seconds)
        # One step per detector, listed under each kind it observes (in run order).
        by_kind: dict[Kind, list[Step]] = {kind: [] for kind in Kind}
        for d in (*active, *self.global_detectors):
            step = (
                (d.judge, d.settings.same_turn_seconds) if isinstance(d, TurnDetector) else (d.observe, None)
            )
            for kind in d.kinds:
                listed = by_kind.get(kind)
                if listed is not None:
                    listed.append(step)
        by_kind[Kind.TOOL_RESULT].append((self.ledger.observe, None))
        self.steps = {kind: tuple(listed) for kind, listed in by_kind.items()}
        self.observers = {
            kind: tuple(run for run, turn_seconds in steps if turn_seconds is None)
            for kind, steps in self.steps.items()
        }

    def window(self) -> list[Event | EventRef]:
        """The events the call detectors are comparing right now (what a
        detector keeps as :class:`~monitor.events.EventRef` is left to the
        caller, which may hold copies of recent events: see the hub)."""
        for detector in self.detectors:
            if detector.provides_window:
                return list(detector.window())
        return []


#: Kinds that can start or be a wait for the person (while a session waits, every kind may end it).
_WAIT_KINDS = frozenset({Kind.TOOL_CALL, Kind.WAITING})
#: Kinds whose call ids are checked for duplicates.
_ID_KINDS = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
#: Kinds whose per-event similarity goes into the sparkline histories.
_SIMILARITY_KINDS = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE})


def _step(
    result: Event, overall: float, scores: dict[str, float]
) -> tuple[float, dict[str, float], set[str]]:
    """The sparkline bar of a call and its result: how much the *step*
    repeats.  A loop repeats both; honest polling repeats the call and gets a
    new result, so the lower of the two is what tells them apart (the call's
    1.0 alone drew honest polling as a loop).  Each detector's bar is capped
    by the step's: none draws a repeat the step does not have."""
    call = result.call
    noted = None
    if call is not None:
        noted, call.facts.spark = call.facts.spark, None
    if noted is None:
        return overall, scores, set()
    call_overall, call_scores, flagged = noted
    step = min(call_overall, overall)
    if not call_scores and not scores:
        return step, scores, set(flagged)
    merged: dict[str, float] = {}
    for source in (call_scores or {}, scores):
        for name, score in source.items():
            merged[name] = min(max(merged.get(name, 0.0), score), step)
    return step, merged, set(flagged)


def _record_bars(state: SessionState, similarity: float, scores: dict[str, float], flagged: set[str]) -> None:
    """Note the step's similarity, and each detector's that scored it or flagged it."""
    state.similarity.append(similarity, bool(flagged))
    names = set(scores) | flagged if flagged else scores
    histories = state.detector_similarity
    for name in names:
        line = histories.get(name)
        if line is None:
            line = histories[name] = SparkHistory()
        line.append(scores.get(name, 0.0), name in flagged)


def _duplicate(state: SessionState, event: Event) -> bool:
    """The session reported ``event`` lately: a call or result by its id, an
    assistant message or compaction by what it says."""
    if event.call_id and event.kind in _ID_KINDS:
        # Two sources for one session must not make one call look like a repeat.
        seen = state.seen
        if seen is None:
            seen = state.seen = SeenIds(MAX_SEEN_IDS)
        if not seen.admit(event):
            return True
    # A hook's copy of a message or compaction the transcript gave too (or the other way round).
    return (
        (event.kind is MESSAGE and event.role == "assistant") or event.kind is COMPACTION
    ) and state.echoes.repeated(event)


class Engine(EngineReads):
    """Runs all detectors over a stream of events from many sessions.

    With ``sparklines`` it also keeps each session's recent similarity scores
    for a UI (the hub's engine does; ``scan``'s has no use for them)."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        sparklines: bool = False,
        global_wrapper: Callable[[Detector[Any]], Detector[Any]] | None = None,
    ):
        """``global_wrapper``, if given, stands in for each global detector
        (a sharded scan's worker records sightings with it: see
        :class:`~monitor.detect.base.ShardableDetector`)."""
        self.config = config or Config()
        #: Keep per-session similarity histories (``SessionState.similarity``,
        #: ``detector_similarity``) for a UI to draw; a scan needs none.
        self.sparklines = sparklines
        self.policy = EscalationPolicy(settings_for(self.config.escalation, self.config.control.auto_kill))
        #: What usage and loop episodes cost (monitor/cost.py).
        self.costs = LoopCosts(self.config.prices)
        self.sessions: dict[str, SessionState] = {}
        self._session_classes: list[tuple[type[Detector[Any]], Any]] = []
        self.global_detectors: list[Detector[Any]] = []
        for name, cls in REGISTRY.items():
            settings = self.config.detector_settings(name)
            if not settings.enabled:
                continue
            if cls.scope == "global":
                detector = cls(settings)
                self.global_detectors.append(global_wrapper(detector) if global_wrapper else detector)
            else:
                self._session_classes.append((cls, settings))
        self._closed_events = 0  # events of the sessions closed so far
        #: Events dropped as duplicates (see :class:`SeenIds`).
        self.duplicates = 0
        #: Detectors muted per session: kept when it is closed, until it is forgotten.
        self._muted: dict[str, set[str]] = {}
        #: Per session its loop episodes (kept when it is closed, until it is forgotten).
        self.books: dict[str, EpisodeBook] = {}
        #: Events without a joining detection that end an episode (the detection window).
        self.episode_gap = episode_gap(self.config)

    @property
    def events_processed(self) -> int:
        """Events processed (duplicates left out), counted per session."""
        return self._closed_events + sum(state.events for state in self.sessions.values())

    # -- sessions -----------------------------------------------------------

    def session(self, session_id: str, event: Event | None = None) -> SessionState:
        """The session's state (made on first sight, or after :meth:`close`)."""
        state = self.sessions.get(session_id)
        if state is None:
            view = SessionView(session_id, self.config.tool_overrides)
            view.keeps_similarity = self.sparklines
            detectors = [cls(settings) for cls, settings in self._session_classes]
            book = self.books.get(session_id)
            if book is None:
                book = self.books[session_id] = EpisodeBook(session_id, self.episode_gap)
            state = SessionState(
                id=session_id,
                view=view,
                detectors=detectors,
                book=book,
                global_detectors=self.global_detectors,
            )
            muted = self._muted.get(session_id)
            if muted:
                state.muted |= muted
            state.route()
            if event is not None:
                state.first_ts = event.ts
                state.source = event.source
                view.started_ts = event.ts
            self.sessions[session_id] = state
        return state

    def close(self, session_id: str) -> SessionState | None:
        """Drop a finished session's detector state (its escalation, costs,
        mutes and episodes remain: see :meth:`forget`); its open episodes
        close as ended (:meth:`end_episodes` says which)."""
        state = self.sessions.pop(session_id, None)
        if state is not None:
            self._closed_events += state.events
        return state

    def end_episodes(self, session_id: str) -> list[EpisodeChange]:
        """Close the session's open episodes: it ended (or was closed idle)."""
        book = self.books.get(session_id)
        return book.close_all(ENDED) if book is not None else []

    # -- processing ---------------------------------------------------------

    def process(self, event: Event) -> Processed:
        """Feed one event: drop a duplicate, enrich, observe, conclude."""
        state = self.sessions.get(event.session)
        if state is None:
            state = self.session(event.session, event)
        if _duplicate(state, event):
            self.duplicates += 1
            return _DROPPED[self.level(event.session)]
        waits = event.kind in _WAIT_KINDS or state.view.input_wait is not None  # (else no wait is involved)
        if waits and self._follow_wait(state, event):
            return _QUIET[self.level(event.session)]
        self._enrich(state, event)
        book = state.book
        changes = book.tick(event.seq) if book.open else None
        found = self._observe(state, event)
        if event.kind is TOOL_CALL:
            state.view.last_call_key = known_call_key(event)  # (for the wait marks' gap rule)
        if found or self.sparklines:
            found = self._conclude(state, event, found)
        escalation = self.policy.sessions.get(event.session)
        level = escalation.level if escalation is not None else Level.NONE
        if found:
            joined = book.observe(found, escalation.episode if escalation is not None else 0)
            changes = changes + joined if changes else joined
        if event.kind is SESSION_END and book.open:
            changes = (changes or []) + book.close_all(ENDED)
        if changes:
            return Processed(False, tuple(found), level, tuple(changes))
        return Processed(False, tuple(found), level) if found else _QUIET[level]

    def _follow_wait(self, state: SessionState, event: Event) -> bool:
        """Follow the session's wait for the person (:mod:`~monitor.detect.input_wait`);
        True for a ``waiting`` event, taken here: no detector sees a wait.  (Asked of
        calls and waits, and of every event while the session waits: see ``_WAIT_KINDS``.)"""
        view = state.view
        if view.input_wait is None and event.kind is not WAITING and not asks_the_person(event):
            return False
        wait = view.input_wait
        view.input_wait = follow_wait(wait, event)
        if wait is not None and view.input_wait is None:
            unhold(view, wait, event.ts)  # the person's time is not the agent's
        if event.kind is not WAITING:
            return False
        self._enrich(state, event)
        return True

    def process_many(self, events: Iterable[Event]) -> list[Detection]:
        """:meth:`process` each event in order; their detections."""
        out: list[Detection] = []
        for event in events:
            found = self.process(event).detections
            if found:
                out.extend(found)
        return out

    def _enrich(self, state: SessionState, event: Event) -> None:
        """Number the event and work out what it means for its session
        before any detector sees it."""
        event.seq = state.events = state.events + 1
        state.last_ts = event.ts
        view = state.view
        if self.sparklines and view.similarity:  # reported since the last event
            view.similarity = 0.0
            view.detector_similarity.clear()
        kind = event.kind
        if kind is TOOL_CALL:
            view.tool_calls_seen += 1
            mark_waited(event, view)  # waiting is not looping (analysis/waits.py)
            if event.call_id:
                state.pending[event.call_id] = event
                if len(state.pending) > MAX_PENDING_CALLS:
                    del state.pending[next(iter(state.pending))]
        elif kind is TOOL_RESULT:
            call = state.pending.pop(event.call_id, None) if event.call_id else None
            if call is not None:
                event.call = call
                event.tool = event.tool or call.tool
                event.args = event.args if event.args is not None else call.args
                attach_result(call, event)
        elif kind is MESSAGE:
            if event.role == "user":
                for detector in state.detectors:
                    if detector.resets_on_user_turn:
                        detector.reset()
        else:
            self._follow_session(state, event)

    def _follow_session(self, state: SessionState, event: Event) -> None:
        """Session start and end, and usage."""
        kind = event.kind
        if kind is SESSION_START:
            state.agent = event.agent or state.agent
            state.view.agent = state.agent
            state.pid = event.pid if event.pid is not None else state.pid
            state.parent = event.parent or state.parent
            state.ended = False
            if event.meta:
                self.costs.start(event)  # the model it names, if any
        elif kind is SESSION_END:
            state.ended = True
            state.status = event.status or "ended"
        elif kind is USAGE:
            self.costs.usage(event, self.policy.sessions.get(event.session))

    def _observe(self, state: SessionState, event: Event) -> list[Detection]:
        """Run the detectors of the event's kind; what they find."""
        if event.kind in _ID_KINDS and by_harness(event):
            return []  # the harness's own call is not the agent acting (analysis/origin.py)
        view = state.view
        found: list[Detection] = []
        turns: dict[float, Turn] | None = None  # the turns it completes, by same_turn_seconds
        for fed_seconds, tracker in state.fed:
            turn = tracker.feed(event)
            if turn is not None:
                if turns is None:
                    turns = {}
                turns[fed_seconds] = turn
        if turns is None:  # no turn to judge: the observers alone
            for observe in state.observers[event.kind]:
                result = observe(event, view)
                if result:
                    found.extend(result)
            return found
        for run, seconds in state.steps[event.kind]:
            if seconds is None:
                result = run(event, view)
            else:
                turn = turns.get(seconds)
                if turn is None:
                    continue
                result = run(turn, view)
            if result:
                found.extend(result)
        return found

    def _conclude(self, state: SessionState, event: Event, found: list[Detection]) -> list[Detection]:
        """The end of an event's processing when it found something or the
        engine keeps sparklines: the event's sparkline bar, and its detections
        escalated and noted (returned, one per distinct evidence)."""
        kind = event.kind
        seq = event.seq
        view = state.view
        bar = -1.0  # this event's sparkline bar, if it draws one
        waiting = None
        if self.sparklines and kind in _SIMILARITY_KINDS:
            flagged: set[str] = set()  # (read below only when bar >= 0 or waiting)
            scores = view.detector_similarity
            bar = view.similarity
            if kind is TOOL_CALL and event.call_id:
                # One bar per step: the call waits for its result (see _step).
                waiting = event.facts.spark = [bar, dict(scores) if scores else None, flagged]
                bar = -1.0
            elif kind is TOOL_RESULT:
                bar, scores, flagged = _step(event, bar, scores)

        if not found:
            if bar >= 0:
                _record_bars(state, bar, scores, flagged)
            return found
        if len(found) > 1:
            found = _distinct(found)
        for detection in found:
            detection.session = detection.session or event.session
            detection.source = event.source
            if detection.line is None:  # (a detector may name a line inside a long message)
                detection.line = event.line
            detection.ts = event.ts
            detection.seq = seq
            self.policy.apply(detection, state.ledger.ceiling(detection))
            state.detections.append(detection)
        self.costs.detected(event.session, found, self.policy.sessions.get(event.session), event.ts, seq)
        if bar >= 0 or waiting is not None:
            flagged.update(d.detector for d in found if d.level >= Level.WARN)
            if bar >= 0:
                _record_bars(state, bar, scores, flagged)
        return found

    # -- operator actions -----------------------------------------------------

    def mute(self, session_id: str, detector: str) -> None:
        """Stop running ``detector`` in the session (it stays muted after a close)."""
        self._muted.setdefault(session_id, set()).add(detector)
        state = self.sessions.get(session_id)
        if state is not None:
            state.muted.add(detector)
            state.route()

    def unmute(self, session_id: str, detector: str) -> None:
        muted = self._muted.get(session_id)
        if muted is not None:
            muted.discard(detector)
        state = self.sessions.get(session_id)
        if state is not None:
            state.muted.discard(detector)
            state.route()

    def acknowledge(self, session_id: str, now: float) -> list[EpisodeChange]:
        """The operator has seen it: back to watching, with a cool-down from
        ``now`` (event time); its open episodes close as acknowledged."""
        self.policy.acknowledge(session_id, now)
        book = self.books.get(session_id)
        return book.close_all(ACKNOWLEDGED) if book is not None else []

    def recover(self, session_id: str, steps: int) -> list[EpisodeChange]:
        """The agent stopped looping after a nudge (``steps`` without a
        warning): back to watching; its open episodes close as stopped."""
        self.policy.recover(session_id, steps)
        book = self.books.get(session_id)
        return book.close_all(STOPPED) if book is not None else []

    def mark_false_positive(self, detection: Detection) -> list[EpisodeChange]:
        """The loop episode of that detection is a false positive: every
        pattern that joined it is no longer flagged in its session (whichever
        detectors saw it), and it closes."""
        book = self.books.get(detection.session)
        episode = book.holding(detection.detector, detection.pattern) if book is not None else None
        if book is None or episode is None:
            self.policy.mark_false_positive(detection)
            return []
        return self.mark_episode_false_positive(detection.session, episode.number)

    def mark_episode_false_positive(self, session_id: str, number: int) -> list[EpisodeChange]:
        """Episode ``number`` of the session is a false positive (see :meth:`mark_false_positive`)."""
        book = self.books.get(session_id)
        episode = book.find(number) if book is not None else None
        if book is None or episode is None:
            return []
        for detector, pattern in episode.pairs:
            self.policy.mark_false_positive(
                Detection(detector, Level.NONE, 0.0, "", pattern, session=session_id)
            )
        return book.close(number, FALSE_POSITIVE)

    def seed(
        self, session_id: str, last: Detection | None, rungs: Rungs = (), reason: str = "", episodes: int = 0
    ) -> None:
        """Take up a session an earlier run recorded: its escalation (:func:`seed_escalation`),
        and its next episode numbered after the ``episodes`` stored, as the store numbers them."""
        seed_escalation(self.policy.state(session_id), self.config.escalation.ladder, last, rungs, reason)
        if episodes > 0:
            book = self.books.setdefault(session_id, EpisodeBook(session_id, self.episode_gap))
            book.numbered = max(book.numbered, episodes)

    def forget(self, session_id: str) -> None:
        """Drop all the engine keeps of a closed session: escalation, mutes, episodes."""
        self.close(session_id)
        self.policy.reset(session_id)
        self._muted.pop(session_id, None)
        self.books.pop(session_id, None)


def _distinct(found: list[Detection]) -> list[Detection]:
    """Drop detections of one event that point at exactly the same evidence
    (e.g. exact_repeat and fingerprint's exact tier on one streak): one loop,
    one detection, the most severe proposal speaking for it (on a tie, the
    first detector in run order) -- a later detector's TERMINATE must not be
    lost to an earlier one's WARN."""
    kept: dict[frozenset[int], int] = {}
    out: list[Detection] = []
    for detection in found:
        key = frozenset(ref.seq for ref in detection.evidence)
        index = kept.get(key) if key else None
        if index is None:
            if key:
                kept[key] = len(out)
            out.append(detection)
        elif detection.level > out[index].level:
            out[index] = detection
    return out


def episode_gap(config: Config) -> int:
    """The detection window in events (:func:`monitor.detect.episodes.episode_gap`):
    from the widest ``window`` of the enabled detectors."""
    windows = []
    for name in REGISTRY:
        settings = config.detector_settings(name)
        window = getattr(settings, "window", 0)
        if settings.enabled and isinstance(window, int):
            windows.append(window)
    return gap_of(windows)
