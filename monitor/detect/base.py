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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

from monitor.detect.analysis.turns import Turn
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
        "tool_calls_seen",
        "last_wait",
        "last_call_key",
        "last_call_ts",
        "input_wait",
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
        self.tool_calls_seen = 0
        #: Seconds the latest tool call did nothing but wait (``sleep 60``), for the next one.
        self.last_wait = 0.0
        #: The latest tool call's key and time (a poll repeated 20 s later waited).
        self.last_call_key: str | None = None
        self.last_call_ts = 0.0
        #: The wait for the person it is in (:mod:`monitor.detect.input_wait`), or None.
        self.input_wait: Any = None

    def exempt(self, tool: str | None) -> bool:
        if not self.tool_overrides:
            return False  # the common case: no [tools.*] overrides at all
        override = self.tool_overrides.get(tool or "")
        return bool(override and override.exempt)

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


@dataclass(frozen=True)
class TurnSettings(DetectorSettings):
    """Settings of a :class:`TurnDetector`: how the session's events are grouped into turns."""

    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


S = TypeVar("S", bound=DetectorSettings)
TS = TypeVar("TS", bound=TurnSettings)


class Detector(Generic[S]):
    """Base class: subclass as ``Detector[MySettings]``, set ``name``,
    ``Settings = MySettings`` and implement ``observe``."""

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
    #: these (most detectors skip most events).
    kinds: frozenset[Kind] = frozenset(Kind)
    #: Its :meth:`window` is the session's: what the UI shows as the calls being
    #: compared (the first enabled detector that says so provides it).
    provides_window: ClassVar[bool] = False

    def __init__(self, settings: S | None = None):
        self.settings: S = settings if settings is not None else cast(S, self.Settings())

    def observe(self, event: Event, view: SessionView) -> Iterable[Detection] | None:
        """Look at one event; return detections it triggers (or ``None``)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget the session's streaks (a user turn, an operator reset)."""

    def window(self) -> Sequence[Event | EventRef]:
        """The events this detector is currently comparing (for the UI)."""
        return []

    def window_records(self) -> tuple[Any, ...]:
        """With ``provides_window``: the window as call records, cheap to take
        now and made into events only when shown (:func:`monitor.detect.analysis.calls.events`)."""
        return ()


class ShardableDetector(Detector[S]):
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

    def sight(self, event: Event, view: SessionView) -> tuple[Any, ...] | None:
        raise NotImplementedError

    def count(self, sighting: tuple[Any, ...], view: SessionView | None) -> list[Detection] | None:
        """Count one sighting; ``view`` is ``None`` where no session view is at hand."""
        raise NotImplementedError


class TurnDetector(Detector[TS]):
    """Base class of detectors that judge whole assistant turns (output
    similarity, turn similarity, monologue): subclass as
    ``TurnDetector[MySettings]`` with settings derived from
    :class:`TurnSettings`, and implement :meth:`judge`.

    The engine groups the session's events into turns (one
    :class:`~monitor.detect.analysis.turns.TurnTracker` per
    ``same_turn_seconds``, shared by the turn detectors) and calls
    :meth:`judge` with each completed turn; ``observe`` is not called."""

    def observe(self, event: Event, view: SessionView) -> Iterable[Detection] | None:
        raise TypeError("the engine judges a turn detector's turns (TurnDetector.judge)")

    def judge(self, turn: Turn, view: SessionView) -> Iterable[Detection] | None:
        """Look at one completed :class:`~monitor.detect.analysis.turns.Turn`."""
        raise NotImplementedError


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
    if isinstance(event, EventRef):
        return event
    facts = event.facts
    made = facts.ref
    if made is None or made.seq != event.seq:
        record = facts.record  # a call's record (analysis/calls.py) holds its reference
        if record is not None and record.seq == event.seq:
            made_ref: EventRef = record.ref
            return made_ref
        made = facts.ref = EventRef.of(event)
    return made
