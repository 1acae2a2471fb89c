"""Exact repeat: the same tool call again and again within a short window.

A call is keyed by its tool name and canonical arguments (sorted keys, white
space normalized, call ids and timestamps dropped).  The 3rd occurrence in the
last 10 calls warns, but only while the repeats keep getting the same result:
a poll whose output moves is progress, not a loop.  The check runs when the
call is made, so a stuck agent is flagged before its next result arrives.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, register
from monitor.detect.calls import CallHistory, CallRecord
from monitor.events import Event, Kind, Level
from monitor.text import call_key


@dataclass(frozen=True)
class ExactRepeatSettings(DetectorSettings):
    window: int = 10  # the last N tool calls
    threshold: int = 3  # warn at the Nth identical call


@register
class ExactRepeat(Detector):
    name = "exact_repeat"
    title = "Exact repeat"
    Settings = ExactRepeatSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    presets = {
        "conservative": {"window": 15, "threshold": 4},
        "aggressive": {"window": 10, "threshold": 2},
    }

    def __init__(self, settings: ExactRepeatSettings | None = None):
        super().__init__(settings)
        self.calls = CallHistory(self.settings.window, call_key)

    def reset(self) -> None:
        self.calls.clear()

    def window(self) -> list[Event]:
        return self.calls.events()

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        kind = event.kind
        if kind is Kind.TOOL_RESULT:
            self.calls.add_result(event)
            return None
        if kind is not Kind.TOOL_CALL or view.exempt(event.tool):
            return None

        key = call_key(event)
        history = self.calls.records
        for record in history:
            if record.key == key:
                break
        else:  # not in the window, the common case: nothing repeats
            history.append(CallRecord(key, event))
            return None
        records = list(history)
        positions = [i for i, record in enumerate(records) if record.key == key]
        history.append(CallRecord(key, event))
        view.note_similarity(self.name, 1.0)

        # Count back from the latest repeat while outcomes stay identical and
        # nothing in between moved: a different outcome, or a poll between
        # the repeats whose output changed (sleep → status → sleep → status),
        # means the repeats are getting somewhere.
        latest = positions[-1]
        streak = [records[latest]]
        reference = records[latest]
        if _moved_between(records, latest + 1, len(records)):
            streak = []
        for later, earlier_at in zip(reversed(positions), reversed(positions[:-1])):
            if not streak:
                break
            earlier = records[earlier_at]
            if not earlier.same_outcome(reference) or _moved_between(records, earlier_at + 1, later):
                break
            if reference.result_event is None:
                reference = earlier
            streak.append(earlier)
        if not streak:
            return None
        count = len(streak) + 1
        threshold = view.threshold(event.tool, self.settings.threshold)
        if count < threshold:
            return None
        involved = [r.event for r in reversed(streak)] + [event]
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (threshold + 2)),
                message=(
                    f"{event.tool} called {count} times with identical arguments "
                    f"in the last {len(self.calls)} calls, with the same result"
                ),
                pattern=f"call:{key[:200]}",
                count=count,
                tool=event.tool,
                summary=f"called {event.tool} with the same arguments {count} times",
                advice="Its result has not changed; repeating it will not change it.",
                evidence=evidence(involved),
            )
        ]


def _moved_between(records: list[CallRecord], start: int, stop: int) -> bool:
    """True when a call in ``records[start:stop]`` repeated an earlier call of
    the window and got a different result: something being polled moved."""
    for index in range(start, stop):
        record = records[index]
        if record.result_event is None:
            continue
        for earlier in records[:index]:
            if earlier.key == record.key and earlier.result_event is not None:
                if not record.same_outcome(earlier):
                    return True
    return False
