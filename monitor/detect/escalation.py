"""The escalation policy: from raw detections to a session's escalation state.

Per session the state climbs ``notice < warn < critical < terminate``.  Each
time the same pattern (``detector`` + ``pattern``) is detected again while its
loop goes on, its occurrence count moves one rung up the configured ladder (a
later, separate episode of the pattern starts again at the first rung: see
:func:`continues`); the final level is the higher of the ladder's rung and the
level the detector proposed.  Each level has a nudge template, firmer as the
level rises.

Operators act through :meth:`EscalationPolicy.acknowledge`,
:meth:`EscalationPolicy.mark_false_positive` and :meth:`EscalationPolicy.reset`.
All time is event time, so offline scans replay exactly as they happened live.

*Acknowledge* quiets the patterns standing in the session at that moment
(each pattern that climbed the ladder in its current episode) for
``cooldown_seconds`` of event time: their detections are recorded as notices
(``suppressed``).  Two things break through: a pattern that was not standing
(a new way of looping), and a quieted pattern clearly worse -- its count at
least twice, and at least ``WORSE_BY`` more than, its count when it was
acknowledged.  A breakthrough takes the rung it would have taken anyway.

A *false positive* sticks: every later detection of that pattern in that
session, whatever level its detector proposed, is marked
``suppressed = FALSE_POSITIVE`` and never raises the session's level (the hub
drops it: not shown, not stored).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from monitor.detect.base import Detection
from monitor.detect.corroboration import NOT_CORROBORATED
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
        "[loopwatch] WARNING: You've {summary}. This is a stuck state.\n"
        "1. STOP repeating {pattern_short}\n"
        "2. Explain what you're stuck on\n"
        "3. Try a completely different approach\n"
        "{advice}"
    ),
    "terminate": (
        "[loopwatch] CRITICAL: You've {summary}. You are in a loop, "
        "and the person watching this session has been alerted. Stop now, summarise what you tried "
        "and what blocks you, and ask the user for help.\n{advice}"
    ),
}
#: The default ``terminate`` nudge when ``[control] auto_kill`` is on: the session is
#: really stopped then (without it, nothing stops it but the operator).
AUTO_KILL_NUDGE = (
    "[loopwatch] CRITICAL: You've {summary}. You are in a loop, "
    "and this session is being stopped. Stop now, summarise what you tried "
    "and what blocks you, and ask the user for help.\n{advice}"
)


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


#: Patterns remembered per session (ladder rungs, acks): a session that loops in
#: ever new ways must not grow memory without bound.
MAX_PATTERNS = 64
#: Standing detections kept per session (to fall back on after a false positive).
MAX_STANDING = 8
#: An acknowledged pattern breaks through when its count grew by at least this
#: much and at least doubled since the acknowledgement.
WORSE_BY = 3
#: ``Detection.suppressed`` of a detection of a pattern marked a false positive.
FALSE_POSITIVE = "marked as a false positive"
ACKNOWLEDGED = "acknowledged (cooling down)"


def _seconded(state: SessionEscalation, detection: Detection) -> bool:
    """Whether a detector's own jump to ``terminate`` (above the rung its pattern's
    ladder gives) is backed: the session already stands at ``critical`` (the loop
    was said to be critical and went on), or another detector warns in it (two
    independent signals).  One detector's first claim never stops a session."""
    return state.level >= Level.CRITICAL or (
        state.level >= Level.WARN and state.detector != detection.detector
    )


def pattern_key(detector: str, pattern: str) -> int:
    """The key of a pattern in a session's escalation state: a 64-bit hash
    of ``(detector, pattern)`` (a pattern may be 200 characters long, and a
    session remembers up to ``MAX_PATTERNS`` of them)."""
    return hash((detector, pattern))


def _bound(table: dict[Any, Any], limit: int = MAX_PATTERNS) -> None:
    """Forget the oldest entries beyond ``limit`` (dicts keep insertion order)."""
    while len(table) > limit:
        del table[next(iter(table))]


class PatternCounts:
    """How often each pattern (by :func:`pattern_key`) has escalated in its
    current episode, the least recently escalated first; the least recent go
    beyond ``limit``.  With each, what its latest detection said: its count
    and the position (``seq``) of the event that triggered it, so that the
    next detection can tell whether it continues that loop (see
    :func:`continues`).

    Flat arrays instead of a dict: a few hundred bytes per session."""

    __slots__ = ("keys", "counts", "sizes", "ends", "limit")

    def __init__(self, limit: int = MAX_PATTERNS):
        self.keys = array("q")
        self.counts = array("I")
        self.sizes = array("I")  # the latest detection's count
        self.ends = array("q")  # the latest detection's seq
        self.limit = limit

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self.keys))

    def __contains__(self, key: object) -> bool:
        return key in self.keys

    def get(self, key: int, default: int = 0) -> int:
        try:
            return self.counts[self.keys.index(key)]
        except ValueError:
            return default

    def latest(self, key: int) -> tuple[int, int] | None:
        """``(count, seq)`` of the pattern's latest detection that escalated."""
        try:
            at = self.keys.index(key)
        except ValueError:
            return None
        return self.sizes[at], self.ends[at]

    def bump(self, key: int, size: int = 0, end: int = 0) -> int:
        """Count one more escalation of ``key`` (now the most recent), by a
        detection of count ``size`` at seq ``end``; return the new count."""
        count = self.pop(key, 0) + 1
        self.keys.append(key)
        self.counts.append(min(count, 0xFFFFFFFF))
        self.sizes.append(min(max(size, 0), 0xFFFFFFFF))
        self.ends.append(end)
        if len(self.keys) > self.limit:
            del self.keys[0], self.counts[0], self.sizes[0], self.ends[0]
        return count

    def pop(self, key: int, default: int = 0) -> int:
        try:
            at = self.keys.index(key)
        except ValueError:
            return default
        count = self.counts[at]
        del self.keys[at], self.counts[at], self.sizes[at], self.ends[at]
        return count


def continues(detection: Detection, latest: tuple[int, int]) -> bool:
    """Whether ``detection`` continues the loop its pattern's latest
    detection (``latest``: its count and seq) was about: the count grew (the
    loop went on), or it cites at least two events from that detection's
    time or earlier (the same streak, seen again: a window-bounded count such
    as exact_repeat's stops growing while the loop goes on).

    A detection that does neither is about a new episode: the earlier streak
    ended (progress, a user turn) and the same thing happened again later --
    two bursts of honest polling an hour apart, a plan restated before each of
    three pieces of work, "Round 3 done" after "Round 2 done" -- and must not
    climb the ladder to ``terminate`` as one loop would.  (Citing one earlier
    event is not enough: a repeat names the output it repeats.)  Where that
    cannot be told -- no positions, as for a detection made outside the
    engine, or fewer than two events cited -- it continues."""
    size, end = latest
    if detection.count > size or not detection.seq or not end:
        return True
    evidence = detection.evidence
    if len(evidence) < 2:
        return True
    source = detection.source
    earlier = 0
    for ref in evidence:
        if ref.seq <= end and ref.source == source:
            earlier += 1
            if earlier == 2:
                return True
    return False


class _SafeDict(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass
class SessionEscalation:
    """The escalation state of one session.

    Patterns are remembered by :func:`pattern_key`, and standing detections
    packed without their evidence and nudge (re-rendered if one is shown
    again): the state stays a few KB however long the session runs."""

    level: Level = Level.NONE
    detector: str | None = None
    reason: str = ""
    nudge: str = ""
    occurrences: PatternCounts = field(default_factory=PatternCounts)
    acked_until: dict[int, float] = field(default_factory=dict)
    #: The count each acknowledged pattern had when it was acknowledged.
    acked_count: dict[int, int] = field(default_factory=dict)
    #: Event time the latest acknowledgement ends (0: none).
    quiet_until: float = 0.0
    false_positives: dict[int, None] = field(default_factory=dict)  # not a set: smaller when empty
    last: Detection | None = None
    #: The latest warn-or-above detection of each pattern still standing, so that
    #: clearing one pattern (a false positive) leaves the others flagged: its
    #: level, and the rest packed (see :func:`_pack`).
    active: dict[int, tuple[Level, bytes]] = field(default_factory=dict)
    #: The episode the session is in: a new number each time it leaves
    #: watching (what a loop costs is counted per episode: monitor/cost.py).
    episode: int = 0

    def show(self, detection: Detection) -> None:
        """Make ``detection`` the session's current level, reason and nudge.

        ``last`` keeps it without its evidence: the state needs only what
        it is about (to fall back after a false positive), and a standing
        detection may outlive the detector windows that share its evidence
        (a later, lower one does not replace it) -- a dozen references with
        their summaries, kept for as long as the session lives."""
        self.level = detection.level
        self.detector = detection.detector
        self.reason = detection.message
        self.nudge = detection.nudge
        self.last = _without_evidence(detection) if detection.evidence else detection

    def clear(self) -> None:
        """Back to watching."""
        self.level = Level.NONE
        self.detector = None
        self.reason = ""
        self.nudge = ""
        self.last = None

    def next_level(self, ladder: tuple[Level, ...], key: int) -> Level:
        index = min(self.occurrences.get(key), len(ladder) - 1)
        return ladder[index]

    def count(self, detector: str, pattern: str) -> int:
        """Detections of that pattern so far that climbed the ladder."""
        return self.occurrences.get(pattern_key(detector, pattern))

    def acknowledged_until(self, detector: str, pattern: str) -> float | None:
        return self.acked_until.get(pattern_key(detector, pattern))


class EscalationPolicy:
    """Turns detections into per-session escalation states and nudges."""

    def __init__(self, settings: EscalationSettings | None = None):
        self.settings = settings or EscalationSettings()
        self.sessions: dict[str, SessionEscalation] = {}
        self.checks = 0
        self.by_detector: Counter[str] = Counter()
        self.by_level: Counter[str] = Counter()
        self.false_positive_count = 0
        self.episodes = 0

    def state(self, session: str) -> SessionEscalation:
        state = self.sessions.get(session)
        if state is None:
            state = self.sessions[session] = SessionEscalation()
        return state

    def apply(self, detection: Detection, ceiling: Level = Level.TERMINATE) -> Detection:
        """Set the detection's final level and nudge; update the session.
        ``ceiling`` is the highest level its evidence supports
        (detect/corroboration.py): a detection proposed at ``warn`` or above
        with a ``notice`` ceiling stays a notice and climbs no rung; under a
        ``warn`` ceiling it climbs, but its level stays ``warn``."""
        self.checks += 1
        state = self.state(detection.session)
        key = pattern_key(detection.detector, detection.pattern)
        detection.proposed = detection.level
        if ceiling < detection.level:
            detection.level = ceiling
            if ceiling < Level.WARN:
                detection.message += NOT_CORROBORATED
        if key in state.false_positives:  # whatever level was proposed: it never counts again
            detection.suppressed = FALSE_POSITIVE
            detection.level = min(detection.level, Level.NOTICE)
            detection.nudge = ""
            return detection
        if detection.level >= Level.WARN:
            if detection.ts < state.acked_until.get(key, float("-inf")) and not self._worse(
                state, key, detection
            ):
                detection.suppressed = ACKNOWLEDGED
                detection.level = Level.NOTICE
            else:
                occurrences = state.occurrences
                latest = occurrences.latest(key)
                if latest is not None and not continues(detection, latest):
                    occurrences.pop(key)  # a new episode: back to the first rung
                rung = state.next_level(self.settings.ladder, key)
                occurrences.bump(key, detection.count, detection.seq)
                detection.level = min(max(detection.level, rung), max(ceiling, Level.WARN))
                if (
                    detection.level is Level.TERMINATE
                    and rung < Level.TERMINATE
                    and not _seconded(state, detection)
                ):
                    detection.level = Level.CRITICAL
        detection.nudge = self.render_nudge(detection)
        self.by_detector[detection.detector] += 1
        self.by_level[detection.level.label] += 1
        if detection.level >= Level.WARN:
            state.active.pop(key, None)
            state.active[key] = (detection.level, _pack(detection))
            _bound(state.active, MAX_STANDING)
        # A quieted repeat is recorded as a notice, but the session stays back to
        # watching (docs/operating.md): only a detection that counts sets its level.
        if detection.level >= state.level and detection.level > Level.NONE and detection.suppressed is None:
            if state.level is Level.NONE:
                self.episodes += 1
                state.episode = self.episodes
            state.show(detection)
        return detection

    @staticmethod
    def _worse(state: SessionEscalation, key: int, detection: Detection) -> bool:
        """An acknowledged pattern clearly worse than when it was acknowledged."""
        before = state.acked_count.get(key, 0)
        return detection.count >= max(2 * before, before + WORSE_BY)

    def render_nudge(self, detection: Detection) -> str:
        template = self.settings.nudges.get(detection.level.label, "")
        if not template:
            return ""
        # The agent reads this: a tool name, never an internal pattern key
        # ("output:3f2a…"); what has no tool is the agent repeating itself.
        pattern_short = detection.tool or "yourself"
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
        try:
            return template.format_map(values).strip()
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            # (a template the config did not check: never lose the session's events over it)
            return DEFAULT_NUDGES.get(detection.level.label, "").format_map(values).strip()

    def acknowledge(self, session: str, now: float) -> None:
        """The operator has seen it: back to watching, with a cool-down."""
        state = self.state(session)
        until = now + self.settings.cooldown_seconds
        for key in state.occurrences:
            state.acked_until[key] = until
            latest = state.occurrences.latest(key)
            state.acked_count[key] = latest[0] if latest else 0
        _bound(state.acked_until)
        _bound(state.acked_count)
        state.quiet_until = until
        state.active.clear()
        last = state.last  # still the detection an operator may mark a false positive
        state.clear()
        state.last = last

    def recover(self, session: str, steps: int) -> None:
        """The agent stopped looping after a nudge: back to watching (the
        ladder remembers its patterns, so a relapse climbs on)."""
        state = self.sessions.get(session)
        if state is None:
            return
        state.active.clear()
        state.clear()
        state.reason = f"recovered after a nudge: {steps} steps without a warning"

    def mark_false_positive(self, detection: Detection) -> None:
        """That pattern is no longer flagged in that session."""
        state = self.state(detection.session)
        key = pattern_key(detection.detector, detection.pattern)
        if key not in state.false_positives:
            state.false_positives[key] = None
            self.false_positive_count += 1
        state.occurrences.pop(key)
        state.active.pop(key, None)
        if state.last is not None and pattern_key(state.last.detector, state.last.pattern) == key:
            # Fall back to the worst pattern still standing (latest first on ties).
            standing = sorted(state.active.values(), key=lambda entry: entry[0])
            if standing:
                worst = _unpack(*standing[-1])
                worst.nudge = self.render_nudge(worst)
                state.show(worst)
            else:
                state.clear()

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


#: What a seeded session's patterns had climbed: ``(detector, pattern, rungs, latest count)``.
Rungs = Iterable[tuple[str, str, int, int]]


def seed_escalation(
    state: SessionEscalation,
    ladder: tuple[Level, ...],
    last: Detection | None,
    rungs: Rungs = (),
    reason: str = "",
) -> None:
    """Put back the escalation of a session an earlier run recorded (the hub seeds
    it from the store): ``last`` set its level (``None``: watching, saying
    ``reason``); ``rungs`` are ``(detector, pattern, rungs climbed, latest count)``.
    No position is kept (seqs restart with the engine), so the next detection of
    such a pattern continues its loop (:func:`continues`), one rung up, instead of
    starting again at the first."""
    for detector, pattern, climbed, count in rungs:
        key = pattern_key(detector, pattern)
        state.occurrences.pop(key)
        for _ in range(min(max(climbed, 0), len(ladder))):
            state.occurrences.bump(key, count, 0)
    if last is not None and last.level > Level.NONE:
        state.show(last)
    elif reason:
        state.reason = reason


def settings_for(settings: EscalationSettings, auto_kill: bool) -> EscalationSettings:
    """``settings`` with a ``terminate`` nudge that says what will happen: with
    ``auto_kill`` the default one says the session is being stopped (a nudge the
    config set is kept as it is)."""
    if not auto_kill or settings.nudges.get("terminate") != DEFAULT_NUDGES["terminate"]:
        return settings
    return replace(settings, nudges={**settings.nudges, "terminate": AUTO_KILL_NUDGE})


def _without_evidence(d: Detection) -> Detection:
    """A copy of ``d`` with no evidence (``dataclasses.replace`` costs ten
    times as much, and this runs for most detections)."""
    return Detection(
        d.detector,
        d.level,
        d.score,
        d.message,
        d.pattern,
        d.count,
        d.tool,
        d.summary,
        d.advice,
        (),
        d.session,
        d.source,
        d.line,
        d.ts,
        d.seq,
        d.proposed,
        d.nudge,
        d.suppressed,
    )


def _pack(detection: Detection) -> bytes:
    """A standing detection but its level, evidence and nudge, as one bytes
    object (a Detection with its strings, floats and ints costs three times
    as much, and a session keeps ``MAX_STANDING`` of them)."""
    d = detection
    return orjson.dumps(
        [
            d.detector,
            d.score,
            d.message,
            d.pattern,
            d.count,
            d.tool,
            d.summary,
            d.advice,
            d.session,
            d.source,
            d.line,
            d.ts,
            d.seq,
            int(d.proposed),
            d.suppressed,
        ]
    )


def _unpack(level: Level, packed: bytes) -> Detection:
    """The detection :func:`_pack` packed (without evidence; nudge to render)."""
    (
        detector,
        score,
        message,
        pattern,
        count,
        tool,
        summary,
        advice,
        session,
        source,
        line,
        ts,
        seq,
        proposed,
        suppressed,
    ) = orjson.loads(packed)
    return Detection(
        detector,
        level,
        score,
        message,
        pattern,
        count,
        tool,
        summary,
        advice,
        (),
        session,
        source,
        line,
        ts,
        seq,
        Level(proposed),
        "",
        suppressed,
    )
