"""Cycles: A-B-A-B, A-B-C-A-B-C… — the same short sequence of calls, again.

The last calls are checked for a repeating block of period 2 to 5 with at least
two distinct calls in it, repeated ``min_repetitions`` times back to back
(design note 001).  Two occurrences of a call only match when their outcomes
match too, so an edit → test → edit → test rhythm whose test output moves is
progress, not a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, register
from monitor.detect.calls import CallHistory, CallRecord
from monitor.events import Event, Kind, Level
from monitor.text import call_key


@dataclass(frozen=True)
class CycleSettings(DetectorSettings):
    window: int = 10
    min_period: int = 2
    max_period: int = 5
    min_repetitions: int = 2


def _same(a: CallRecord, b: CallRecord) -> bool:
    return a.key == b.key and a.same_outcome(b)


@register
class Cycle(Detector):
    name = "cycle"
    title = "Cycle"
    Settings = CycleSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    presets = {
        "conservative": {"window": 15, "min_period": 3, "min_repetitions": 3},
        "aggressive": {"max_period": 4},
    }

    def __init__(self, settings: CycleSettings | None = None):
        super().__init__(settings)
        s = self.settings
        self.calls = CallHistory(max(s.window, s.max_period * s.min_repetitions), call_key)
        # For each period p: how many calls in a row matched the call p before.
        self._runs = dict.fromkeys(range(s.min_period, s.max_period + 1), 0)

    def reset(self) -> None:
        self.calls.clear()
        self._runs = dict.fromkeys(self._runs, 0)

    def window(self) -> list[Event]:
        return self.calls.events()

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        kind = event.kind
        history = self.calls.records
        runs = self._runs
        if kind is Kind.TOOL_RESULT:
            record = self.calls.add_result(event)
            if record is None or record is not history[-1]:
                return None
            # The latest call's result arrived: confirm or break its cycles.
            pending = False
            for period, run in runs.items():
                if run:
                    if not _same(record, history[-1 - period]):
                        runs[period] = 0
                    elif run >= period:
                        pending = True
            return self._check(list(history), view, confirmed=True) if pending else None
        if kind is not Kind.TOOL_CALL or view.exempt(event.tool):
            return None
        last = CallRecord(call_key(event), event)
        history.append(last)  # CallHistory.add_call, without recomputing the key
        n = len(history)
        key = last.key
        pending = False
        for period, run in runs.items():
            if n > period:
                earlier = history[-1 - period]
                # _same(), with the cheap key test first: most calls repeat nothing
                if earlier.key == key and last.same_outcome(earlier):
                    runs[period] = run = run + 1
                    if run >= period:
                        pending = True
                    continue
            if run:
                runs[period] = 0
        # _check finds nothing (and notes nothing) unless a run spans its period.
        return self._check(list(history), view, confirmed=False) if pending else None

    def _check(self, records: list[CallRecord], view: SessionView, confirmed: bool) -> list[Detection] | None:
        s = self.settings
        n = len(records)
        for period, run in self._runs.items():
            if run < period:
                continue
            block = records[-period:]
            if len({r.key for r in block}) < 2:
                continue  # a single call repeated is exact_repeat's job
            reps = 1 + run // period
            view.note_similarity(self.name, min(1.0, reps / s.min_repetitions))
            # Report when a full repetition completes, not on every call.
            if reps < s.min_repetitions or run % period != 0:
                return None
            # Wait for the closing call's result unless results are not logged.
            if not confirmed and records[-1 - period].result is not None:
                return None
            names = " → ".join(r.event.tool or "?" for r in block)
            involved = records[-min(n, run + period):]
            return [
                Detection(
                    detector=self.name,
                    level=Level.WARN,
                    score=min(1.0, reps / (s.min_repetitions + 2)),
                    message=f"cycle of {period} calls ({names}) repeated {reps} times with the same results",
                    pattern="cycle:" + "→".join(sorted(r.key[:80] for r in block)),
                    count=reps,
                    tool=block[-1].event.tool,
                    summary=f"repeated the same sequence of {period} calls ({names}) {reps} times",
                    advice="Each pass gives the same results. Break the cycle: change the approach, "
                           "not the order of the same steps.",
                    evidence=evidence(r.event for r in involved),
                )
            ]
        return None
