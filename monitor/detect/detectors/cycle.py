"""Cycles: A-B-A-B, A-B-C-A-B-C… — the same short sequence of calls, again.

The last calls are checked for a repeating block of period 2 to 5 with at least
two distinct calls in it, repeated ``min_repetitions`` times back to back
(design note 001).  Two occurrences of a call only match when their outcomes
match too, so an edit → test → edit → test rhythm whose test output moves is
progress, not a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.analysis.calls import CallRecord, events, new_record
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
    return a.same_call(b) and a.same_outcome(b)


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
        # Runs for every call and result of every session: written flat.
        kind = event.kind
        if kind is _TOOL_RESULT:
            if not self._running:
                return None  # no run to confirm or break
            call = event.call
            if call is None:
                return None
            record = call.cache.get("record")  # its result attached by the engine
            if record is None or record.seq != call.seq:
                return None
            history = self.calls
            if not history or record is not history[-1]:
                return None
            # The latest call's result arrived: confirm or break its cycles.
            runs = self._runs
            pending = False
            for period, run in runs.items():
                if run:
                    if not _same(record, history[-1 - period]):
                        runs[period] = 0
                    elif run >= period:
                        pending = True
            self._running = any(runs.values())
            return self._check(list(history), view, confirmed=True) if pending else None
        if kind is not _TOOL_CALL or (view.tool_overrides and view.exempt(event.tool)):
            return None
        cache = event.cache
        last = cache.get("record")
        if last is None or last.seq != event.seq:
            last = cache["record"] = new_record(event)  # call_record(), inline
        history = self.calls
        history.append(last)
        if len(history) > self._size:
            del history[0]
        recent = self._recent
        digest = last.hash
        repeats = digest in recent
        recent.append(digest)
        del recent[0]
        if not repeats:
            # None of the last max_period calls: every run breaks.
            if self._running:
                self._runs = dict.fromkeys(self._runs, 0)
                self._running = False
            return None
        runs = self._runs
        n = len(history)
        key = last.key
        pending = False
        running = False
        for period, run in runs.items():
            if n > period:
                earlier = history[-1 - period]
                # _same(), the keys compared inline: most repeats are at other distances
                if earlier.hash == digest and earlier.key == key and last.same_outcome(earlier):
                    runs[period] = run = run + 1
                    running = True
                    if run >= period:
                        pending = True
                    continue
            if run:
                runs[period] = 0
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
