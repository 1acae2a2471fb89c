"""Cycles: A-B-A-B, A-B-C-A-B-C… — the same short sequence of calls, again.

The last calls are checked for a repeating block of period 2 to 5 with at least
two distinct calls in it, repeated ``min_repetitions`` times back to back
(design note 001).  Two occurrences of a call only match when their outcomes
match too, so an edit → test → edit → test rhythm whose test output moves is
progress, not a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.analysis.calls import CallRecord, call_record, events, made_record, made_together
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence
from monitor.events import Event, Kind, Level

_TOOL_CALL, _TOOL_RESULT = Kind.TOOL_CALL, Kind.TOOL_RESULT


@dataclass(frozen=True)
class CycleSettings(DetectorSettings):
    window: int = 10
    min_period: int = 2
    max_period: int = 5
    min_repetitions: int = 2


def _same(a: CallRecord, b: CallRecord) -> bool:
    """The same call with the same outcome, and asked for again after the first:
    two agents asking for one read at once repeat nothing (:func:`made_together`)."""
    return a.same_call(b) and a.same_outcome(b) and not made_together(b, a)


class Cycle(Detector[CycleSettings]):
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
        #: The last calls (what a detection cites), the oldest first.
        self.calls: list[CallRecord] = []
        self._size = max(s.window, s.max_period * s.min_repetitions)
        #: The hashes of the last ``max_period`` calls (``None`` until made): a
        #: call that is none of them repeats nothing at any period.
        self._recent: list[int | None] = [None] * s.max_period
        # For each period p: how many calls in a row matched the call p before.
        self._runs = dict.fromkeys(range(s.min_period, s.max_period + 1), 0)
        #: Some run is non-zero (lets a call that repeats nothing skip the loop).
        self._running = False

    def reset(self) -> None:
        self.calls.clear()
        self._recent = [None] * len(self._recent)
        self._runs = dict.fromkeys(self._runs, 0)
        self._running = False

    def window(self) -> list[Event]:
        return events(self.calls)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is _TOOL_RESULT:
            # Only a run in progress has a result to confirm or break.
            return self._result(event, view) if self._running else None
        if event.kind is not _TOOL_CALL or (view.tool_overrides and view.exempt(event.tool)):
            return None
        return self._call(call_record(event), view)

    def _result(self, event: Event, view: SessionView) -> list[Detection] | None:
        """The latest call's result arrived: confirm or break its cycles."""
        if not self._running or event.call is None:
            return None  # no run to confirm or break
        record = made_record(event.call)  # its result attached by the engine
        history = self.calls
        if record is None or not history or record is not history[-1]:
            return None
        pending = False
        for period, run in self._runs.items():
            if run:
                if not _same(record, history[-1 - period]):
                    self._runs[period] = 0
                elif run >= period:
                    pending = True
        self._running = any(self._runs.values())
        return self._check(list(history), view, confirmed=True) if pending else None

    def _call(self, last: CallRecord, view: SessionView) -> list[Detection] | None:
        """A call: extend or break the run at each period."""
        history = self.calls
        history.append(last)
        if len(history) > self._size:
            del history[0]
        recent = self._recent
        repeats = last.hash in recent
        recent.append(last.hash)
        del recent[0]
        if not repeats:
            # None of the last max_period calls: every run breaks.
            if self._running:
                self._runs = dict.fromkeys(self._runs, 0)
                self._running = False
            return None
        n = len(history)
        pending = running = False
        for period, run in self._runs.items():
            if n > period and _same(last, history[-1 - period]):
                self._runs[period] = run = run + 1
                running = True
                pending = pending or run >= period
            elif run:
                self._runs[period] = 0
        self._running = running
        # _check finds nothing (and notes nothing) unless a run spans its period.
        return self._check(list(history), view, confirmed=False) if pending else None

    def _check(self, records: list[CallRecord], view: SessionView, confirmed: bool) -> list[Detection] | None:
        s = self.settings
        n = len(records)
        for period, run in self._runs.items():
            if run < period:
                continue
            block = records[-period:]
            if len({r.hash for r in block}) < 2:
                continue  # a single call repeated is exact_repeat's job
            if any(r.waited for r in block):
                continue  # sleep → poll → sleep → poll: waiting (waiting.py)
            reps = 1 + run // period
            view.note_similarity(self.name, min(1.0, reps / s.min_repetitions))
            # Report when a full repetition completes, not on every call.
            if reps < s.min_repetitions or run % period != 0:
                return None
            # Wait for the closing call's result unless results are not logged.
            if not confirmed and records[-1 - period].done:
                return None
            names = " → ".join(r.tool or "?" for r in block)
            involved = records[-min(n, run + period) :]
            return [
                Detection(
                    detector=self.name,
                    level=Level.WARN,
                    score=min(1.0, reps / (s.min_repetitions + 2)),
                    message=f"cycle of {period} calls ({names}) repeated {reps} times with the same results",
                    pattern="cycle:" + "→".join(sorted(r.key[:80] for r in block)),
                    count=reps,
                    tool=block[-1].tool,
                    summary=f"repeated the same sequence of {period} calls ({names}) {reps} times",
                    advice="Each pass gives the same results. Break the cycle: change the approach, "
                    "not the order of the same steps.",
                    evidence=evidence(r.ref for r in involved),
                )
            ]
        return None
