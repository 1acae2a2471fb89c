"""Waiting is not looping: polls made after an explicit wait, and their budget.

``sleep 60`` → ``gh run view`` showing "in_progress", six times, is an agent
waiting for CI, not a loop (issue 13).  A tool call is *waited* when it comes
after an explicit wait: a ``sleep`` in its own command, a ``timeout``/``wait``
argument of a tool that is not a shell (a shell tool's ``timeout`` caps the
command, as Claude Code's Bash does), a call before it that did nothing but wait (``sleep 60``), or a real
gap of :data:`WAIT_GAP` seconds or more since the same call was made just
before it (the same poll again, nothing in between, 20 s later).  The engine marks such calls
(:mod:`monitor.detect.analysis.waits`) before the detectors see them.

The repeat detectors (``exact_repeat``, ``fingerprint``, ``cycle``,
``turn_similarity``) do not count a waited call as a repeat, nor a call that
only waits.  Instead the ``waiting`` detector counts the time spent waiting
on the same unchanged answer: the same call again, after a wait, with the
same result, counted from the first poll after a wait.  It is a ``notice``
when half of the budget is spent and a ``warn`` when all of it is (default 30 minutes; per tool with
``[tools.<name>] wait_budget_seconds``).  An answer that changes starts the
count over.  Identical polls back to back, with no wait, are still a loop
for the repeat detectors.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.analysis.calls import CallRecord, call_record
from monitor.detect.analysis.waits import wait_only, waited
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence
from monitor.events import Event, Kind, Level


@dataclass(frozen=True)
class WaitingSettings(DetectorSettings):
    budget_seconds: float = 1800.0  # waiting on the same unchanged answer: notice at half, warn when spent


class Waiting(Detector[WaitingSettings]):
    name = "waiting"
    title = "Waiting"
    Settings = WaitingSettings
    kinds = frozenset({Kind.TOOL_RESULT})
    presets = {"conservative": {"budget_seconds": 3600.0}, "aggressive": {"budget_seconds": 900.0}}

    def __init__(self, settings: WaitingSettings | None = None):
        super().__init__(settings)
        self.reset()

    def reset(self) -> None:
        self.poll: CallRecord | None = None  # the poll being waited on
        self.spent = 0.0  # seconds waited on its unchanged answer
        self.polls: list[CallRecord] = []  # its repeats (the first 6, as evidence)
        self.count = 0  # its repeats
        self.stage = 0  # 0: nothing said, 1: notice given, n >= 2: warned for n - 1 budgets

    def window(self) -> list[Event]:
        return []

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        # Runs for every result: the common case (no wait) is a few dict reads.
        call = event.call
        if call is None:
            return None
        seconds = waited(call)
        if not seconds:
            if self.poll is not None:
                self.reset()  # no wait: not polling (and nothing kept meanwhile)
            return None
        if wait_only(call) or view.exempt(call.tool):
            return None
        record = call_record(call)
        poll = self.poll
        if poll is None or not record.same_call(poll) or not record.same_outcome(poll):
            # A first poll after a wait, or the answer moved: a new poll to wait on.
            self.poll, self.spent, self.polls, self.stage, self.count = record, 0.0, [record], 0, 1
            return None
        self.spent += seconds
        self.count += 1
        if len(self.polls) < 6:
            self.polls.append(record)
        override = view.tool_overrides.get(call.tool or "") if view.tool_overrides else None
        budget = getattr(override, "wait_budget_seconds", None) or self.settings.budget_seconds
        if self.spent >= budget * max(1, self.stage):
            level, self.stage = Level.WARN, max(2, self.stage + 1)
        elif self.stage == 0 and self.spent >= budget / 2:
            level, self.stage = Level.NOTICE, 1
        else:
            return None
        minutes = self.spent / 60.0
        return [
            Detection(
                detector=self.name,
                level=level,
                score=min(1.0, self.spent / budget),
                message=(
                    f"{self.count} polls of {call.tool} with the same answer after "
                    f"{minutes:.0f} min of waiting (budget {budget / 60.0:.0f} min)"
                ),
                pattern=f"waiting:{record.key}",
                count=self.count,
                tool=call.tool,
                summary=f"waited {minutes:.0f} minutes on {call.tool} without its answer changing",
                advice=(
                    "The answer has not changed in a long while: check whether what you are "
                    "waiting for is stuck, or report and stop waiting."
                ),
                evidence=evidence(r.ref for r in self.polls),
            )
        ]
