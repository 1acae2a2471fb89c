"""Compaction loop: the agent compacts its context again and again with no work between.

A ``compaction`` event (the agent compacted or trimmed its context) followed by
another with no tool call in between means compacting did not free enough room
to do anything: the agent is spinning on its own context.  The 2nd compaction
in a row without work warns, and each further one climbs the ladder.

User turns do not reset the streak: harnesses often continue a compacted
session with a user-role message ("This session is being continued…"), which
is not work either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import COMPACTION, TOOL_CALL, Event, EventRef, Kind, Level

ADVICE = (
    "Compacting again will not free enough context. Write down the essential state "
    "(what is done, what is next) in a file, finish or hand off the current step with "
    "fewer, smaller tool outputs, or ask the user to start a fresh session."
)


@dataclass(frozen=True)
class CompactionSettings(DetectorSettings):
    threshold: int = 2  # warn at the Nth compaction in a row without work
    min_calls: int = 1  # tool calls between two compactions that count as work


class CompactionLoop(Detector[CompactionSettings]):
    name = "compaction"
    title = "Compaction loop"
    Settings = CompactionSettings
    presets = {"conservative": {"threshold": 3}, "aggressive": {"threshold": 2, "min_calls": 2}}
    resets_on_user_turn = False
    kinds = frozenset({Kind.TOOL_CALL, Kind.COMPACTION})

    def __init__(self, settings: CompactionSettings | None = None):
        super().__init__(settings)
        self.reset()

    def reset(self) -> None:
        self.count = 0  # compactions in the current run without work
        self.calls_since = 0  # tool calls since the last compaction
        # The compactions (the last 8): a list, not a deque (an empty deque
        # still holds a block of 64 slots).
        self.events: list[EventRef] = []

    def window(self) -> Sequence[Event | EventRef]:
        return list(self.events)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        kind = event.kind
        if kind is TOOL_CALL:
            self.calls_since += 1
            return None
        if kind is not COMPACTION:
            return None
        if self.count and self.calls_since < self.settings.min_calls:
            self.count += 1
        else:
            self.count = 1
            self.events.clear()
        self.calls_since = 0
        events = self.events
        events.append(ref(event))
        if len(events) > 8:
            del events[0]
        threshold = max(2, self.settings.threshold)
        view.note_similarity(self.name, min(1.0, (self.count - 1) / (threshold - 1)))
        if self.count < threshold:
            return None
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, self.count / (threshold + 2)),
                message=f"{self.count} compactions in a row with no tool call in between",
                pattern="compaction",
                count=self.count,
                summary=f"compacted your context {self.count} times in a row without doing any work in between",
                advice=ADVICE,
                evidence=evidence(self.events),
            )
        ]
