"""The one interface every loop detector implements.

A detector is a small pure class: it is created per session with its settings,
sees that session's normalized events one at a time through :meth:`observe`,
keeps bounded state, costs O(window) per event, does no I/O, and returns the
detections (usually none) that the event triggers.

Settings are a frozen dataclass per detector (``Detector.Settings``); their
defaults come from the design notes and every field can be set from TOML under
``[detectors.<name>]``.  Presets are per-detector overrides in ``presets``.

Evidence: a detector keeps :func:`ref` of an event in its window (a small
:class:`~monitor.events.EventRef`, made once per event and shared by every
detector), never the event itself (whose content may be megabytes), and
builds a detection's evidence with :func:`evidence` from what it kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from monitor.detect.analysis.turns import TurnTracker
from monitor.events import Event, EventRef, Kind, Level


@dataclass(slots=True)
class Detection:
    """One finding of one detector about one session.

    ``pattern`` identifies *what* is repeating (a call fingerprint, a cycle, an
    error signature); the escalation policy keys its ladder, acknowledgements
    and false positives on ``(detector, pattern)``.  ``summary`` completes the
    sentence "You've …" for nudges; ``advice`` is the detector's specific
    suggestion for the agent.
    """

    detector: str
    level: Level
    score: float
    message: str
    pattern: str
    count: int = 0
    tool: str | None = None
    summary: str = ""
    advice: str = ""
    evidence: tuple[EventRef, ...] = ()
    # Filled in by the engine and the escalation policy.
    session: str = ""
    source: str = ""
    line: int | None = None
    ts: float = 0.0
    seq: int = 0
    proposed: Level = Level.NONE
    nudge: str = ""
    suppressed: str | None = None  # why the policy capped it (acknowledged, false positive…)
    #: What its loop episode has cost so far, when the log reports usage
    #: (``{"since", "since_seq", "tokens", "usd", "unpriced_tokens"}``: the
    #: event time and position it began at; monitor/cost.py).
    cost: dict[str, Any] | None = None

    @property
    def where(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.source,
            "line": self.line,
            "session": self.session,
            "detector": self.detector,
            "level": self.level.label,
            "score": round(self.score, 4),
            "message": self.message,
            "pattern": self.pattern,
            "count": self.count,
            "tool": self.tool,
            "nudge": self.nudge,
            "seq": self.seq,
            "evidence": [ref.to_dict() for ref in self.evidence],
            # Without its start's time: a log without timestamps has read times.
            **(
                {"cost": {k: v for k, v in self.cost.items() if k != "since"}}
                if self.cost is not None
                else {}
            ),
        }


@dataclass(frozen=True, slots=True)
class ToolOverride:
    """Per-tool adjustments from ``[tools.<name>]``."""

    exempt: bool = False
    threshold: int | None = None  # replaces count thresholds of call detectors
    wait_budget_seconds: float = 0.0  # replaces the waiting detector's budget (0: keep it)


class SessionView:
    """What a detector may know about its session beyond its own state.

    The engine owns it; detectors read from it and report per-event
    similarity into it (for the sparklines)."""

    __slots__ = (
        "session",
        "agent",
        "tool_overrides",
        "similarity",
        "detector_similarity",
        "keeps_similarity",
        "started_ts",
        "events_seen",
        "tool_calls_seen",
        "turns",
        "completed",
        "last_wait",
        "last_call_key",
        "last_call_ts",
        "router",
    )

    def __init__(self, session: str, tool_overrides: dict[str, ToolOverride] | None = None):
        self.session = session
        self.agent: str | None = None
        self.tool_overrides = tool_overrides or {}
        self.similarity = 0.0
        self.detector_similarity: dict[str, float] = {}
        #: Whether the engine keeps similarity histories (else reports are dropped).
        self.keeps_similarity = True
        self.started_ts: float | None = None
        self.events_seen = 0
        self.tool_calls_seen = 0
        #: same_turn_seconds -> [tracker, last event fed, its position, the turn it
        #: completed]: :meth:`turn` keeps it; the engine reads it to feed the tracker once per event.
        self.turns: dict[float, list[Any]] = {}
        #: The turn the current event completed, while the engine runs the
        #: turn detectors on it (see :meth:`TurnDetector.observe_completed`).
        self.completed: Any = None
        #: Seconds the latest tool call did nothing but wait (``sleep 60``), for the next one.
        self.last_wait = 0.0
        #: The latest tool call's key and time (a poll repeated 20 s later waited).
        self.last_call_key: str | None = None
        self.last_call_ts = 0.0
        #: The engine's dispatch of this session (monitor/detect/routing.py), if any.
        self.router: Any = None

    def listen(self, detector: str, kinds: frozenset[Kind]) -> None:
        """Detector ``detector`` (its name) needs ``observe`` for ``kinds`` of
        its own only, from the next event on (see ``Detector.listening``)."""
        router = self.router
        if router is not None:
            router.listen(detector, kinds)

    def exempt(self, tool: str | None) -> bool:
        if not self.tool_overrides:
            return False  # the common case: no [tools.*] overrides at all
        override = self.tool_overrides.get(tool or "")
        return bool(override and override.exempt)

    def turn(self, event: Event, same_turn_seconds: float) -> Any:
        """The assistant turn (:class:`~monitor.detect.analysis.turns.Turn`) that
        ``event`` completes, or ``None``.

        The turn detectors (output similarity, turn similarity, monologue) all
        group the session's events into turns the same way; one shared
        :class:`~monitor.detect.analysis.turns.TurnTracker` per ``same_turn_seconds``
        does it once per event instead of once per detector.  The tracker
        resets itself on a user turn, as the detectors do."""
        entry = self.turns.get(same_turn_seconds)
        if entry is None:
            entry = self.turns[same_turn_seconds] = [
                TurnTracker(same_turn_seconds=same_turn_seconds),
                None,
                0,
                None,
            ]
        elif entry[1] is event and entry[2] == self.events_seen:
            return entry[3]  # another turn detector already fed this event
        turn = entry[0].feed(event)
        entry[1], entry[2], entry[3] = event, self.events_seen, turn
        return turn

    def threshold(self, tool: str | None, default: int) -> int:
        if not self.tool_overrides:
            return default
        override = self.tool_overrides.get(tool or "")
        if override and override.threshold is not None:
            return override.threshold
        return default

    def note_similarity(self, detector: str, score: float) -> None:
        """Report how similar the current event is to what came before."""
        if not self.keeps_similarity:
            return
        if score > self.similarity:
            self.similarity = score
        if score > self.detector_similarity.get(detector, 0.0):
            self.detector_similarity[detector] = score


@dataclass(frozen=True)
class DetectorSettings:
    """Base class for per-detector settings; every detector can be disabled."""

    enabled: bool = True


class Detector:
    """Base class: subclass, set ``name``, ``Settings`` and implement ``observe``."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    Settings: ClassVar[type[DetectorSettings]] = DetectorSettings
    #: Preset name -> field overrides applied on top of ``Settings`` defaults.
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    #: A user turn ends the agent's streak: reset per-session state.
    resets_on_user_turn: ClassVar[bool] = True
    #: ``"session"``: one instance per session; ``"global"``: one for all.
    scope: ClassVar[str] = "session"
    #: The event kinds ``observe`` cares about; the engine only calls it for
    #: these (the hot path: most detectors skip most events).
    kinds: ClassVar[frozenset[Kind]] = frozenset(Kind)
    #: The kinds a new instance needs ``observe`` for (``None``: all of
    #: ``kinds``).  A detector that may do nothing with some kinds for a while
    #: gives them up and asks for them again with :meth:`SessionView.listen`:
    #: it must ask before it has work for them (from the next event on), and
    #: may give them up late (being called for nothing is only slower).
    listening: ClassVar[frozenset[Kind] | None] = None
    #: Its :meth:`window` is the session's: what the UI shows as the calls being
    #: compared (the first enabled detector that says so provides it).
    provides_window: ClassVar[bool] = False

    def __init__(self, settings: DetectorSettings | None = None):
        self.settings = settings if settings is not None else self.Settings()

    def observe(self, event: Event, view: SessionView) -> Iterable[Detection] | None:
        """Look at one event; return detections it triggers (or ``None``)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget the session's streaks (a user turn, an operator reset)."""

    def window(self) -> list[Event]:
        """The events this detector is currently comparing (for the UI)."""
        return []

    def window_records(self) -> tuple[Any, ...]:
        """With ``provides_window``: the window as call records, cheap to take
        now and made into events only when shown (:func:`monitor.detect.analysis.calls.events`)."""
        return ()


class ShardableDetector(Detector):
    """A global detector that a sharded scan (``scan --jobs``) can split in two.

    :meth:`sight` takes from one event what the detector needs of it (a small,
    picklable tuple, or ``None`` for an event it ignores) and runs where the
    event's session is; :meth:`count` does the rest and runs in one place
    over the sightings of every session in the order a single process would
    have seen them.  ``observe`` is the two in a row, so one process and
    many give the same detections."""

    scope: ClassVar[str] = "global"

    def observe(self, event: Event, view: SessionView) -> Iterable[Detection] | None:
        sighting = self.sight(event, view)
        return None if sighting is None else self.count(sighting, view)

    def sight(self, event: Event, view: SessionView) -> tuple | None:
        raise NotImplementedError

    def count(self, sighting: tuple, view: SessionView | None) -> list[Detection] | None:
        """Count one sighting; ``view`` is ``None`` where no session view is at hand."""
        raise NotImplementedError


class TurnDetector(Detector):
    """Base class of detectors that judge whole assistant turns (output
    similarity, turn similarity, monologue): subclass, give ``Settings`` a
    ``same_turn_seconds`` field, and implement :meth:`judge` -- or, as the
    built-in ones do, :meth:`observe_completed` (the same work, reading the
    turn from ``view.completed``: the engine calls it for every completed
    turn, and judging there saves a call per turn and detector).

    :meth:`observe` groups the session's events into turns through the
    view's shared tracker (:meth:`SessionView.turn`) and calls :meth:`judge`
    with each completed turn.  Since that is all it does, the engine asks the
    tracker once per event and skips these detectors for the events that
    complete no turn (most of them); a subclass that overrides ``observe``
    opts out of that."""

    def observe(self, event: Event, view: SessionView) -> Iterable[Detection] | None:
        turn = view.turn(event, self.settings.same_turn_seconds)
        if turn is None:
            return None
        return self.judge(turn, view)

    def observe_completed(self, event: Event | None, view: SessionView) -> Iterable[Detection] | None:
        """:meth:`observe` when the engine has fed the tracker itself and the
        event completed ``view.completed``."""
        return self.judge(view.completed, view)

    def judge(self, turn: Any, view: SessionView) -> Iterable[Detection] | None:
        """Look at one completed :class:`~monitor.detect.analysis.turns.Turn`."""
        if type(self).observe_completed is TurnDetector.observe_completed:
            raise NotImplementedError
        # A subclass that judges in observe_completed: hand it the turn there.
        completed, view.completed = view.completed, turn
        try:
            return self.observe_completed(None, view)
        finally:
            view.completed = completed


def evidence(events: Iterable[Event | EventRef], limit: int = 12) -> tuple[EventRef, ...]:
    """Evidence references for the last ``limit`` of ``events``: the
    :class:`EventRef` a detector kept (see :func:`ref`), or events."""
    kept = events if isinstance(events, (list, tuple)) else list(events)
    refs = tuple(map(ref, kept[-limit:]))
    for cited in refs:
        # Written now: a detection is shown and stored, and a written
        # summary is smaller than the snapshot it replaces.
        cited.summary  # noqa: B018
    return refs


def ref(event: Event | EventRef) -> EventRef:
    """The :class:`EventRef` of ``event``: what a detector keeps in its window
    instead of the event (whose content may be large).  Made once and kept
    on the event: several detectors keep the same events, and a loop's
    detections repeat, each citing the same events plus one (and a summary
    costs microseconds to write)."""
    if event.__class__ is EventRef:
        return event
    cache = event.cache
    made = cache.get("ref")
    if made is None or made.seq != event.seq:
        record = cache.get("record")  # a call's record (analysis/calls.py) holds its reference
        if record is not None and record.seq == event.seq:
            return record.ref
        made = cache["ref"] = EventRef.of(event)
    return made
