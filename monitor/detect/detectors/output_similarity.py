"""Output similarity: the agent keeps producing (nearly) the same output.

Design note 000: each assistant output is compared with the last 5 by
rapidfuzz ``fuzz.ratio``; 0.90 or more counts as a repeat.  Here an *output*
is one assistant turn (see :mod:`monitor.detect.analysis.turns`): its text, compared
once the turn is complete.

What keeps honest repetition quiet:

* Only substantive text is judged (``min_chars``, 40 by default): "Running the
  tests." after every edit is narration, not a loop.  Turns with less text
  reset the streak.
* A turn with tool calls repeats an earlier one only if it made the same
  calls and got the same results: the same words over different items (a
  batch job) or over moving results (a poll, a test run whose failures
  change) are progress.  Slightly varied calls are ``similar_args``' job.
* Work in between is something new: an output is not compared with one
  from before a tool turn (a turn with calls and too little text to judge)
  that did something the last few such turns had not -- other calls, or
  the same calls with other results.  "Build 3 for arm64 finished" after
  twenty polls of build 3 repeats nothing, however like "Build 2 for wasm32
  finished" it reads; the same words around the same call and result are
  still compared.
* One repeat is not a loop: ``threshold`` (2) repeats of the same output
  warn, i.e. its third near-identical version, while every output in between
  is a repeat too.  Any other output resets the count.  Repeats are counted
  per repeated output, so templated lines about different things ("Plan for
  the handler: …", "Starting with the handler …", then the same for the
  serializer) are two chains of one repeat each, not a streak of two;
  alternating stuck states (A, B, A, B, A) are still caught.
* Leading narration openers ("Let me", "I'll", "Now") are dropped before
  comparing: agents vary them while saying the same thing.
* A reply the harness resumed after acting on its own (``meta["resumed"]``:
  a Vorflux harness's end-of-turn hooks or review) starts over, as a user
  turn does: the finished answer given again when asked again is no repeat
  of the agent's own work (``monologue`` counts such replies in a row).

Cost is bounded whatever the size of the output: the compared text is clipped
(:func:`monitor.text.clip`), pairs that could not match anyway (other calls,
new work since) are scored only for a sparkline, equal texts short-circuit,
pairs whose lengths alone cap the ratio below the cut-off are skipped, and
``fuzz.ratio`` runs with ``score_cutoff`` so it can stop early.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.turns import Outcome, Turn, marked
from monitor.detect.base import Detection, SessionView, TurnDetector, TurnSettings, evidence, ref
from monitor.events import Event, EventRef, Level
from monitor.text import clip, squashed

#: Narration openers that carry no content ("Let me check X" = "Checking X").
_OPENER = re.compile(
    r"^(?:(?:ok(?:ay)?|now|next|so|alright|first|then|again)[,.!:]?\s+)*"
    r"(?:let me|let's|i'll|i will|i'm going to|i am going to|i need to|we need to|"
    r"i should)\s+",
    re.IGNORECASE,
)
#: The first two characters of every opener, lower-cased: ASCII text that
#: starts otherwise has none (case-insensitive matching pairs an ASCII letter
#: with a non-ASCII one only: "ı", "İ", "ſ", the Kelvin sign).
_OPENER_STARTS = frozenset({"ok", "no", "ne", "so", "al", "fi", "th", "ag", "le", "we", "i'", "i "})


def normalize_output(text: str) -> str:
    """The part of an output worth comparing: clipped, white space squashed,
    leading narration opener dropped."""
    return _without_opener(squashed(clip(text)))


def _without_opener(text: str) -> str:
    """``text`` (squashed) without its leading narration opener."""
    head = text[:2]
    if head.isascii() and head.lower() not in _OPENER_STARTS:
        return text  # most texts: no regex to try
    # The opener is anchored at the start: match() tries there only (sub() would scan on).
    opener = _OPENER.match(text)
    return text[opener.end() :] if opener is not None else text


def similarity(a: str, b: str, cutoff: float = 0.0) -> float:
    """``fuzz.ratio`` of two normalized outputs as 0..1 (0 when below ``cutoff``)."""
    total = len(a) + len(b)
    if total == 0:
        return 1.0
    if a == b:
        return 1.0
    # Indel ratio can never exceed 2*min/(len_a+len_b): skip hopeless pairs cheaply.
    if 2 * min(len(a), len(b)) / total < cutoff:
        return 0.0
    return fuzz.ratio(a, b, score_cutoff=cutoff * 100) / 100.0


#: Tool turns remembered to tell new work from a repeat of recent work.
_RECENT_WORK = 4


@dataclass(frozen=True)
class OutputSimilaritySettings(TurnSettings):
    window: int = 5  # compare with the last N outputs
    similarity: float = 0.90  # fuzz.ratio (0..1) from which an output is a repeat
    threshold: int = 2  # repeats of one output, with nothing new between, that warn
    min_chars: int = 40  # shorter text is not judged (and resets the streak)
    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


@dataclass(slots=True)
class _Output:
    """One remembered output: references to its turn's events only, never the events."""

    #: Its compared text.
    text: str
    #: The digest of the first output of the chain it repeats; ``None`` for
    #: an output that repeated nothing until one repeats it (see :meth:`anchor`).
    chain: str | None
    #: The sorted hashes of its call keys (compared for equality only).
    calls: tuple[int, ...]
    #: Its results (``Turn.results``), made an :class:`Outcome` when first compared.
    results: Any
    #: The turn's first event, as evidence.
    event: EventRef
    #: The detector's count of new tool work when it was said.
    work: int

    def anchor(self) -> str:
        """The chain anchor: the one it was given, else its own digest (written when first needed)."""
        if self.chain is None:
            self.chain = digest(self.text)
        return self.chain

    def outcome(self) -> Outcome:
        """The results, made comparable when first needed (and kept)."""
        if not isinstance(self.results, Outcome):
            self.results = Outcome(self.results)
        return self.results


class OutputSimilarity(TurnDetector[OutputSimilaritySettings]):
    name = "output_similarity"
    title = "Output similarity"
    Settings = OutputSimilaritySettings
    presets = {
        "conservative": {"similarity": 0.95, "threshold": 3},
        "aggressive": {"similarity": 0.85, "threshold": 1},
    }

    def __init__(self, settings: OutputSimilaritySettings | None = None):
        super().__init__(settings)
        s = self.settings
        # Lists, not deques, trimmed by hand: an empty deque still holds a block of 64 slots.
        self.outputs_kept = max(1, s.window)
        self.outputs: list[_Output] = []
        #: Per repeated output (its chain's anchor): how often it has come back
        #: since the last output that repeated nothing, and the turns involved (the last 12).
        self.chains: dict[str, tuple[int, list[EventRef]]] = {}
        #: Tool turns that did something new so far, and the hashes of the
        #: last few tool turns (calls and results) to tell new from repeated.
        self.work = 0
        self.recent_work = array("q")

    def reset(self) -> None:
        self.outputs.clear()
        self.chains.clear()

    def _note_work(self, turn: Turn, view: SessionView) -> None:
        """Count a tool turn that did something the last few had not.

        Called only while no new work has been seen since the latest output
        (after that, more new work changes no comparison): a long stretch of
        tool turns costs one digest, not one each."""
        exempt = view.exempt
        keys = tuple(key for tool, key in turn.calls if not exempt(tool))
        if not keys:
            return
        digest_ = hash((keys, turn.results))  # (the items of turn.outcome())
        recent = self.recent_work
        if digest_ not in recent:
            self.work += 1
        recent.append(digest_)
        if len(recent) > _RECENT_WORK:
            del recent[0]

    def window(self) -> Sequence[Event | EventRef]:
        return [output.event for output in self.outputs]

    def judge(self, turn: Turn, view: SessionView) -> list[Detection] | None:
        if marked(turn, "resumed"):
            self.reset()  # the harness started a new turn: new input, as a user turn is
        # (A turn of tool calls only -- most -- holds no text to compare.)
        text = self._text(turn) if turn.text is not None else None
        if text is None:
            if turn.calls and self.outputs and self.outputs[-1].work == self.work:
                self._note_work(turn, view)
            if self.chains:
                self.chains.clear()
            return None
        calls = tuple(sorted(hash(key) for tool, key in turn.calls if not view.exempt(tool)))
        best, match = self._closest(turn, text, calls, view)
        # An output that repeats nothing anchors a chain only once another
        # repeats it: its digest waits until then (_Output.anchor).
        anchor = match.anchor() if match is not None else None
        first = ref(turn.first)
        self.outputs.append(_Output(text, anchor, calls, turn.results, first, self.work))
        if len(self.outputs) > self.outputs_kept:
            del self.outputs[0]
        if match is None or anchor is None:
            self.chains.clear()
            return None
        repeats, involved = self.chains.get(anchor, (0, [match.event]))
        involved.append(first)
        if len(involved) > 12:
            del involved[0]
        repeats += 1
        self.chains[anchor] = (repeats, involved)
        if len(self.chains) > self.settings.window:  # bounded: the oldest chain goes
            self.chains.pop(next(iter(self.chains)))
        if repeats < self.settings.threshold:
            return None
        return [self._detection(best, anchor, repeats + 1, involved)]

    def _text(self, turn: Turn) -> str | None:
        """The turn's text as compared, ``None`` when shorter than ``min_chars``."""
        bounded = turn.text
        # Normalizing never lengthens a text: a turn with less raw text than
        # min_chars (most turns: tool calls only, no text) needs no normalizing.
        # (The held text is min(length, limit) characters long.)
        if bounded is None or min(bounded.length, bounded.limit) < self.settings.min_chars:
            return None
        # normalize_output(bounded.text()): the text is clipped already, and
        # turn similarity reads the same squashed text.
        text = _without_opener(bounded.squashed())
        return text if len(text) >= self.settings.min_chars else None

    def _closest(
        self, turn: Turn, text: str, calls: tuple[int, ...], view: SessionView
    ) -> tuple[float, _Output | None]:
        """The best score and remembered output this one repeats (same calls,
        no new work since, results not moved on); the closest score goes to the sparkline."""
        # Scores below the cut-off read as 0 (also on the sparkline): a high
        # score_cutoff lets rapidfuzz stop early.
        closest, best, match = 0.0, 0.0, None
        cutoff = self.settings.similarity
        keep = view.keeps_similarity
        for earlier in self.outputs:
            same_work = calls == earlier.calls and earlier.work == self.work
            if not keep and not same_work:
                continue  # cannot match, and only a sparkline would show its score
            score = similarity(text, earlier.text, cutoff)
            closest = max(closest, score)
            if score < cutoff or score <= best or not same_work:
                continue  # not as close, or the same words about another action or new work
            if turn.outcome().moved(earlier.outcome()):
                continue  # same words, new results: progress
            best, match = score, earlier
        if keep:
            view.note_similarity(self.name, closest)
        return best, match

    def _detection(self, best: float, anchor: str, count: int, involved: list[EventRef]) -> Detection:
        s = self.settings
        return Detection(
            detector=self.name,
            level=Level.WARN,
            score=best,
            message=(
                f"assistant output {best:.0%} similar to one of the last {s.window} outputs; "
                f"{count} near-identical versions of it, nothing new in between"
            ),
            pattern=f"output:{anchor}",
            count=count,
            summary=f"produced nearly the same output {count} times",
            advice="Your replies are not changing, so neither is the outcome.",
            evidence=evidence(involved),
        )
