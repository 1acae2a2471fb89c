"""Limits: the hard backstops of design note 000 — iterations, runtime, cost, failures.

The orchestrator of design note 000 stops an agent when *any* of these is met:
max iterations (100), max runtime (4 h), max cost ($10), max consecutive
failures (5).  Here a limit climbs the ladder like every other signal:
getting within 80 % of it is a ``notice``, reaching it a ``warn``, going on
past it (another N failures, another 10 % of the other limits) ``critical``,
and once more ``terminate`` -- an operator sees it coming before a stop.  Honest sessions can be long and expensive, so the
first three are off (0) unless configured, e.g.::

    [detectors.limits]
    max_iterations = 100          # the larger of tool calls and assistant turns
    max_runtime_seconds = 14400   # event time from the session's first event
    max_cost_usd = 10.0           # sum of usage.cost_usd

The consecutive-failure limit is on: 5 failing tool results in a row (a tool
error or a nonzero exit code, see :mod:`monitor.detect.analysis.failures`) with no
success and no user turn in between.  A failure whose call acted on what
the failure before it named and that fails in a new way moved on
(:mod:`~monitor.detect.analysis.progress`: installing the module the last
error said was missing, then meeting the next): the streak starts again at
it, because a count of failures that keep changing is no evidence of a
loop.  A retry after a wait failing the same way (a lock still held) is the
same failure, waiting.  Past ``terminate`` the detection is repeated at every further step, so
an acknowledged session is reminded while it keeps going.

The totals are whole-session: a user turn does not reset them
(``resets_on_user_turn = False``); it only breaks a failure streak.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from monitor.detect.analysis.failures import failed, no_status, tests_failed
from monitor.detect.analysis.progress import FailingForward
from monitor.detect.analysis.signatures import not_an_outcome
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level

_TOOL_CALL, _TOOL_RESULT, _MESSAGE, _USAGE = Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE, Kind.USAGE

#: The levels a limit proposes as it is reached and then passed, step by step.
CLIMB = (Level.WARN, Level.CRITICAL, Level.TERMINATE)

ADVICE = (
    "This session has reached a configured limit and will be stopped if it goes on. "
    "Summarise what is done, what remains and what blocks you."
)
FAILURE_ADVICE = (
    "Nothing has succeeded for a while. Stop, read the last errors, and explain what "
    "is failing instead of trying another variant."
)


@dataclass(frozen=True)
class LimitsSettings(DetectorSettings):
    max_iterations: int = 0  # 0 = off; design note 000: 100
    max_runtime_seconds: float = 0.0  # 0 = off; design note 000: 4 h
    max_cost_usd: float = 0.0  # 0 = off; design note 000: $10
    max_consecutive_failures: int = 5  # 0 = off
    notice_fraction: float = 0.8  # a notice when this close to a limit
    repeat_fraction: float = 0.1  # past a limit, remind every further 10 %


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


class _Limit:
    """One limit's bookkeeping: whether the notice went out, how far up the
    climb it is, and when the next step is due."""

    __slots__ = ("name", "limit", "noticed", "next_at", "rung")

    def __init__(self, name: str, limit: float):
        self.name = name
        self.limit = limit
        self.noticed = False
        self.next_at = limit
        self.rung = 0

    def check(self, value: float, settings: LimitsSettings, step: float) -> Level:
        if self.limit <= 0:
            return Level.NONE
        if value >= self.next_at:
            self.next_at = value + step
            level = CLIMB[min(self.rung, len(CLIMB) - 1)]
            self.rung += 1
            return level
        if not self.noticed and value >= self.limit * settings.notice_fraction and value < self.limit:
            self.noticed = True
            return Level.NOTICE
        return Level.NONE


class Limits(Detector[LimitsSettings]):
    name = "limits"
    title = "Limits"
    Settings = LimitsSettings
    presets = {"conservative": {"max_consecutive_failures": 8}, "aggressive": {"max_consecutive_failures": 4}}
    resets_on_user_turn = False

    def __init__(self, settings: LimitsSettings | None = None):
        super().__init__(settings)
        s = self.settings
        self.first_ts: float | None = None
        self.tool_calls = 0
        self.turns = 0
        self.cost = 0.0
        self.failures = 0
        #: The failed results in a row (their evidence), and the last one's tool.
        self.failed_events: deque[EventRef] = deque(maxlen=12)
        self.failed_tool: str | None = None
        self.forward = FailingForward()
        #: Any limit but the failure streak is on (most sessions: none is).
        self.totals = bool(s.max_iterations or s.max_runtime_seconds or s.max_cost_usd)
        self.iterations = _Limit("iterations", s.max_iterations)
        self.runtime = _Limit("runtime", s.max_runtime_seconds)
        self.spend = _Limit("cost", s.max_cost_usd)
        self.failure_limit = _Limit("failures", s.max_consecutive_failures)
        # Only the events the enabled limits need (the engine dispatches by kind):
        # by default just results (failures) and messages (a user turn breaks a streak).
        kinds = {Kind.SESSION_START}
        if s.max_consecutive_failures:
            kinds |= {Kind.TOOL_RESULT, Kind.MESSAGE}
        if s.max_iterations:
            kinds |= {Kind.TOOL_CALL, Kind.MESSAGE}
        if s.max_cost_usd:
            kinds.add(Kind.USAGE)
        self.kinds = frozenset(Kind) if s.max_runtime_seconds else frozenset(kinds)

    def reset(self) -> None:
        """An operator reset forgets the failure streak; the totals stay."""
        self.forward.clear()
        self._restart_failures()

    def _restart_failures(self) -> None:
        """A new failure streak (after a success, or at a failure that moved on)."""
        self.failures = 0
        self.failed_events.clear()
        self.failed_tool = None
        self.failure_limit = _Limit("failures", self.settings.max_consecutive_failures)

    def window(self) -> list[Event]:
        return []  # the failed results are kept as evidence references only

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        """Count the event; the detections of the limits it reaches."""
        if self.first_ts is None:
            self.first_ts = event.ts
        found: list[Detection] | None = None
        kind = event.kind
        if kind is _TOOL_RESULT:  # (by default the most of what it sees)
            if failed(event):
                found = self._failed(event)
            elif self.failures:
                self.reset()
        elif kind is _TOOL_CALL:
            self.tool_calls += 1
        elif kind is _MESSAGE:
            if event.role == "assistant":
                self.turns += 1
            elif event.role == "user" and self.failures:
                self.reset()  # the user stepped in: the failures are no longer "in a row"
        elif kind is _USAGE and event.cost_usd:
            self.cost += event.cost_usd
        if self.totals:
            found = (found or []) + self._totals(event)
        return found or None

    def _totals(self, event: Event) -> list[Detection]:
        """The iteration, runtime and cost limits' detections for this event."""
        s = self.settings
        kind = event.kind
        found: list[Detection] = []
        if s.max_iterations and (kind is _TOOL_CALL or kind is _MESSAGE):
            iterations = max(self.tool_calls, self.turns)
            level = self.iterations.check(iterations, s, max(1, round(s.max_iterations * s.repeat_fraction)))
            if level:
                state = (
                    f"{iterations} iterations ({self.tool_calls} tool calls, {self.turns} assistant turns)"
                )
                found.append(
                    self._detection(
                        level,
                        "iterations",
                        iterations,
                        s.max_iterations,
                        state,
                        f"{s.max_iterations} iterations",
                        event,
                    )
                )
        if s.max_runtime_seconds:
            runtime = event.ts - (self.first_ts or 0.0)
            level = self.runtime.check(runtime, s, max(1.0, s.max_runtime_seconds * s.repeat_fraction))
            if level:
                found.append(
                    self._detection(
                        level,
                        "runtime",
                        int(runtime),
                        s.max_runtime_seconds,
                        f"running for {_duration(runtime)}",
                        _duration(s.max_runtime_seconds),
                        event,
                    )
                )
        if s.max_cost_usd and kind is _USAGE:
            level = self.spend.check(self.cost, s, max(0.01, s.max_cost_usd * s.repeat_fraction))
            if level:
                found.append(
                    self._detection(
                        level,
                        "cost",
                        round(self.cost, 2),
                        s.max_cost_usd,
                        f"spent ${self.cost:.2f}",
                        f"${s.max_cost_usd:.2f}",
                        event,
                    )
                )
        return found

    def _failed(self, event: Event) -> list[Detection] | None:
        """Count a failed result; a detection when that reaches the limit."""
        if not_an_outcome(event) or no_status(event):
            # A call cancelled because a sibling failed (or refused by the
            # user) did not fail itself: the batch is one failure, not five.
            # A call stopped with no status and no output says nothing either.
            return None
        if tests_failed(event):
            # A test run that reported failing tests worked: five failing
            # cases run one by one are triage, not five failed calls.
            return None
        s = self.settings
        if self.forward.joins_round(event) or self.forward.waits_it_out(event):
            # One reply's parallel calls, or a retry after a wait failing the same way: one failure.
            self.failed_events.append(ref(event))
            return None
        if self.forward.moved_on(event):
            self._restart_failures()  # it dealt with the last failure and met a new one
        self.failures += 1
        self.failed_events.append(ref(event))  # the failed results are the evidence
        self.failed_tool = event.tool
        level = self.failure_limit.check(self.failures, s, max(1, s.max_consecutive_failures))
        return [self._failure_detection(level)] if level else None

    def _detection(
        self, level: Level, what: str, value: float, limit: float, state: str, limit_text: str, event: Event
    ) -> Detection:
        reached = level >= Level.WARN
        if reached:
            message = f"{what} limit reached: {state} (limit {limit_text})"
            summary = f"reached the {what} limit ({state}; limit {limit_text})"
        else:
            message = f"approaching the {what} limit: {state} (limit {limit_text})"
            summary = f"come close to the {what} limit ({state}; limit {limit_text})"
        return Detection(
            detector=self.name,
            level=level,
            score=min(1.0, value / limit) if limit else 1.0,
            message=message,
            pattern=f"limit:{what}",
            count=int(value),
            summary=summary,
            advice=ADVICE if reached else "",
            evidence=evidence([event]),
        )

    def _failure_detection(self, level: Level) -> Detection:
        limit = self.settings.max_consecutive_failures
        reached = level >= Level.WARN
        tool = self.failed_tool if self.failed_events else None
        state = f"{self.failures} consecutive failed tool calls"
        return Detection(
            detector=self.name,
            level=level,
            score=min(1.0, self.failures / limit),
            message=(
                f"failure limit reached: {state} (limit {limit})"
                if reached
                else f"approaching the failure limit: {state} (limit {limit})"
            ),
            pattern="limit:failures",
            count=self.failures,
            tool=tool,
            summary=f"had {self.failures} tool calls fail in a row",
            advice=FAILURE_ADVICE if reached else "",
            evidence=evidence(self.failed_events),
        )
