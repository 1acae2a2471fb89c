"""Turn similarity: consecutive assistant turns that say and do the same thing.

Design note 004: the Jaccard overlap of lower-cased white-space tokens of each
turn with each of the last 5 turns; 0.85 or more makes the turn *similar*.
3 consecutive similar turns warn, 5 terminate, and any dissimilar turn resets
the count.  (The first turn of a loop is the one the others repeat, so the
warning comes with the 4th turn of a loop, as in the note's code.)

A *turn* is one model response (:mod:`monitor.detect.analysis.turns`): its text plus
the tool calls it made (tool name and canonical arguments), judged once it is
complete.  Honest repetition that must not count:

* a turn whose calls got different results than the turn it resembles (a
  poll whose output moves) is dissimilar: it made progress;
* turns with fewer than ``min_tokens`` distinct tokens ("Done.", "OK") carry
  too little to compare and reset the count;
* calls to exempt tools (``[tools.<name>] exempt``) are left out; a turn with
  nothing else, or an empty reply (monologue counts those), is skipped.

Per session only the compared window is kept (the note caps its history at
50 turns for memory; only the last 5 are ever compared, so those are all we
hold).  Each turn's tokens come from clipped text (:func:`monitor.text.clip`)
and its distinct words are kept as a frozenset of interned strings: a word
the remembered turns share is held once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from sys import intern
from typing import Any

from monitor.detect.analysis.calls import CallRecord, made_record
from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.turns import Call, Outcome, Turn
from monitor.detect.analysis.waits import waited
from monitor.detect.base import Detection, SessionView, TurnDetector, TurnSettings, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import SIMILARITY_CHARS, clip


@dataclass(frozen=True)
class TurnSimilaritySettings(TurnSettings):
    window: int = 5  # compare with the last N turns
    similarity: float = 0.85  # Jaccard from which a turn is similar
    warn_after: int = 3  # consecutive similar turns that warn
    terminate_after: int = 5  # consecutive similar turns that terminate
    min_tokens: int = 6  # turns with fewer distinct tokens are not compared
    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


def _words(turn: Turn, calls: tuple[Call, ...] | list[Call]) -> list[str]:
    """The words of a turn, lower-cased, repeats included: its (clipped) text
    and ``calls`` (its calls, the exempt ones left out)."""
    text = turn.text
    words = text.squashed().lower().split() if turn.has_text and text is not None else []
    if calls:
        joined = " ".join([f"{tool} {key}" for tool, key in calls])
        if len(joined) > SIMILARITY_CHARS:
            joined = clip(joined, SIMILARITY_CHARS)
        words += joined.lower().split()
    return words


_TOOL_CALL, _TOOL_RESULT = Kind.TOOL_CALL, Kind.TOOL_RESULT
_NO_TOKENS: frozenset[str] = frozenset()

#: A result cited later: (seq, source, line, is_error, content), or a call's record -- see :func:`_kept`.
_Cited = tuple[int, str, int | None, bool, str] | CallRecord


def _kept(turn: Turn) -> tuple[EventRef | _Cited, ...]:
    """The turn's events as evidence: their references, but for a result
    or a call what makes its reference when the turn is cited (most never
    are; the reference of a result costs 5,000-17,000 instructions, the head
    of its text).  A result's text is the very string the turn's outcome
    keeps (the k-th result event is the k-th result); a call's record is
    most often in the call windows too."""
    results = turn.results
    kept: list[EventRef | _Cited] = []
    k = 0
    for event in turn.events:
        if event.kind is _TOOL_RESULT:
            content = event.content
            k += 1
            if k <= len(results) and results[k - 1][1] is content:
                kept.append((event.seq, event.source, event.line, event.is_error, content))
                continue
        elif event.kind is _TOOL_CALL:
            record = made_record(event)
            if record is not None:
                kept.append(record)  # (the record makes its reference when cited: CallRecord.ref)
                continue
        kept.append(ref(event))
    return tuple(kept)


def _cite(item: EventRef | _Cited) -> EventRef:
    """The reference of what :func:`_kept` kept: ``EventRef.of`` the result as it was."""
    if isinstance(item, EventRef):
        return item
    if isinstance(item, CallRecord):
        return item.ref
    seq, source, line, is_error, content = item
    result = Event(_TOOL_RESULT, "", 0.0, source, line, content=content, is_error=is_error)
    result.seq = seq
    return EventRef.of(result)


@dataclass(slots=True)
class _Seen:
    """One remembered turn: references to its events only, never the events."""

    #: Its distinct words (text and call keys, lower-cased).
    tokens: frozenset[str]
    #: Its results (``Turn.results``), made an :class:`Outcome` when first compared.
    results: Any
    #: Its chain anchor: ``None`` for a turn that repeated nothing until one
    #: repeats it (then the digest of ``named``, see :meth:`anchor`).
    chain: str | None
    #: The start of its text and call keys (bounded) that anchor is made of.
    named: str
    #: What the turn said, called and got (bounded; see :func:`_kept`).
    kept: tuple[EventRef | _Cited, ...]

    def anchor(self) -> str:
        """The chain anchor (its digest written when first needed)."""
        if self.chain is None:
            self.chain = digest(self.named)
            self.named = ""
        return self.chain

    def outcome(self) -> Outcome:
        """The results, made comparable when first needed (and kept)."""
        if not isinstance(self.results, Outcome):
            self.results = Outcome(self.results)
        return self.results

    def events(self) -> tuple[EventRef, ...]:
        """The references of the turn's events (its results' made now, once)."""
        if any(not isinstance(item, EventRef) for item in self.kept):
            self.kept = tuple(map(_cite, self.kept))
        return self.kept  # type: ignore[return-value]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (both non-empty)."""
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def _named(turn: Turn) -> str:
    """What names the chain a turn may start: stable across runs (see :meth:`_Seen.anchor`)."""
    text, made = turn.text, turn.calls
    head = text.text()[:300] if text is not None else ""
    keys = made[0][1][:100] if len(made) == 1 else "".join(key[:100] for _, key in made[:3])
    return head + keys


class TurnSimilarity(TurnDetector[TurnSimilaritySettings]):
    name = "turn_similarity"
    title = "Turn similarity"
    Settings = TurnSimilaritySettings
    presets = {
        "conservative": {"similarity": 0.90, "warn_after": 4, "terminate_after": 6},
        "aggressive": {"warn_after": 2, "terminate_after": 4},
    }

    def __init__(self, settings: TurnSimilaritySettings | None = None):
        super().__init__(settings)
        s = self.settings
        # Lists, not deques, trimmed by hand: an empty deque still holds a block of 64 slots.
        self.turns_kept = max(1, s.window)
        self.history: list[_Seen] = []
        self.consecutive = 0
        self.streak: list[tuple[EventRef, ...]] = []  # the similar turns (the last 6)

    def reset(self) -> None:
        self.history.clear()
        self.consecutive = 0
        self.streak.clear()

    def window(self) -> Sequence[Event | EventRef]:
        return [events[0] for events in (seen.events() for seen in self.history) if events]

    def judge(self, turn: Turn, view: SessionView) -> list[Detection] | None:
        tokens = self._tokens(turn, view)
        if tokens is None:
            return None
        best, match = self._closest(turn, tokens, view)
        seen = _Seen(tokens, turn.results, None, "", _kept(turn))
        if match is not None:
            seen.chain = match.anchor()
        else:
            seen.named = _named(turn)
        self.history.append(seen)
        if len(self.history) > self.turns_kept:
            del self.history[0]
        if match is None:
            self.consecutive = 0
            return None
        if self.consecutive == 0:
            self.streak.clear()
            self.streak.append(match.events())
        self.consecutive += 1
        self.streak.append(seen.events())
        if len(self.streak) > 6:
            del self.streak[0]
        if self.consecutive < self.settings.warn_after:
            return None
        return [self._detection(best, seen.chain or "")]

    def _tokens(self, turn: Turn, view: SessionView) -> frozenset[str] | None:
        """The turn's distinct words, ``None`` when it is not compared (and ends the streak
        if it has too few)."""
        calls: tuple[Call, ...] | list[Call] = turn.calls
        if calls and view.tool_overrides:
            calls = [call for call in calls if not view.exempt(call[0])]
        if not calls and not turn.has_text:
            return None  # nothing of the agent's own to compare
        if not turn.has_text and waited(turn.first):
            return None  # a poll after a wait: the waiting budget's (waiting.py)
        words = _words(turn, calls)
        # Fewer words than min_tokens means fewer distinct tokens too.  Interned:
        # a word the remembered turns share is one string, not one per turn.
        tokens = frozenset(map(intern, words)) if len(words) >= self.settings.min_tokens else _NO_TOKENS
        if len(tokens) < self.settings.min_tokens:
            self.consecutive = 0
            return None
        return tokens

    def _closest(self, turn: Turn, tokens: frozenset[str], view: SessionView) -> tuple[float, _Seen | None]:
        """The best score and remembered turn this one repeats (at or above the
        cut-off, its results not moved on); the closest score goes to the sparkline."""
        cutoff = self.settings.similarity
        # Only scores above the closest so far (the sparkline's; without one,
        # the cut-off) or at the cut-off matter, and the Jaccard index is at
        # most the ratio of the two sizes: most pairs are settled by that.
        closest = 0.0 if view.keeps_similarity else cutoff
        best, match = 0.0, None
        size = len(tokens)
        for seen in self.history:
            other = len(seen.tokens)
            if not other:
                continue  # (score 0)
            bound = other / size if other < size else size / other
            if bound <= closest and bound < cutoff:
                continue
            score = _jaccard(tokens, seen.tokens)
            closest = max(closest, score)
            # (The same words that got new results made progress: no repeat.)
            if score >= cutoff and score > best and not turn.outcome().moved(seen.outcome()):
                best, match = score, seen
        if view.keeps_similarity:
            view.note_similarity(self.name, closest)
        return best, match

    def _detection(self, best: float, anchor: str) -> Detection:
        s = self.settings
        n = self.consecutive
        level = Level.TERMINATE if n >= s.terminate_after else Level.WARN
        return Detection(
            detector=self.name,
            level=level,
            score=best,
            message=(
                f"{n} turns in a row nearly repeat one of the last {s.window} "
                f"(words and tool calls {best:.0%} the same)"
                + (
                    "; the agent is not getting anywhere: stop the session"
                    if level is Level.TERMINATE
                    else ""
                )
            ),
            pattern=f"turn:{anchor}",
            count=n,
            summary=f"taken {n + 1} turns in a row that say and do nearly the same thing",
            advice="Rephrasing the same step does not make progress; change what you do.",
            evidence=evidence(event for turn_events in self.streak for event in turn_events),
        )
