"""Stale outcomes: the agent keeps acting, but what comes back is no longer new.

Every round (a tool result, or a harness's refusal or error sent back as
a user or system message) ends in an outcome (:mod:`monitor.detect.analysis.outcomes`): a
failure, a search that found nothing, a rejection, or a success.  When
``threshold`` of the last ``span`` rounds end in the *same* failure or
rejection -- the same after normalising what varies by accident -- the
outcome has stopped being new, whatever the calls were: the same commit
retried with small edits between while a hook rejects it, a reply in prose
answered "command not found" at every step, a patch submitted again to a
harness that answers "Your patch is empty", a change restored and
re-applied by different means ending in the same error.  Farther apart,
one check (the same call) failing the same way ``check_threshold`` times
among the last ``long_span`` rounds, other work between and no other
failure met since it first failed, is stale too: the fixes between changed
nothing it shows.

The same substantial *answer* (a success that says something: not an
acknowledgement, at least 40 characters) to ``answer_threshold`` different
calls among the last ``window``, with nothing edited since, is stale too:
the history re-checked in six spellings, always the same single commit.
Rounds are counted as a reader counts them: the calls one reply made
together are one round of ``span`` and ``window``.

A person's message is no round, except the same complaint again after
the agent answered each time (the same message, or the same error line
quoted in it with other words around it), ``threshold`` times among
their last ``window`` messages, while the work between brought nothing new.
A complaint the agent answered in words alone, after which the person went
on to something else, was cleared up: it does not count.

Left alone on purpose: other successes (polling whose output moves, paging, one
command over many items, edits that apply); failures that keep changing (a
new missing module each time, fewer failing tests, a different error after
each fix); and searches for different things that each find nothing, until
``empty_threshold`` of the last ``window`` rounds are such searches (then
the agent is guessing, not exploring).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.edits import is_edit
from monitor.detect.analysis.outcomes import (
    ANSWER,
    EMPTY,
    FAILURE,
    MIN_ANSWER_CHARS,
    REJECTED,
    Outcome,
    answer_of,
    normalise,
    outcome_of,
    quoted_errors,
    reply_outcome,
)
from monitor.detect.analysis.places import place_answered
from monitor.detect.analysis.progress import round_of, same_round
from monitor.detect.analysis.signatures import is_acknowledgement
from monitor.detect.analysis.sought import Sought, sought
from monitor.detect.analysis.waits import asked
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import call_key

_MESSAGE = Kind.MESSAGE
#: One result: (outcome key or None, its kind, hash of the call key, evidence, digests of its lines,
#: the number of its round: one reply's calls share one).
_Round = tuple[str | None, str, int, EventRef | None, frozenset[int], int]
_NO_LINES: frozenset[int] = frozenset()
#: Results remembered to tell whether the work since a request brought anything new, and how much of each.
SEEN_RESULTS = 256
#: The key prefix of a request sent again (a user's message).
REQUEST = "U:"
REQUEST_RESULT_CHARS = 2000
#: Between an empty search's key and the digest of the place it searched.
PLACE = "@"
#: Results kept per round of the window: a reply's parallel calls beyond this push older rounds out.
CALLS_PER_ROUND = 4


def _stale(same: list[_Round]) -> int:
    """How many of ``same`` (rounds with one outcome, oldest first) brought
    nothing new: the first, and each later one that shows no line that none
    before it showed (a round that does -- a debug print, a new probe's
    answer -- is new).  A round without lines (a refusal, judged by what it
    refuses) is never new.  One reply's calls ending alike count once (one round)."""
    seen: set[int] = set()
    stale = 0
    counted = -1  # the number of the last round counted
    for round_ in same:
        lines = round_[4]
        if stale and lines and not lines <= seen:
            seen |= lines
            continue
        seen |= lines
        if round_[5] != counted or not round_[5]:
            stale += 1
            counted = round_[5]
    return stale


def _checked_again(spread: list[_Round], rounds: Sequence[_Round], key: str | None) -> list[_Round]:
    """Of ``spread`` (the rounds of the last ``long_span`` ending in failure ``key``), those of
    the latest call (a check), when it was not run back to back and no other failure came
    since it first failed (the fixes between met nothing new); else none."""
    check = [r for r in spread if r[2] == spread[-1][2]] if spread else []
    if len(check) < 2 or check[-1][5] - check[0][5] < len(check):
        return []  # run again and again with nothing between: exact_repeat's
    first = check[0][5]
    others = {r[0] for r in rounds if r[5] >= first and r[1] == FAILURE}
    return check if others == {key} else []


def _question(call: Event | None, outcome: Outcome, call_hash: int) -> int:
    """The hash of what ``call`` asked, for an answer: its call without its wait (asked
    again after waiting longer, or not at all, is the same question: polling)."""
    return hash(asked(call)) if outcome.kind == ANSWER and call is not None else call_hash


@dataclass(frozen=True)
class StaleOutcomeSettings(DetectorSettings):
    threshold: int = 3  # rounds ending in the same failure or rejection…
    span: int = 6  # …among the last N rounds
    window: int = 10  # the rounds kept: searches that found nothing and answers are counted in them
    #: The same check (one call) failing the same way this often among the last ``long_span`` rounds,
    #: other work between: the fixes between changed nothing it shows (0: off).
    check_threshold: int = 3
    long_span: int = 30
    #: A harness's refusals of the reply (or its errors) in a row, with no action between.
    in_a_row: int = 4
    #: Searches that found nothing (each for anything) among the last ``window`` rounds.
    empty_threshold: int = 8
    #: The same substantial answer to different calls, with no edit since the first (0: off).
    answer_threshold: int = 4
    #: Searches of one place (the same tool arguments but the term) that found nothing, among the last ``window``.
    place_threshold: int = 4
    #: Searches that found nothing, each looking for a name another of them looked for, among the last ``window``.
    name_threshold: int = 4


class StaleOutcome(Detector[StaleOutcomeSettings]):
    name = "stale_outcome"
    title = "Stale outcomes"
    Settings = StaleOutcomeSettings
    kinds = frozenset({Kind.TOOL_RESULT, Kind.MESSAGE, Kind.COMPACTION})
    # A harness's refusal may arrive as a user message: it is a round, not a
    # person taking over (and a person repeating the same failing request
    # is stuck too).
    resets_on_user_turn = False
    presets = {
        "conservative": {
            "threshold": 4,
            "span": 8,
            "in_a_row": 5,
            "empty_threshold": 9,
            "answer_threshold": 6,
            "place_threshold": 5,
            "name_threshold": 5,
            "check_threshold": 4,
        },
        "aggressive": {
            "threshold": 3,
            "span": 10,
            "in_a_row": 3,
            "empty_threshold": 6,
            "answer_threshold": 3,
            "place_threshold": 3,
            "name_threshold": 3,
        },
    }

    def __init__(self, settings: StaleOutcomeSettings | None = None):
        super().__init__(settings)
        #: Harness refusals of replies in a row (no tool result between): (key, count, evidence).
        self.refusals: tuple[str, int, tuple[EventRef, ...]] = ("", 0, ())
        # The last rounds (see _Round); a success takes a slot as None.
        self.rounds: deque[_Round] = deque(
            maxlen=CALLS_PER_ROUND * max(self.settings.window, self.settings.span, self.settings.long_span)
        )
        #: The number of the latest round (a reply's calls made together are one round).
        self.round_number = 0
        #: The last result's round (its call's reply, the call's and the result's seq).
        self.last_round: tuple[object, int, int] | None = None
        #: The last user messages (normalised, evidence), and whether the agent acted since the last.
        self.requests: deque[tuple[str, frozenset[str], EventRef]] = deque(maxlen=self.settings.window)
        self.acted = False
        #: Whether a tool result came since the last request kept (the agent worked on it, not only
        #: answered), and whether the person has said nothing since that request.
        self.worked = False
        self.open = False
        #: Searches that found nothing, what and where they looked for (analysis/sought.py), the latest last.
        self.misses: deque[tuple[Sought, _Round]] = deque(maxlen=self.rounds.maxlen)
        #: The name the latest warning's misses looked for ("": not such a warning).
        self.missed_name = ""
        #: Results seen this session (hashes, the last SEEN_RESULTS), and whether one was new since the last request.
        self.seen: dict[int, None] = {}
        self.learned = False
        #: The round number when the latest user message came (a request, a role's handoff).
        self.turn_round = 0

    def reset(self) -> None:
        self.rounds.clear()
        self.misses.clear()
        self.round_number = 0
        self.refusals = ("", 0, ())
        self.last_round = None
        self.requests.clear()
        self.acted = False
        self.worked = self.open = False
        self.seen.clear()
        self.learned = False
        self.turn_round = 0

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        outcome: Outcome | None
        if event.kind is _MESSAGE:
            return self._refusal(event)
        if event.kind is Kind.COMPACTION:
            self.requests.clear()  # the harness re-posts the task after it: no one asked again
            return None
        if event.call is None or (view.tool_overrides and view.exempt(event.tool)):
            return None
        self.refusals = ("", 0, ())  # the agent acted: a refusal before it was a slip
        self.acted = self.worked = True
        self._note_result(event)
        outcome = outcome_of(event)
        call_hash = hash(call_key(event.call))
        rounds = self.rounds
        sibling = self._next_round(event)
        number = self.round_number
        if is_edit(event.call):
            self._forget_answers()  # after an edit, the same answer may be the work's
        if outcome is None and self.settings.answer_threshold:
            outcome = answer_of(event)
        elif outcome is not None and outcome.kind == EMPTY:
            place = place_answered(event.call, event.content)
            if place is not None:  # a miss in one place is told apart from misses elsewhere
                outcome = outcome._replace(key=f"{outcome.key}{PLACE}{digest(place)}")
        if outcome is None:
            rounds.append((None, "", 0, None, _NO_LINES, number))
            return None
        call_hash = _question(event.call, outcome, call_hash)
        if sibling and outcome.kind != ANSWER and rounds and rounds[-1][0] == outcome.key:
            # One reply's calls made together, failing alike: one attempt (an
            # answer is not: two questions in one reply answered alike were asked twice).
            return None
        self._keep(
            (outcome.key, outcome.kind, call_hash, ref(event.call or event), outcome.body, number), event
        )
        same, stale, threshold, window = self._judge(
            outcome, view.threshold(event.tool, self.settings.threshold)
        )
        if stale > 1:
            view.note_similarity(self.name, min(1.0, stale / threshold))
        if stale < threshold:
            return None
        return [self._detection(event, outcome, same, threshold, stale, window)]

    def _keep(self, round_: _Round, result: Event) -> None:
        """Keep a round, and a search that found nothing with what and where it looked."""
        self.rounds.append(round_)
        if round_[1] == EMPTY:
            self.misses.append((sought(result.call), round_))

    def _next_round(self, result: Event) -> bool:
        """Number ``result``'s round: True when its call was made in the
        same reply as the result before (one round), else a new round begins."""
        before, self.last_round = self.last_round, round_of(result)
        sibling = same_round(before, self.last_round)
        if not sibling:
            self.round_number += 1
        return sibling

    def _judge(self, outcome: Outcome, threshold: int) -> tuple[list[_Round], int, int, int]:
        """The rounds alike to the latest (``outcome``), how many of them
        brought nothing new, the count that warns, and how many rounds back
        they were looked for."""
        settings = self.settings
        if outcome.kind == EMPTY:
            return self._judge_empty(outcome)
        if outcome.kind == ANSWER:
            same, back = self._alike(outcome.key, settings.window)
            # Different questions, one answer: the same call again is exact_repeat's.
            stale = len(same) if len({r[2] for r in same}) >= 3 else 0
            return same, stale, settings.answer_threshold, back
        same, back = self._alike(outcome.key, settings.span)
        # One call repeated with one failure is exact_repeat's (and nudged there); a
        # refusal is not: what it echoes of each attempt differs where the refusal does not.
        stale = _stale(same) if outcome.kind == REJECTED or len({r[2] for r in same}) > 1 else 0
        if stale < threshold and settings.check_threshold:
            spread, far = self._alike(outcome.key, settings.long_span)
            # Far apart, only this turn's rounds: a failure before the request is what it asks about.
            spread = [r for r in spread if r[5] > self.turn_round]
            check = _checked_again(spread, self.rounds, outcome.key)
            if _stale(check) >= settings.check_threshold:
                return check, _stale(check), settings.check_threshold, far
        return same, stale, threshold, back

    def _alike(self, key: str | None, back: int) -> tuple[list[_Round], int]:
        """The results of the last ``back`` rounds (one reply's calls are one
        round) whose outcome is ``key`` (any empty search for ``None``), and
        how many rounds back that reached."""
        oldest = self.round_number - back
        same = []
        first = self.round_number
        for round_ in reversed(self.rounds):
            if round_[5] <= oldest:
                break
            first = round_[5]
            if round_[0] == key if key is not None else round_[1] == EMPTY:
                same.append(round_)
        same.reverse()
        return same, self.round_number - first + 1

    def _judge_empty(self, outcome: Outcome) -> tuple[list[_Round], int, int, int]:
        """:meth:`_judge` for a search that found nothing."""
        settings = self.settings
        if PLACE in outcome.key and settings.place_threshold:
            # Misses for different things in one place, again and again: the
            # place (or how it is named) is wrong; the same call again is exact_repeat's.
            here, back = self._alike(outcome.key, settings.window)
            if len(here) >= settings.place_threshold and len({r[2] for r in here}) >= 3:
                return here, len(here), settings.place_threshold, back
        self.missed_name = ""
        if settings.name_threshold:
            # Misses, again and again, of a name looked for before in that place: it is not
            # there (or not spelled so); the same call again is exact_repeat's.
            named, back, name = self._missed_again(settings.window)
            if len({r[5] for r in named}) >= settings.name_threshold and len({r[2] for r in named}) >= 3:
                self.missed_name = name
                return named, len({r[5] for r in named}), settings.name_threshold, back
        same, back = self._alike(None, settings.window)
        # Rounds that found nothing: one reply's searches for different things are one guess.
        return same, len({r[5] for r in same}), settings.empty_threshold, back

    def _missed_again(self, back: int) -> tuple[list[_Round], int, str]:
        """The misses of the last ``back`` rounds that looked for a name the latest
        miss looked for, in the place it looked, how many rounds back the first of
        them was, and the name most of them looked for."""
        if not self.misses:
            return [], 0, ""
        latest = self.misses[-1][0]
        oldest = self.round_number - back
        named = [
            (looked, r)
            for looked, r in self.misses
            if r[5] > oldest and looked.names & latest.names and looked.same_place(latest)
        ]
        if not named:
            return [], 0, ""
        name = max(sorted(latest.names), key=lambda n: sum(n in looked.names for looked, _ in named))
        return [r for _, r in named], self.round_number - named[0][1][5] + 1, name

    def _forget_answers(self) -> None:
        rounds = self.rounds
        for index, round_ in enumerate(rounds):
            if round_[1] == ANSWER:
                rounds[index] = (None, "", 0, None, _NO_LINES, round_[5])

    def _refusal(self, message: Event) -> list[Detection] | None:
        """A harness refusing the reply ("No tool calls found…"): refusals count
        only in a row -- when the agent acts between them and its actions
        bring new outcomes, a refusal was a slip, not a loop."""
        outcome = reply_outcome(message)
        if outcome is None:
            return self._request(message)  # what a person says is not a round…
        key, count, cited = self.refusals
        if key != outcome.key:
            count, cited = 0, ()
        cited = (*cited[-11:], ref(message))
        count += 1
        self.refusals = (outcome.key, count, cited)
        if count < self.settings.in_a_row:
            return None
        same = [(outcome.key, outcome.kind, 0, cite, _NO_LINES, 0) for cite in cited]
        return [self._detection(message, outcome, same, self.settings.in_a_row, count, count)]

    def _note_result(self, result: Event) -> None:
        """Whether the agent learned something since the last request: a result
        that is no acknowledgement and that this session has not seen before."""
        if is_acknowledgement(result):
            return
        seen = self.seen
        key = hash(normalise(result.content[:REQUEST_RESULT_CHARS], limit=REQUEST_RESULT_CHARS))
        if key in seen:
            return
        self.learned = True
        seen[key] = None
        if len(seen) > SEEN_RESULTS:
            del seen[next(iter(seen))]

    def _request(self, message: Event) -> list[Detection] | None:
        """…but the same message again after the agent answered it (a person
        pasting the same complaint after each fix, a hook repeating itself)
        says the agent's rounds changed nothing: the outcome is not new."""
        if message.role != "user":
            self.acted = self.acted or message.role == "assistant"
            return None
        self.turn_round = self.round_number
        key = normalise(message.content)
        acted, self.acted = self.acted, False
        learned, self.learned = self.learned, False
        requests = self.requests
        errors = quoted_errors(message.content) if len(key) >= MIN_ANSWER_CHARS else frozenset()
        if self._cleared_up(key, errors, acted):
            requests.pop()
        if len(key) < MIN_ANSWER_CHARS:
            return None
        if learned:
            requests.clear()  # the work since the last request brought something new
        if requests and requests[-1][0] == key and not acted:
            return None  # sent twice with nothing between: one request
        requests.append((key, errors, ref(message)))
        self.worked, self.open = False, True
        complaint, alike = key, [cite for other, _, cite in requests if other == key]
        for error in errors:  # the same error quoted again, whatever is around it
            quoting = [cite for _, quoted, cite in requests if error in quoted]
            if len(quoting) > len(alike):
                complaint, alike = error, quoting
        if len(alike) < self.settings.threshold:
            return None
        shown = message.content.strip()[:200] if complaint == key else complaint
        outcome = Outcome(FAILURE, REQUEST + complaint, shown)
        same = [(outcome.key, FAILURE, 0, cite, _NO_LINES, 0) for cite in alike]
        return [self._detection(message, outcome, same, self.settings.threshold, len(alike), len(requests))]

    def _cleared_up(self, key: str, errors: frozenset[str], acted: bool) -> bool:
        """Whether the person's first message after the last request kept moves on from it
        after the agent answered it in words alone ("can you restate the question?",
        restated, then "C"): it was cleared up, not work that failed, and the same words
        later are about the next thing.  A copy of it, or the same error quoted, is no
        moving on; nor is anything after a tool result (the agent worked on it)."""
        opened, self.open = self.open, False
        if not (opened and acted and self.requests) or self.worked:
            return False
        last, quoted, _ = self.requests[-1]
        return last != key and not errors & quoted

    def _detection(
        self,
        event: Event,
        outcome: Outcome,
        same: Sequence[_Round],
        threshold: int,
        count: int,
        window: int,
    ) -> Detection:
        """The detection of ``count`` of the last ``window`` rounds alike (``same``)."""
        calls = len({r[2] for r in same})
        what, advice, pattern = _wording(outcome, same, self.missed_name)
        return Detection(
            detector=self.name,
            level=Level.WARN,
            score=min(1.0, len(same) / (threshold + 2)),
            message=f"{count} of the last {window} rounds ended in {what}"
            + (f" ({calls} different calls)" if calls > 1 else "")
            + f": {outcome.shown[:80]!r}",
            pattern=pattern,
            count=count,
            tool=event.tool,
            summary=f"ended {count} of your last {window} rounds in {what}",
            advice=advice,
            evidence=evidence(r[3] for r in same if r[3] is not None),  # matching rounds all cite one
        )


def _wording(outcome: Outcome, same: Sequence[_Round], missed_name: str) -> tuple[str, str, str]:
    """What the rounds ended in, the advice, and the detection's pattern."""
    if outcome.kind == EMPTY:
        if missed_name:
            what = f"searches for {missed_name!r} that found nothing"
        elif PLACE in outcome.key and all(r[0] == outcome.key for r in same):
            what = "searches of one place that found nothing"
        else:
            what = "searches that found nothing"
        advice = (
            "Searching again will not find it: list what is there (ls, find, glob) "
            "or question the assumption that it exists."
        )
        return what, advice, "stale:empty"
    pattern = "stale:" + outcome.key[:200]
    if outcome.kind == ANSWER:
        advice = (
            "Asking again in other words gets the same answer: act on it "
            "(edit, decide, or say what you are unsure of) instead of checking again."
        )
        return "the same answer", advice, pattern
    if outcome.key.startswith(REQUEST):
        advice = (
            "The same message came back after each of your answers: what you changed did not "
            "change what they see. Ask what they see, or try another approach."
        )
        return "the same message from the user", advice, pattern
    advice = (
        "The outcome is the same whatever you change: read it and fix its cause, "
        f"or stop and say what blocks you ({outcome.shown[:100]})."
    )
    return ("rejections" if outcome.kind == REJECTED else "the same failure"), advice, pattern
