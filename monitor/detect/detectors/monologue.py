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
A reply whose calls the log does not record (``meta["calls_unrecorded"]``: a
Vorflux export whose replies record no requests, where dispatching subagents
leaves no trace) is no evidence of a reply without a tool call: it neither
counts nor resets.  A reply the harness resumed after acting on its own
(``meta["resumed"]``: a Vorflux harness running its end-of-turn hooks or
reviewing the reply) answers the harness: a finished agent restating its
answer once or twice when asked again is wrapping up, so a streak holding
such a reply warns at ``resumed_threshold`` (4) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.analysis.outcomes import REJECTED, reply_outcome
from monitor.detect.analysis.turns import Turn, marked
from monitor.detect.base import Detection, SessionView, TurnDetector, TurnSettings, evidence, ref
from monitor.events import Event, EventRef, Level


@dataclass(frozen=True)
class MonologueSettings(TurnSettings):
    threshold: int = 3  # text-only turns in a row that warn
    resumed_threshold: int = 4  # the same, when the harness resumed one of them
    empty_threshold: int = 3  # empty replies in a row that warn
    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


class Monologue(TurnDetector[MonologueSettings]):
    name = "monologue"
    title = "Monologue"
    Settings = MonologueSettings
    presets = {
        "conservative": {"threshold": 4, "resumed_threshold": 5, "empty_threshold": 4},
        "aggressive": {"threshold": 2, "resumed_threshold": 3, "empty_threshold": 2},
    }

    def __init__(self, settings: MonologueSettings | None = None):
        super().__init__(settings)
        self.talking = 0  # text-only turns in a row
        self.silent = 0  # empty replies in a row
        #: Of the text-only turns in a row: how many the harness answered (no user
        #: turn, but not silence either), how many it refused, and its latest refusal.
        self.answered = 0
        self.refused = 0
        self.refusal = ""
        self.resumed = False  # whether the harness resumed a turn of the streak
        # The turns' first events (the last 12): a list, not a deque (an empty
        # deque still holds a block of 64 slots).
        self.recent: list[EventRef] = []

    def reset(self) -> None:
        self.talking = 0
        self.silent = 0
        self._forget_answers()
        self.recent.clear()

    def _forget_answers(self) -> None:
        self.answered = self.refused = 0
        self.refusal = ""
        self.resumed = False

    def _note_answer(self, turn: Turn) -> None:
        """What the harness answered the turn before with, if it did (mini-swe-agent's format errors)."""
        heard = turn.after
        if heard is None or not self.talking:  # (what came before the streak is not part of it)
            return
        self.answered += 1
        outcome = reply_outcome(heard)
        if outcome is not None and outcome.kind == REJECTED:
            self.refused += 1
            self.refusal = outcome.shown

    def window(self) -> Sequence[Event | EventRef]:
        return list(self.recent)

    def judge(self, turn: Turn, view: SessionView) -> list[Detection] | None:
        if turn.calls or turn.open_calls:  # not turn.text_only
            if self.talking:
                self.talking = 0
                self.silent = 0
                self._forget_answers()
                self.recent.clear()
            return None
        if marked(turn, "calls_unrecorded"):
            return None  # it may have acted: the log cannot say (never judged blind)
        s = self.settings
        self.resumed = self.resumed or marked(turn, "resumed")
        self._note_answer(turn)
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
        threshold = s.resumed_threshold if self.resumed else s.threshold
        if threshold and self.talking >= threshold:
            n = self.talking
            message, summary, advice = self._words(n)
            return [
                Detection(
                    detector=self.name,
                    level=Level.WARN,
                    score=min(1.0, n / (threshold + 2)),
                    message=message,
                    pattern="monologue:text_only",
                    count=n,
                    summary=summary,
                    advice=advice,
                    evidence=evidence(recent[-n:]),
                )
            ]
        return None

    def _words(self, n: int) -> tuple[str, str, str]:
        """Message, summary and advice for ``n`` text-only turns in a row, saying
        what happened between them: nothing, the harness answering, or its refusals."""
        if self.refused >= n - 1:  # the harness refused each one (a format error each time)
            quoted = self.refusal[:100]
            return (
                f"{n} replies in a row without a tool call the harness would run, each refused: “{quoted}”",
                f"sent {n} replies in a row that the harness refused (“{quoted}”)",
                "Read the harness's message and answer exactly in the format it asks for.",
            )
        if self.answered >= n - 1:
            return (
                f"{n} assistant turns in a row without a tool call, the harness answering each",
                f"written {n} replies in a row without using a tool",
                "Stop summarising: pick the next concrete task and start on it with your tools now.",
            )
        return (
            f"{n} assistant turns in a row without a tool call or a user turn",
            f"written {n} replies in a row without using a tool",
            "Stop summarising: pick the next concrete task and start on it with your tools now.",
        )
