"""Test-fix cycles: the same tests failing the same way despite the edits.

Consecutive failing test runs (pytest, npm/yarn/pnpm test, jest,
vitest, go test, cargo test, make test, unittest, rspec, …) that fail *the same
way* although the agent edits in between — the edits are not working, so the
nudge is design note 003's "step back and rethink".  An edit-test cycle whose
failure count falls, whose passing count rises or whose failing tests or
errors change is progress and starts a new streak; a passing run ends it.
Runs one reply made together (in parallel, or ``meta["reply"]``:
:mod:`~monitor.detect.analysis.progress`) failing the same way are one run.

A run fails when its result has ``is_error`` or reports a nonzero exit code
(see :mod:`monitor.detect.analysis.failures`), or when its output counts failures
or ends in a failing verdict (:mod:`~monitor.detect.analysis.testruns`).  A run
reporting the streak's failing tests, by name and with the same counts, among
other lines (``pytest -s``, a debug print) is a look at the same failure: it
neither counts nor breaks the streak.  So is a run after an edit that fails
the streak's way but prints a line no run of the streak printed: the edit took
effect (:func:`~monitor.detect.analysis.outcomes.printed_lines` leaves out the
lines that quote source code, which an edit changes by itself).  It warns at 3 in a row — design
note 003's first nudge comes at 3 repetitions — so the nudge arrives before the
hard consecutive-failure limit of 5 (design note 000, the ``limits`` detector).
Failing commands that are not test runs are ``failure_cascade``'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.analysis.edits import is_edit
from monitor.detect.analysis.failures import run_outcome
from monitor.detect.analysis.outcomes import OUTCOME_CHARS, body_lines, printed_lines
from monitor.detect.analysis.progress import round_of, same_round
from monitor.detect.analysis.testruns import RunOutcome, is_test_run
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import TOOL_CALL, TOOL_RESULT, Event, EventRef, Kind, Level
from monitor.text import clip

#: Events kept as evidence per streak (calls and results), as references:
#: a test report may be megabytes.
EVIDENCE = 12
#: Line digests remembered per streak (what its runs have shown).
SHOWN_LINES = 1000
#: Runs of a streak whose printed lines are read only when a run after an edit
#: asks for them (:meth:`TestFix._took_effect`; most streaks: never), at most this many.
UNREAD = 8

RETHINK = (
    "Step back and rethink:\n"
    "1. Re-read the error messages carefully\n"
    "2. Consider whether your approach is fundamentally wrong\n"
    "3. Try a DIFFERENT fix strategy instead of iterating on the same one"
)
RERUN = "Re-running the tests without changing anything will not change the result."


@dataclass(frozen=True)
class TestFixSettings(DetectorSettings):
    threshold: int = 3  # warn at the Nth consecutive failing run with the same failure


class TestFix(Detector[TestFixSettings]):
    name = "test_fix"
    title = "Test-fix cycle"
    Settings = TestFixSettings
    presets = {"conservative": {"threshold": 5}, "aggressive": {"threshold": 2}}
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, settings: TestFixSettings | None = None):
        super().__init__(settings)
        self.events: deque[EventRef] = deque(maxlen=EVIDENCE)
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.signature = ""
        self.failures: int | None = None
        self.passed: int | None = None
        self.tests: tuple[str, ...] = ()
        #: The digests of the lines the streak's runs showed (outcomes.body_lines).
        self.shown: set[int] = set()
        #: ... and of those the program printed, not quoting source (outcomes.printed_lines).
        self.printed: set[int] = set()
        #: The streak's runs (their texts as printed_lines reads them) not in ``printed`` yet.
        self.unread: list[str] = []
        self.edits_since_run = 0
        self.edits_in_streak = 0
        self.round: tuple[object, int, int] | None = None  # the last failing run's (progress.round_of)
        self.events.clear()

    def window(self) -> Sequence[Event | EventRef]:
        return list(self.events)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        kind = event.kind
        if kind is TOOL_CALL:
            if self.count and is_edit(event):
                self.edits_since_run += 1
            return None
        if kind is not TOOL_RESULT:
            return None
        call = event.call
        if call is None:
            return None
        if not is_test_run(call) or (view.tool_overrides and view.exempt(call.tool)):
            return None
        outcome = run_outcome(event)
        if not outcome.failing:
            if self.count:  # (without a streak there is nothing to forget)
                self.reset()
            return None

        now = round_of(event)
        if self.count and outcome.signature == self.signature and same_round(self.round, now):
            # Runs one reply made together (in parallel) are one run of the cycle.
            self.events.append(ref(event))
            return None
        self.round = now
        if self._probe(outcome) or self._shows_new(event, outcome) or self._took_effect(event, outcome):
            # The same tests failing the same number of times, other lines
            # around them (`-s`, a debug print), the same failure shown
            # with lines no run of the streak showed and nothing edited, or
            # after an edit with lines printed that no run of the streak
            # printed: a look at the failure, which neither counts nor breaks the streak.
            self.edits_in_streak += self.edits_since_run
            self.edits_since_run = 0
            return None
        self._follow(outcome, view)
        self._remember(body_lines(event.content))
        self._remember_printed_later(event.content)
        self.events.append(ref(call))
        self.events.append(ref(event))

        threshold = view.threshold(call.tool, self.settings.threshold)
        if self.count < threshold:
            return None
        return [self._detection(call, outcome, threshold)]

    def _probe(self, outcome: RunOutcome) -> bool:
        """Whether a failing run with another signature reports the streak's
        failing tests, by name, with the same counts."""
        return (
            self.count > 0
            and outcome.signature != self.signature
            and bool(outcome.tests)
            and outcome.tests == self.tests
            and (outcome.failures, outcome.passed) == (self.failures, self.passed)
        )

    def _shows_new(self, result: Event, outcome: RunOutcome) -> bool:
        """Whether a run failing the streak's way, with no edit since the
        streak's last run, shows lines none of the streak's runs showed: the
        failing test alone or verbose, or run on the code with the changes
        stashed (is it pre-existing?) -- a look at the failure, not an attempt
        at a fix.  After an edit a changed line proves nothing: the traceback
        quotes the edited code.  Its lines join the streak's either way."""
        if (
            not self.count
            or self.edits_since_run
            or outcome.signature != self.signature
            or outcome.failures != self.failures
        ):
            return False
        lines = body_lines(result.content)
        new = not lines <= self.shown
        self._remember(lines)
        return new

    def _took_effect(self, result: Event, outcome: RunOutcome) -> bool:
        """Whether a run failing the streak's way after an edit printed lines
        no run of the streak printed (not lines quoting source code, which an
        edit changes by itself: :func:`~monitor.detect.analysis.outcomes.printed_lines`):
        the edit took effect (a debug print's output, another value), so the run
        is no repeat of the failure.  Its lines join the streak's either way."""
        if not self.count or not self.edits_since_run or outcome.signature != self.signature:
            return False
        self._read_unread()
        printed = printed_lines(result.content)
        new = not printed <= self.printed
        self._remember_printed(printed)
        self._remember(body_lines(result.content))
        return new

    def _remember(self, lines: frozenset[int]) -> None:
        if len(self.shown) < SHOWN_LINES:
            self.shown.update(lines)

    def _remember_printed(self, lines: frozenset[int]) -> None:
        if len(self.printed) < SHOWN_LINES:
            self.printed.update(lines)

    def _remember_printed_later(self, text: str) -> None:
        """A run's printed lines join ``printed`` when a run needs them (:meth:`_read_unread`)."""
        self.unread.append(clip(text, OUTCOME_CHARS))
        if len(self.unread) >= UNREAD:
            self._read_unread()

    def _read_unread(self) -> None:
        for text in self.unread:  # in order: ``printed`` is capped
            self._remember_printed(printed_lines(text))
        self.unread.clear()

    def _follow(self, outcome: RunOutcome, view: SessionView) -> None:
        """Extend the streak with a failing run, or start a new one."""
        progress = (
            outcome.failures is not None and self.failures is not None and outcome.failures < self.failures
        ) or (outcome.passed is not None and self.passed is not None and outcome.passed > self.passed)
        if self.count and outcome.signature == self.signature and not progress:
            self.count += 1
            self.edits_in_streak += self.edits_since_run
            view.note_similarity(self.name, 1.0)
        else:
            # First failure, or the failure changed: a new streak starts here.
            self.count = 1
            self.signature = outcome.signature
            self.edits_in_streak = 0
            self.events.clear()
            self.shown.clear()
            self.printed.clear()
            self.unread.clear()
        self.failures = outcome.failures
        self.passed = outcome.passed
        self.tests = outcome.tests
        self.edits_since_run = 0

    def _detection(self, call: Event, outcome: RunOutcome, threshold: int) -> Detection:
        what = outcome.headline or "the same error"
        if outcome.failures:
            what = f"{outcome.failures} failing: {what}"
        edits = self.edits_in_streak
        edited = (
            f" despite {edits} edit{'s' if edits != 1 else ''} in between"
            if edits
            else " with no edit in between"
        )
        return Detection(
            detector=self.name,
            level=Level.WARN,
            score=min(1.0, self.count / (threshold + 2)),
            message=f"{self.count} consecutive test runs failed the same way ({what[:120]}){edited}",
            pattern=f"tests:{self.signature}",
            count=self.count,
            tool=call.tool,
            # (completes "You've …": the runs, then how they failed, then the edits)
            summary=f"run the tests {self.count} times in a row, failing the same way each time,{edited}",
            advice=RETHINK if edits else RERUN + "\n" + RETHINK,
            evidence=evidence(self.events),
        )
