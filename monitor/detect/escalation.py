"""The escalation policy: from raw detections to a session's escalation state.

Per session the state climbs ``notice < warn < critical < terminate``.  Each
time the same pattern (``detector`` + ``pattern``) is detected again its
occurrence count moves one rung up the configured ladder; the final level is
the higher of the ladder's rung and the level the detector proposed.  Each
level has a nudge template, firmer as the level rises.

Operators act through :meth:`EscalationPolicy.acknowledge`,
:meth:`EscalationPolicy.mark_false_positive` and :meth:`EscalationPolicy.reset`.
All time is event time, so offline scans replay exactly as they happened live.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from monitor.detect.base import Detection
from monitor.events import Level

DEFAULT_NUDGES: dict[str, str] = {
    "notice": "",
    "warn": (
        "[loopwatch] You've {summary}. This looks like a stuck state. Either:\n"
        "1. Try a DIFFERENT approach or tool\n"
        "2. If blocked, explain what's preventing progress\n"
        "3. If the task is complete, say so explicitly\n"
        "{advice}"
    ),
    "critical": (
        "[loopwatch] WARNING: You've {summary} ({count} times). This is a stuck state.\n"
        "1. STOP repeating {pattern_short}\n"
        "2. Explain what you're stuck on\n"
        "3. Try a completely different approach\n"
        "{advice}"
    ),
    "terminate": (
        "[loopwatch] CRITICAL: You've {summary} ({count} times). You are in a loop "
        "and this session is about to be stopped. Stop now, summarise what you tried "
        "and what blocks you, and ask the user for help.\n{advice}"
    ),
}


@dataclass(frozen=True)
class EscalationSettings:
    """``[escalation]`` in the config file."""

    #: Level for the 1st, 2nd, 3rd… detection of the same pattern; the last
    #: rung repeats.  Design notes: warn → warn → terminate.
    ladder: tuple[Level, ...] = (Level.WARN, Level.WARN, Level.CRITICAL, Level.CRITICAL, Level.TERMINATE)
    #: After an acknowledgement the same pattern stays at ``notice`` this long.
    cooldown_seconds: float = 120.0
    nudges: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_NUDGES))


PRESET_LADDERS: dict[str, tuple[Level, ...]] = {
    "conservative": (Level.WARN, Level.WARN, Level.WARN, Level.CRITICAL, Level.CRITICAL, Level.TERMINATE),
    "balanced": EscalationSettings.ladder,
    "aggressive": (Level.WARN, Level.CRITICAL, Level.TERMINATE),
}


class _SafeDict(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass
class SessionEscalation:
    """The escalation state of one session."""

    level: Level = Level.NONE
    detector: str | None = None
    reason: str = ""
    nudge: str = ""
    occurrences: Counter[tuple[str, str]] = field(default_factory=Counter)
    acked_until: dict[tuple[str, str], float] = field(default_factory=dict)
    false_positives: set[tuple[str, str]] = field(default_factory=set)
    last: Detection | None = None

    def next_level(self, ladder: tuple[Level, ...], key: tuple[str, str]) -> Level:
        index = min(self.occurrences[key], len(ladder) - 1)
        return ladder[index]


class EscalationPolicy:
    """Turns detections into per-session escalation states and nudges."""

    def __init__(self, settings: EscalationSettings | None = None):
        self.settings = settings or EscalationSettings()
        self.sessions: dict[str, SessionEscalation] = {}
        self.checks = 0
        self.by_detector: Counter[str] = Counter()
        self.by_level: Counter[str] = Counter()
        self.false_positive_count = 0

    def state(self, session: str) -> SessionEscalation:
        state = self.sessions.get(session)
        if state is None:
            state = self.sessions[session] = SessionEscalation()
        return state

    def apply(self, detection: Detection) -> Detection:
        """Set the detection's final level and nudge; update the session."""
        self.checks += 1
        state = self.state(detection.session)
        key = (detection.detector, detection.pattern)
        detection.proposed = detection.level
        if detection.level >= Level.WARN:
            if key in state.false_positives:
                detection.suppressed = "marked as a false positive"
                detection.level = Level.NOTICE
            elif detection.ts < state.acked_until.get(key, float("-inf")):
                detection.suppressed = "acknowledged (cooling down)"
                detection.level = Level.NOTICE
            else:
                rung = state.next_level(self.settings.ladder, key)
                state.occurrences[key] += 1
                detection.level = max(detection.level, rung)
        detection.nudge = self.render_nudge(detection)
        self.by_detector[detection.detector] += 1
        self.by_level[detection.level.label] += 1
        if detection.level >= state.level and detection.level > Level.NONE:
            state.level = detection.level
            state.detector = detection.detector
            state.reason = detection.message
            state.nudge = detection.nudge
            state.last = detection
        return detection

    def render_nudge(self, detection: Detection) -> str:
        template = self.settings.nudges.get(detection.level.label, "")
        if not template:
            return ""
        pattern_short = detection.tool or detection.pattern
        values = _SafeDict(
            summary=detection.summary or detection.message.rstrip("."),
            advice=detection.advice,
            tool=detection.tool or "this tool",
            count=detection.count,
            pattern=detection.pattern,
            pattern_short=pattern_short[:80],
            detector=detection.detector,
            message=detection.message,
        )
        return template.format_map(values).strip()

    def acknowledge(self, session: str, now: float) -> None:
        """The operator has seen it: back to watching, with a cool-down."""
        state = self.state(session)
        until = now + self.settings.cooldown_seconds
        for key in state.occurrences:
            state.acked_until[key] = until
        state.level = Level.NONE
        state.detector = None
        state.reason = ""
        state.nudge = ""

    def mark_false_positive(self, detection: Detection) -> None:
        """That pattern is no longer flagged in that session."""
        state = self.state(detection.session)
        key = (detection.detector, detection.pattern)
        if key not in state.false_positives:
            state.false_positives.add(key)
            self.false_positive_count += 1
        state.occurrences.pop(key, None)
        if state.last is not None and (state.last.detector, state.last.pattern) == key:
            state.level = Level.NONE
            state.detector = None
            state.reason = ""
            state.nudge = ""
            state.last = None

    def reset(self, session: str) -> None:
        """Forget everything about the session's escalation."""
        self.sessions.pop(session, None)

    def counters(self) -> dict[str, object]:
        return {
            "checks": self.checks,
            "detections_by_detector": dict(self.by_detector),
            "detections_by_level": dict(self.by_level),
            "false_positives": self.false_positive_count,
        }
