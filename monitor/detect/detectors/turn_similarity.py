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
and its words are kept as one string, each between two spaces -- a few bytes
a word, no Python object per word.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.analysis.calls import CallRecord
from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.turns import Call, Outcome, Turn, held_outcome
from monitor.detect.base import Detection, DetectorSettings, SessionView, TurnDetector, evidence, ref
from monitor.events import Event, EventRef, Kind, Level, new_event
from monitor.text import SIMILARITY_CHARS, clip


@dataclass(frozen=True)
class TurnSimilaritySettings(DetectorSettings):
    window: int = 5  # compare with the last N turns
    similarity: float = 0.85  # Jaccard from which a turn is similar
    warn_after: int = 3  # consecutive similar turns that warn
    terminate_after: int = 5  # consecutive similar turns that terminate
    min_tokens: int = 6  # turns with fewer distinct tokens are not compared
    same_turn_seconds: float = 1.0  # records closer than this (no ids) are one response


def _words(turn: Turn, calls: tuple[Call, ...] | list[Call]) -> tuple[list[str], str]:
    """The words of a turn, lower-cased, repeats included: its (clipped) text
    and ``calls`` (its calls, the exempt ones left out); and the same words
    each between two " ", as the turn is remembered (see :data:`_Seen`).
    (:meth:`TurnSimilarity.observe_completed` inlines the case of one call and no text.)"""
    text = turn.text
    if turn.has_text and text is not None:
        # Squashed, the lower-cased text is its words between single spaces
        # already: no join (and output similarity squashes the same text).
        spelled = text.squashed().lower()
        words = spelled.split()
    else:
        spelled, words = "", []
    if calls:
        if len(calls) == 1:  # most turns make one call: no generator, no join
            tool, key = calls[0]
            joined = f"{tool} {key}"
        else:
            joined = " ".join(f"{tool} {key}" for tool, key in calls)
        if len(joined) > SIMILARITY_CHARS:
            joined = clip(joined, SIMILARITY_CHARS)
        called = joined.lower().split()
        if words:
            words += called
            spelled = f"{spelled} {' '.join(called)}"
        else:
            words = called
            spelled = " ".join(called)
    return words, f" {spelled} "


_TOOL_CALL, _TOOL_RESULT = Kind.TOOL_CALL, Kind.TOOL_RESULT

#: A result cited later: (seq, source, line, is_error, content), or a call's record -- see :func:`_kept`.
_Cited = tuple | CallRecord


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
            record = event.cache.get("record")
            if record is not None and record.seq == event.seq:
                kept.append(record)  # (the record makes its reference when cited: CallRecord.ref)
                continue
        kept.append(ref(event))
    return tuple(kept)


def _cite(item: EventRef | _Cited) -> EventRef:
    """The reference of what :func:`_kept` kept: ``EventRef.of`` the result as it was."""
    if item.__class__ is EventRef:
        return item  # type: ignore[return-value]
    if item.__class__ is CallRecord:
        return item.ref  # type: ignore[union-attr]
    seq, source, line, is_error, content = item
    result = new_event(_TOOL_RESULT, "", 0.0, source, line, None, content, None, None, None, is_error, {})
    result.seq = seq
    return EventRef.of(result)


#: One remembered turn, held as a list: one is made per compared turn, and a
#: list costs a fraction of an object's construction.  Its fields, by index:
#: its words, each between two " " (none holds white space; repeats kept:
#: its squashed text needs no join); how many distinct ones; its results (``Turn.results``; their :class:`Outcome` once a turn
#: resembles this one, see :func:`_outcome`); its chain anchor (None for a turn
#: that repeated nothing until one repeats it, see :func:`_anchor`); the start
#: of its text and call keys (bounded) that anchor is made of; and what the
#: turn said, called and got (bounded; see :func:`_kept`, :func:`_events`).
#: References to its events only, never the events themselves.
_Seen = list
_TOKENS, _SIZE, _RESULTS, _ANCHOR, _NAMED, _EVENTS = range(6)


def _anchor(seen: _Seen) -> str:
    """The chain anchor of a remembered turn (its digest written when first needed)."""
    anchor = seen[_ANCHOR]
    if anchor is None:
        anchor = seen[_ANCHOR] = digest(seen[_NAMED])
        seen[_NAMED] = ""
    return anchor


def _outcome(seen: _Seen) -> Outcome:
    """The results of a remembered turn, made comparable when first needed (and kept)."""
    return held_outcome(seen, _RESULTS)


def _events(seen: _Seen) -> tuple[EventRef, ...]:
    """The references of a remembered turn's events (its results' made now, once)."""
    events = seen[_EVENTS]
    if any(item.__class__ is not EventRef for item in events):
        events = seen[_EVENTS] = tuple(map(_cite, events))
    return events


class TurnSimilarity(TurnDetector):
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

    def window(self) -> list[EventRef]:
        return [events[0] for events in map(_events, self.history) if events]

    def observe_completed(self, event: Event | None, view: SessionView) -> list[Detection] | None:
        # (TurnDetector.judge(turn, view) comes here with view.completed = turn.)
        turn: Turn = view.completed
        # Runs for every completed turn (most are one tool call and its
        # result): flat, with the common case decided before any set is built.
        calls = turn.calls
        if calls and view.tool_overrides:
            calls = [call for call in calls if not view.exempt(call[0])]
        if not calls and not turn.has_text:
            return None  # nothing of the agent's own to compare
        if not turn.has_text and turn.first.cache.get("waited"):
            return None  # a poll after a wait: the waiting budget's (waiting.py)
        s = self.settings
        if len(calls) == 1 and not turn.has_text:  # most turns: _words(), inlined
            tool, key = calls[0]
            joined = f"{tool} {key}"
            if len(joined) > SIMILARITY_CHARS:
                joined = clip(joined, SIMILARITY_CHARS)
            elif joined.count(" ") < s.min_tokens - 1 and joined.isprintable():
                # Printable text has no white space but " ": too few words, no split needed.
                self.consecutive = 0
                return None
            words = joined.lower().split()
            spelled = f" {' '.join(words)} "
        else:
            words, spelled = _words(turn, calls)
        # Fewer words than min_tokens means fewer distinct tokens too: most tool-only
        # turns stop here.
        toks = frozenset(words) if len(words) >= s.min_tokens else ()
        size = len(toks)
        if size < s.min_tokens:
            self.consecutive = 0
            return None
        # Jaccard is at most min/max of the two sizes: a turn whose size keeps it below
        # both the closest score (the sparkline's; the cut-off in a scan) and the cut-off is skipped.
        cutoff = s.similarity
        keep = view.keeps_similarity
        closest, best, match = 0.0 if keep else cutoff, 0.0, None
        for seen in self.history:
            other = seen[_SIZE]
            if not other:
                continue  # (score 0)
            bound = other / size if other < size else size / other
            if bound <= closest and bound < cutoff:
                continue
            # Its tokens are looked up in the other's string one by one; the count
            # stops once the misses keep the score below both cut-offs (the same
            # formula over fewer common tokens never rounds higher).
            earlier, common = seen[_TOKENS], size
            for word in toks:
                if f" {word} " not in earlier:
                    common -= 1
                    score = common / (size + other - common)
                    if score <= closest and score < cutoff:
                        break
            else:  # every token looked up: ``common`` is exact
                score = common / (size + other - common)  # Jaccard
                if score > closest:
                    closest = score
                # (The same words that got new results made progress: no repeat.)
                if score >= cutoff and score > best and not turn.outcome().moved(_outcome(seen)):
                    best, match = score, seen
        if keep:
            view.note_similarity(self.name, closest)

        if match is not None:
            anchor, named = _anchor(match), ""
        else:  # names the chain this turn may start: stable across runs (see _anchor)
            text, made = turn.text, turn.calls
            head = text.text()[:300] if text is not None else ""
            keys = made[0][1][:100] if len(made) == 1 else "".join(key[:100] for _, key in made[:3])
            anchor, named = None, head + keys
        # Kept as one string: a few bytes a word, and made without a Python
        # object per word (turning hashes into an array("q") cost more than all the rest).
        history = self.history
        seen = [spelled, size, turn.results, anchor, named, _kept(turn)]
        history.append(seen)
        if len(history) > self.turns_kept:
            del history[0]
        if match is None:
            self.consecutive = 0
            return None
        events = _events(seen)
        if self.consecutive == 0:
            self.streak.clear()
            self.streak.append(_events(match))
        self.consecutive += 1
        streak = self.streak
        streak.append(events)
        if len(streak) > 6:
            del streak[0]
        if self.consecutive < s.warn_after:
            return None
        level = Level.TERMINATE if self.consecutive >= s.terminate_after else Level.WARN
        n = self.consecutive
        return [
            Detection(
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
        ]
