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

Cost is bounded whatever the size of the output: the compared text is clipped
(:func:`monitor.text.clip`), pairs that could not match anyway (other calls,
new work since) are scored only for a sparkline, equal texts short-circuit,
pairs whose lengths alone cap the ratio below the cut-off are skipped, and
``fuzz.ratio`` runs with ``score_cutoff`` so it can stop early.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

from rapidfuzz import fuzz

from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.turns import Turn, held_outcome
from monitor.detect.base import Detection, DetectorSettings, SessionView, TurnDetector, evidence, ref
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
class OutputSimilaritySettings(DetectorSettings):
    window: int = 5  # compare with the last N outputs
    similarity: float = 0.90  # fuzz.ratio (0..1) from which an output is a repeat
    threshold: int = 2  # repeats of one output, with nothing new between, that warn
    min_chars: int = 40  # shorter text is not judged (and resets the streak)
    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


#: One remembered output, held as a list: one is made per judged text turn,
#: and a list costs a fraction of an object's construction.  Its fields, by
#: index: its compared text; its chain anchor (the digest of the first output
#: of the chain it repeats; None for an output that repeated nothing until one
#: repeats it, see :func:`_anchor`); the sorted hashes of its call keys
#: (compared for equality only); its results (``Turn.results``; their
#: :class:`Outcome` once compared, see :func:`held_outcome`); the turn's first
#: event, as evidence (a reference, never the event); the detector's count of
#: new tool work when it was said.
_Output = list
_TEXT, _ANCHOR, _CALLS, _RESULTS, _EVENT, _WORK = range(6)


def _anchor(output: _Output) -> str:
    """The chain anchor of a remembered output: the one it was given, else
    its own digest (written when first needed, and kept)."""
    if output[_ANCHOR] is None:
        output[_ANCHOR] = digest(output[_TEXT])
    return output[_ANCHOR]


class OutputSimilarity(TurnDetector):
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

    def window(self) -> list[EventRef]:
        return [output[_EVENT] for output in self.outputs]

    def observe_completed(self, event: Event | None, view: SessionView) -> list[Detection] | None:
        # (TurnDetector.judge(turn, view) comes here with view.completed = turn.)
        turn: Turn = view.completed
        s = self.settings
        bounded = turn.text
        # Normalizing never lengthens a text: a turn with less raw text than
        # min_chars (most turns: tool calls only, no text) needs no normalizing.
        # (The held text is min(length, limit) characters long.)
        if bounded is None or min(bounded.length, bounded.limit) < s.min_chars:
            if turn.calls and self.outputs and self.outputs[-1][_WORK] == self.work:
                self._note_work(turn, view)
            if self.chains:
                self.chains.clear()
            return None
        # normalize_output(bounded.text()): the text is clipped already, and
        # turn similarity reads the same squashed text.
        text = _without_opener(bounded.squashed())
        if len(text) < s.min_chars:
            if turn.calls and self.outputs and self.outputs[-1][_WORK] == self.work:
                self._note_work(turn, view)
            if self.chains:
                self.chains.clear()
            return None
        calls = turn.calls
        if not calls:
            calls = ()
        elif len(calls) == 1 and not view.tool_overrides:  # the common case: no generator, no sort
            calls = (hash(calls[0][1]),)
        else:
            exempt = view.exempt
            calls = tuple(sorted(hash(key) for tool, key in calls if not exempt(tool)))

        # Scores below the cut-off read as 0 (also on the sparkline): a high
        # score_cutoff lets rapidfuzz stop early.
        closest, best, match = 0.0, 0.0, None
        cutoff = s.similarity
        work = self.work
        size = len(text)
        keep = view.keeps_similarity
        for earlier in self.outputs:
            if not keep and (calls != earlier[_CALLS] or earlier[_WORK] != work):
                continue  # cannot match, and only a sparkline would show its score
            other = earlier[_TEXT]
            if other == text:
                score = 1.0
            else:
                # similarity(), inlined: the length bound settles most pairs (score 0).
                length = len(other)
                if 2 * (length if length < size else size) / (size + length) < cutoff:
                    continue
                score = fuzz.ratio(text, other, score_cutoff=cutoff * 100) / 100.0
            if score > closest:
                closest = score
            if score < cutoff or score <= best:
                continue
            if calls != earlier[_CALLS]:
                continue  # same words, different action
            if earlier[_WORK] != work:
                continue  # new work since: a report on something else
            if turn.outcome().moved(held_outcome(earlier, _RESULTS)):
                continue  # same words, new results: progress
            best, match = score, earlier
        if keep:
            view.note_similarity(self.name, closest)

        # An output that repeats nothing anchors a chain only once another
        # repeats it: its digest waits until then (_anchor).
        anchor = _anchor(match) if match is not None else None
        first = ref(turn.first)
        outputs = self.outputs
        outputs.append([text, anchor, calls, turn.results, first, work])
        if len(outputs) > self.outputs_kept:
            del outputs[0]
        if match is None:
            self.chains.clear()
            return None
        repeats, involved = self.chains.get(anchor, (0, None))
        if involved is None:
            involved = [match[_EVENT]]
        involved.append(first)
        if len(involved) > 12:
            del involved[0]
        repeats += 1
        self.chains[anchor] = (repeats, involved)
        if len(self.chains) > s.window:  # bounded: the oldest chain goes
            self.chains.pop(next(iter(self.chains)))
        if repeats < s.threshold:
            return None
        count = repeats + 1
        return [
            Detection(
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
        ]
