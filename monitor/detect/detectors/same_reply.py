"""Same reply: the agent answers every message the same way.

The person sends one message after another -- a listing pasted one path per
message, "continue", a new detail -- and each time the model replies with the
same paragraph ("I see you've shown me the X path... please share the actual
contents...") and does nothing else. ``output_similarity`` compares replies
within one stretch of the agent's own work and starts over at every user
turn (a person's new message is new input); here the new input is what does
not change the answer.

A *reply* is the first substantial assistant text (``min_chars``, 40) after a
user message, with no tool call between that message and the reply. It
*repeats* the reply before it when the two are near-copies (rapidfuzz
``fuzz.ratio`` of the squashed texts at least ``similarity``, 0.90), the
agent made no tool call since that reply, and the person's message differs
from the one that reply answered. ``threshold`` (4) replies in a row,
each a repeat of the one before, warn.

Left alone: the same answer to the same question asked again (it is still
the answer), replies that differ (a conversation), short replies ("Done.",
"You're welcome"), replies with work between them (tool calls: the agent did
something, and its result can differ), a reply said twice or three times, and
the agent repeating itself without a person's message between
(``output_similarity``'s and ``monologue``'s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import clip, squashed

ADVICE = (
    "You have given the same reply to each of the last messages. Read what the person is "
    "sending and answer it differently, or say plainly what you need and how to provide it."
)


@dataclass(frozen=True)
class SameReplySettings(DetectorSettings):
    threshold: int = 4  # replies in a row, each a near-copy of the one before, that warn
    similarity: float = 0.90  # fuzz.ratio (0..1) from which a reply repeats the one before
    min_chars: int = 40  # shorter replies are not judged (and end the streak)


class SameReply(Detector[SameReplySettings]):
    name = "same_reply"
    title = "Same reply"
    Settings = SameReplySettings
    presets = {"conservative": {"threshold": 6}, "aggressive": {"threshold": 3}}
    resets_on_user_turn = False  # it counts across the person's messages
    kinds = frozenset({Kind.MESSAGE, Kind.TOOL_CALL})

    def __init__(self, settings: SameReplySettings | None = None):
        super().__init__(settings)
        self.reset()

    def reset(self) -> None:
        self.last: str | None = None  # the last reply's squashed text
        self.replies: list[EventRef] = []  # the streak's replies (the last 12)
        self.count = 0  # replies in the streak
        self.asked = False  # a user message since the last reply, not yet answered
        self.message = ""  # what the person said since the last reply (squashed, clipped)
        self.answered = ""  # what the person said before the last reply
        self.worked = False  # a tool call since the last reply

    def window(self) -> Sequence[Event | EventRef]:
        return list(self.replies)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is Kind.TOOL_CALL:
            self.worked, self.asked = True, False
            return None
        if event.role == "user":
            if not self.asked:
                self.message = ""
            self.asked = True
            self.message = clip(self.message + " " + squashed(clip(event.content or "")))
            return None
        if event.role != "assistant" or not self.asked:
            return None  # a reply's later records, or talk with no message to answer
        text = squashed(clip(event.content or ""))
        if len(text) < self.settings.min_chars:
            return None  # (a short first record: the reply may come in the next)
        self.asked = False
        # The same answer to the same question is an answer, not a loop.
        new_message = self.message.strip() != self.answered.strip()
        repeat = self.last is not None and not self.worked and new_message and self._close(text, self.last)
        self.last, self.worked, self.answered = text, False, self.message
        if not repeat:
            self.replies, self.count = [ref(event)], 1
            return None
        self.replies.append(ref(event))
        if len(self.replies) > 12:
            del self.replies[0]
        self.count += 1
        count = self.count
        view.note_similarity(self.name, min(1.0, count / max(1, self.settings.threshold)))
        if count < self.settings.threshold:
            return None
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (self.settings.threshold + 2)),
                message=f"the same reply to {count} messages in a row, nothing done in between",
                pattern="same_reply",
                count=count,
                summary=f"gave the same reply to {count} messages in a row",
                advice=ADVICE,
                evidence=evidence(self.replies),
            )
        ]

    def _close(self, text: str, last: str) -> bool:
        cutoff = self.settings.similarity
        total = len(text) + len(last)
        if 2 * min(len(text), len(last)) / total < cutoff:
            return False  # the lengths alone cap the ratio below the cut-off
        return fuzz.ratio(text, last, score_cutoff=cutoff * 100) >= cutoff * 100
