"""The detection engine: the one pipeline ``scan``, ``watch`` and the TUI share.

:class:`Engine` takes normalized events in any order of sessions, keeps one
:class:`SessionState` per session (created on first sight), pairs each tool
result with its call, runs every enabled detector, and passes what they find
through the :class:`~monitor.detect.escalation.EscalationPolicy`.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from struct import Struct
from typing import Any

from monitor.config import Config
from monitor.cost import LoopCosts
from monitor.detect.base import Detection, Detector, SessionView
from monitor.detect.detectors import REGISTRY
from monitor.detect.detectors.waiting import mark as mark_waited
from monitor.detect.escalation import EscalationPolicy
from monitor.detect.routing import Plan, Router
from monitor.events import SESSION_END, SESSION_START, USAGE, Event, Kind, Level

#: Tool calls awaiting their result, per session.  Calls whose results never
#: arrive must not grow memory.
MAX_PENDING_CALLS = 64
#: Call ids remembered per session to drop the same call seen twice (a hook
#: and the transcript of one Claude Code session both report every call).
MAX_SEEN_IDS = 256
#: Per-event similarity scores kept per session for the sparklines.
SIMILARITY_HISTORY = 60
#: Detections kept per session: the latest, for operator actions (the hub,
#: the UI's feed and the store keep their own history).
RECENT_DETECTIONS = 1

#: The ring's item type: a C ``long`` where it has 64 bits (an ``array``
#: converts a ``long`` without the general byte-by-byte path of a ``long long``).
_SEEN_TYPE = "l" if array("l").itemsize == 8 else "q"
#: A remembered call id's hash as the bytes of a ring item (to search the ring's bytes).
_SEEN_SLOT = 8
_token = Struct(_SEEN_TYPE).pack
#: Counters of the filter in front of that ring (one byte each).
_FILTER_SLOTS = 1024
_FILTER_MASK = _FILTER_SLOTS - 1


@dataclass
class SessionState:
    """Everything the engine holds for one session; bounded in size.

    The per-session structures are kept compact because there may be
    thousands of sessions: call ids as 64-bit hashes in one ring of bytes,
    similarity histories as arrays, only the last few detections."""

    id: str
    view: SessionView
    detectors: list[Detector]
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
    #: Hashes of the call ids seen lately (a ring of 64-bit ints written at
    #: ``seen_at``); grows only once the session has call ids.
    seen: array = field(default_factory=lambda: array(_SEEN_TYPE))
    seen_at: int = 0
    #: How many ids in ``seen`` have each hash slot (see ``process``).
    seen_counts: bytearray = field(default_factory=bytearray)
    #: Overall per-event similarity, the oldest first (when the engine keeps
    #: sparklines).  Flat arrays of doubles: smaller than a deque of floats, and
    #: unrounded (even single precision changes the sparklines' colours).
    similarity: array = field(default_factory=lambda: array("d"))
    #: Per detector, its non-zero per-event similarity scores.
    detector_similarity: dict[str, array] = field(default_factory=dict)
    detections: deque[Detection] = field(default_factory=lambda: deque(maxlen=RECENT_DETECTIONS))
    #: The engine's global detectors by kind (shared by every session).
    global_by_kind: dict[Kind, list[Detector]] = field(default_factory=dict)
    #: Per kind, the bound ``observe`` methods to call: this session's
    #: detectors listening to it, then the global ones.  Precomputed (and
    #: kept by ``view.router``) so that the hot loop is one dict lookup and plain calls.
    observers: dict[Kind, tuple] = field(default_factory=dict)
    #: The ``same_turn_seconds`` of this session's turn detectors when they
    #: can be skipped for events that complete no turn (see ``route``).
    turn_gate: float | None = None
    #: ``view.turns[turn_gate]`` once the tracker exists (it stays: saves a
    #: dict lookup per event).
    turn_entry: list | None = None
    #: ``observers`` without those turn detectors.
    quiet_observers: dict[Kind, tuple] = field(default_factory=dict)

    @property
    def by_kind(self) -> dict[Kind, list[Detector]]:
        """This session's detectors by the event kinds they observe (muted ones left out)."""
        return {
            kind: [d for d in self.detectors if kind in d.kinds and d.name not in self.muted] for kind in Kind
        }

    def route(self, plan: Plan | None = None) -> None:
        """Rebuild the per-kind dispatch (after creation or a mute).

        ``plan`` is what :meth:`plan` gives for another session with the
        same detectors and mutes (the engine reuses it for new sessions,
        which start with each detector's ``listening`` kinds).  A rebuilt
        dispatch starts with every detector listening to all of its kinds
        (those with nothing to do give them up again)."""
        new = plan is not None
        plan = plan if new else self.plan()
        self.turn_gate = plan.turn_gate
        self.turn_entry = None
        router = self.view.router = Router(plan, self.detectors, plan.start if new else 0)
        self.observers, self.quiet_observers = router.observers, router.quiet

    def plan(self) -> Plan:
        """The dispatch of this session's detectors and mutes (see :class:`~monitor.detect.routing.Plan`)."""
        return Plan(self.detectors, self.muted, self.global_by_kind)

    def window(self) -> list[Event]:
        """The events the call detectors are comparing right now (what a
        detector keeps as :class:`~monitor.events.EventRef` is left to the
        caller, which may hold copies of recent events: see the hub)."""
        for detector in self.detectors:
            if detector.provides_window:
                return list(detector.window())
        return []

    def similarity_history(self) -> tuple[float, ...]:
        """The overall per-event similarity (0..1), the oldest first."""
        return tuple(self.similarity)

    def detector_similarity_history(self) -> dict[str, tuple[float, ...]]:
        """Per detector, its per-event similarity scores (0..1), the oldest first."""
        return {name: tuple(scores) for name, scores in self.detector_similarity.items()}


#: Kinds whose call ids are checked for duplicates.
_ID_KINDS = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
#: Kinds whose per-event similarity goes into the sparkline histories.
_SIMILARITY_KINDS = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE})
_TOOL_CALL, _TOOL_RESULT, _MESSAGE = Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE


def _step(
    result: Event, overall: float, scores: dict[str, float]
) -> tuple[float, dict[str, float], set[str]]:
    """The sparkline bar of a call and its result: how much the *step*
    repeats.  A loop repeats both; honest polling repeats the call and gets a
    new result, so the lower of the two is what tells them apart (the call's
    1.0 alone drew honest polling as a loop).  Each detector's bar is capped
    by the step's: none draws a repeat the step does not have."""
    call = result.call
    noted = call.cache.pop("spark", None) if call is not None else None
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


def _bar(similarity: float, flagged: bool) -> float:
    """The sparkline scale: the lower half is how much a step repeats earlier
    ones; the upper half is reserved for steps flagged at warn or above (after
    acknowledgements and false positives).  Honest work -- polling, similar
    narration -- stays in the lower half; a loop fills the row."""
    if flagged:
        return 0.5 + 0.5 * max(similarity, 0.5)
    return 0.5 * min(similarity, 1.0)


def _record_bars(state: Any, similarity: float, scores: dict[str, float], flagged: set[str]) -> None:
    """Append the step's bar, and each detector's that scored it or flagged it."""
    history = state.similarity
    history.append(_bar(similarity, bool(flagged)))
    if len(history) > SIMILARITY_HISTORY:
        del history[0]
    names = set(scores) | flagged if flagged else scores
    histories = state.detector_similarity
    for name in names:
        line = histories.get(name)
        if line is None:
            line = histories[name] = array("d")
        line.append(_bar(scores.get(name, 0.0), name in flagged))
        if len(line) > SIMILARITY_HISTORY:
            del line[0]


class Engine:
    """Runs all detectors over a stream of events from many sessions.

    With ``sparklines`` it also keeps each session's recent similarity scores
    for a UI (the hub's engine does; ``scan``'s has no use for them)."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        sparklines: bool = False,
        global_wrapper: Callable[[Detector], Detector] | None = None,
    ):
        """``global_wrapper``, if given, stands in for each global detector
        (a sharded scan's worker records sightings with it: see
        :class:`~monitor.detect.base.ShardableDetector`)."""
        self.config = config or Config()
        #: Keep per-session similarity histories (``SessionState.similarity``,
        #: ``detector_similarity``) for a UI to draw; a scan needs none.
        self.sparklines = sparklines
        self.policy = EscalationPolicy(self.config.escalation)
        #: What usage and loop episodes cost (monitor/cost.py).
        self.costs = LoopCosts(self.config.prices)
        self.sessions: dict[str, SessionState] = {}
        self._session_classes = []
        self.global_detectors: list[Detector] = []
        for name, cls in REGISTRY.items():
            settings = self.config.detector_settings(name)
            if not settings.enabled:
                continue
            if cls.scope == "global":
                detector = cls(settings)
                self.global_detectors.append(global_wrapper(detector) if global_wrapper else detector)
            else:
                self._session_classes.append((cls, settings))
        self._global_by_kind = {kind: [d for d in self.global_detectors if kind in d.kinds] for kind in Kind}
        self._plan: Plan | None = None
        self._closed_events = 0  # events of the sessions closed so far
        self.duplicates = 0

    @property
    def events_processed(self) -> int:
        """Events processed (duplicates left out), counted per session rather
        than once more per event on the hot path."""
        return self._closed_events + sum(state.events for state in self.sessions.values())

    # -- sessions -----------------------------------------------------------

    def session(self, session_id: str, event: Event | None = None) -> SessionState:
        state = self.sessions.get(session_id)
        if state is None:
            view = SessionView(session_id, self.config.tool_overrides)
            view.keeps_similarity = self.sparklines
            detectors = [cls(settings) for cls, settings in self._session_classes]
            state = SessionState(
                id=session_id, view=view, detectors=detectors, global_by_kind=self._global_by_kind
            )
            # Every new session has the same detectors, unmuted: one plan.
            if self._plan is None:
                self._plan = state.plan()
            state.route(self._plan)
            if event is not None:
                state.first_ts = event.ts
                state.source = event.source
                view.started_ts = event.ts
            self.sessions[session_id] = state
        return state

    def close(self, session_id: str) -> SessionState | None:
        """Drop a finished session's detector state (its escalation remains)."""
        state = self.sessions.pop(session_id, None)
        if state is not None:
            self._closed_events += state.events
        return state

    # -- processing ---------------------------------------------------------

    def process(self, event: Event) -> list[Detection]:
        """Feed one event; return its detections after escalation (see :meth:`process_many`)."""
        return self.process_many((event,))

    def process_many(self, events: Iterable[Event]) -> list[Detection]:
        """Feed events in order; return their detections after escalation.

        A tool call or result whose call id the session already reported is
        dropped (counted in ``duplicates``): two sources for one session must
        not make one call look like a repeat.

        This runs for every event of every session: it is one flat loop (no
        helper calls, locals for what is used twice) on purpose, and a scan
        feeds it a batch of events at a time (a call an event costs more
        than the loop's step)."""
        out: list[Detection] = []
        sessions = self.sessions
        sparklines = self.sparklines
        for event in events:
            state = sessions.get(event.session)
            if state is None:
                state = self.session(event.session, event)
            kind = event.kind
            call_id = event.call_id
            if call_id and kind in _ID_KINDS:
                # The id's 64-bit hash (a result's inverted, so that a call and
                # its result differ), kept in a ring of ints instead of a dict of
                # strings.  A counting filter indexed by the hash's low bits says
                # when it cannot be in the ring (most ids), so the ring is
                # searched (as bytes, by memchr) only when it may.  Flat on
                # purpose: this runs for most events.
                digest = hash(call_id)
                if kind is _TOOL_RESULT:
                    digest = ~digest
                slot = digest & _FILTER_MASK
                counts = state.seen_counts
                seen = state.seen
                if not counts:
                    counts = state.seen_counts = bytearray(_FILTER_SLOTS)
                    count = 0
                elif count := counts[slot]:
                    ring = seen.tobytes()
                    token = _token(digest)
                    at = ring.find(token)
                    while at > 0 and at % _SEEN_SLOT:
                        at = ring.find(token, at + 1)
                    if at >= 0:
                        self.duplicates += 1
                        continue
                if len(seen) < MAX_SEEN_IDS:
                    seen.append(digest)  # (seen_at stays 0 while the ring fills: where it wraps to)
                else:
                    at = state.seen_at
                    old = seen[at] & _FILTER_MASK  # the oldest id's filter slot
                    left = counts[old]
                    if left < 255:  # a saturated counter stays: it never undercounts
                        counts[old] = left - 1
                        if old == slot:
                            count = left - 1
                    seen[at] = digest
                    state.seen_at = (at + 1) % MAX_SEEN_IDS
                if count < 255:
                    counts[slot] = count + 1
            seq = event.seq = state.events = state.events + 1
            state.last_ts = event.ts
            view = state.view
            view.events_seen = seq
            if sparklines and view.similarity:  # reported since the last event (only with sparklines)
                view.similarity = 0.0
                view.detector_similarity.clear()

            if kind is _TOOL_CALL:
                view.tool_calls_seen += 1
                # Waiting is not looping: mark calls made after a wait (waiting.py).
                mark_waited(event, view)
                if call_id:
                    pending = state.pending
                    pending[call_id] = event
                    if len(pending) > MAX_PENDING_CALLS:
                        del pending[next(iter(pending))]
            elif kind is _TOOL_RESULT:
                call = state.pending.pop(call_id, None) if call_id else None
                if call is not None:
                    event.call = call
                    event.tool = event.tool or call.tool
                    event.args = event.args if event.args is not None else call.args
                    # The call's record, if a call detector made one, learns its
                    # result here, once, before any detector looks at it.
                    record = call.cache.get("record")
                    if record is not None and record.text is None and record.seq == call.seq:
                        record.attach(event)
            elif kind is _MESSAGE:
                if event.role == "user":
                    for detector in state.detectors:
                        if detector.resets_on_user_turn:
                            detector.reset()
            elif kind is SESSION_START:
                state.agent = event.agent or state.agent
                view.agent = state.agent
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

            found: list[Detection] | None = None  # (made for the rare event that finds something)
            gate = state.turn_gate
            if gate is None:
                observers = state.observers[kind]
            else:
                # Feed the session's turn tracker once; the turn detectors only
                # run when the event completed a turn (and judge it directly).
                entry = state.turn_entry
                if entry is None or (entry[1] is event and entry[2] == seq):
                    completed = view.turn(event, gate)
                    state.turn_entry = view.turns[gate]
                else:  # SessionView.turn(), inlined: this runs for every event
                    completed = entry[0].feed(event)
                    entry[1] = event
                    entry[2] = seq
                    entry[3] = completed
                view.completed = completed
                observers = (state.quiet_observers if completed is None else state.observers)[kind]
            for observe in observers:
                result = observe(event, view)
                if result:
                    if found is None:
                        found = []
                    found.extend(result)
            if gate is not None:
                view.completed = None
            if kind is _TOOL_CALL:
                view.last_call_key = event.cache.get("call_key")  # (for waiting.mark's gap rule)
            if found is not None or sparklines:  # (the common case: nothing more to do)
                out.extend(self._conclude(state, event, found or []))
        return out

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
            if kind is _TOOL_CALL and event.call_id:
                # One bar per step: the call waits for its result (see _step).
                waiting = event.cache["spark"] = [bar, dict(scores) if scores else None, flagged]
                bar = -1.0
            elif kind is _TOOL_RESULT:
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
            detection.line = event.line
            detection.ts = event.ts
            detection.seq = seq
            self.policy.apply(detection)
            state.detections.append(detection)
        self.costs.detected(event.session, found, self.policy.sessions.get(event.session), event.ts, seq)
        if bar >= 0 or waiting is not None:
            flagged.update(d.detector for d in found if d.level >= Level.WARN)
            if bar >= 0:
                _record_bars(state, bar, scores, flagged)
        return found

    # -- operator actions -----------------------------------------------------

    def mute(self, session_id: str, detector: str) -> None:
        state = self.session(session_id)
        state.muted.add(detector)
        state.route()

    def unmute(self, session_id: str, detector: str) -> None:
        state = self.session(session_id)
        state.muted.discard(detector)
        state.route()

    def level(self, session_id: str) -> Level:
        return self.policy.state(session_id).level


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
