"""Monologue: the agent keeps talking instead of working (the "summary loop").

Design note 003: consecutive text-only turns -- responses that call no tool --
mean the agent is summarising or planning instead of acting.  Three in a row,
with no tool call and no user turn between them, warn; so do three empty or
white-space-only replies in a row (an agent that has stopped saying anything).
Each further such turn is reported again, with the count rising.

A *turn* is one model response (:mod:`monitor.detect.analysis.turns`), not one record:
Claude Code writes a single response as several records (a white-space text
block, thinking, text, each tool use), and streaming agents send chunks, so
records of one response are grouped before counting.  Any tool call resets
both counts; a user turn resets everything (the engine calls :meth:`reset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.analysis.turns import Turn
from monitor.detect.base import Detection, SessionView, TurnDetector, TurnSettings, evidence, ref
from monitor.events import Event, EventRef, Level


@dataclass(frozen=True)
class MonologueSettings(TurnSettings):
    threshold: int = 3  # text-only turns in a row that warn
    empty_threshold: int = 3  # empty replies in a row that warn
    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


class Monologue(TurnDetector[MonologueSettings]):
    name = "monologue"
    title = "Monologue"
    Settings = MonologueSettings
    presets = {
        "conservative": {"threshold": 4, "empty_threshold": 4},
        "aggressive": {"threshold": 2, "empty_threshold": 2},
    }

    def __init__(self, settings: MonologueSettings | None = None):
        super().__init__(settings)
        self.talking = 0  # text-only turns in a row
        self.silent = 0  # empty replies in a row
        # The turns' first events (the last 12): a list, not a deque (an empty
        # deque still holds a block of 64 slots).
        self.recent: list[EventRef] = []

    def reset(self) -> None:
        self.talking = 0
        self.silent = 0
        self.recent.clear()

    def window(self) -> Sequence[Event | EventRef]:
        return list(self.recent)

    def judge(self, turn: Turn, view: SessionView) -> list[Detection] | None:
        if turn.calls or turn.open_calls:  # not turn.text_only
            if self.talking:
                self.talking = 0
                self.silent = 0
                self.recent.clear()
            return None
        s = self.settings
        self.talking += 1
        self.silent = 0 if turn.has_text else self.silent + 1
        recent = self.recent
        recent.append(ref(turn.first))
        if len(recent) > 12:
            del recent[0]
        if s.empty_threshold and self.silent >= s.empty_threshold:
            n = self.silent
            return [
                Detection(
                    detector=self.name,
                    level=Level.WARN,
                    score=min(1.0, n / (s.empty_threshold + 2)),
                    message=f"{n} empty replies in a row",
                    pattern="monologue:empty",
                    count=n,
                    summary=f"sent {n} empty replies in a row",
                    advice="Say what you are doing or what blocks you, or call a tool.",
                    evidence=evidence(recent[-n:]),
                )
            ]
        if s.threshold and self.talking >= s.threshold:
            n = self.talking
            return [
                Detection(
                    detector=self.name,
                    level=Level.WARN,
                    score=min(1.0, n / (s.threshold + 2)),
                    message=f"{n} assistant turns in a row without a tool call or a user turn",
                    pattern="monologue:text_only",
                    count=n,
                    summary=f"written {n} replies in a row without using a tool",
                    advice=(
                        "Stop summarising: pick the next concrete task and start on it with your tools now."
                    ),
                    evidence=evidence(recent[-n:]),
                )
            ]
        return None
