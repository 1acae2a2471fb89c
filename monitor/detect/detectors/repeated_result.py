"""Repeated results: different calls, the same failure, over and over.

Five different ways of starting a program, each ending in the same
``ModuleNotFoundError``: the calls differ, so the call detectors stay quiet,
but the failure does not.  Failures are compared by their signature (the last
exception line of a traceback, or the whole short message; digits dropped), so
tracebacks whose frames and line numbers differ still match.

Searches for *different* things that each find nothing ("No matches found",
a grep without a match) are exploring, not a loop: until
``empty_handed_threshold`` of them (default 8, the whole window: every one
of the last 8 results) they are a ``notice`` at most, one of them made twice
included.  A search made a third time is a repeat and keeps the ordinary
threshold (and ``exact_repeat`` sees it too).

Successes do not count by default: the same "updated successfully", "Plan
updated" or empty output after many different edits is work getting done, and
a parallel batch where one call failed and its siblings were cancelled is one
failure, not many.  Failures that say nothing but "exit code 1" do not count
either (``grep -q`` over many files).  Calls one reply made together (in
parallel: four searches of one reply, each "ripgrep command failed") that fail
alike are one attempt, as for ``stale_outcome`` and ``failure_cascade``
(:mod:`~monitor.detect.analysis.progress`).  ``failures_only = false`` also compares
substantial successes (exact text), for agents whose tools never report errors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from monitor.detect.analysis.failures import comparable_failure, shown_failure
from monitor.detect.analysis.progress import round_of, same_round
from monitor.detect.analysis.signatures import (
    EMPTY_HANDED,
    failure_signature,
    is_acknowledgement,
    not_an_outcome,
)
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import call_key, clip

#: A success shorter than this says too little to be "the same result".
MIN_SUCCESS_CHARS = 80
_TOOL_RESULT = Kind.TOOL_RESULT


@dataclass(frozen=True)
class RepeatedResultSettings(DetectorSettings):
    threshold: int = 4  # results with the same outcome…
    window: int = 8  # …among the last N results
    min_distinct_calls: int = 3  # from at least this many different calls
    failures_only: bool = True  # false: identical substantial successes count too
    #: Different searches that all find nothing: a notice from ``threshold``, warn from here.
    empty_handed_threshold: int = 8


def _most_repeated(same: list[tuple[int, EventRef]]) -> int:
    """How often the call made most often among ``same`` was made."""
    counts: dict[int, int] = {}
    for call, _ in same:
        counts[call] = counts.get(call, 0) + 1
    return max(counts.values(), default=0)


class RepeatedResult(Detector[RepeatedResultSettings]):
    name = "repeated_result"
    title = "Repeated results"
    Settings = RepeatedResultSettings
    kinds = frozenset({Kind.TOOL_RESULT})
    presets = {
        "conservative": {"threshold": 5, "min_distinct_calls": 4},
        "aggressive": {"threshold": 3, "min_distinct_calls": 2},
    }

    def __init__(self, settings: RepeatedResultSettings | None = None):
        super().__init__(settings)
        # (outcome or None, hash of the call key, the call's evidence) of the
        # last N results; a success takes a slot too, so failures spread thin
        # do not add up.  Successes keep no evidence: they are never cited.
        self.results: deque[tuple[str | None, int, EventRef | None]] = deque(maxlen=self.settings.window)
        #: The outcome counted beyond the window, and how often it came while
        #: it never left the window (a count that stops at the window's size
        #: would freeze while the loop goes on).
        self.run_outcome: str | None = None
        self.run_total = 0
        #: The last result's round (progress.round_of): one reply's calls are one attempt.
        self.round: tuple[object, int, int] | None = None

    def reset(self) -> None:
        self.results.clear()
        self.run_outcome, self.run_total = None, 0
        self.round = None

    def window(self) -> list[Event]:
        return []  # the results compared are summarized, not kept

    def _success(self, event: Event) -> str | None:
        """The outcome of a result that is no failure, when successes count."""
        if event.is_error or is_acknowledgement(event) or len(event.content.strip()) < MIN_SUCCESS_CHARS:
            return None
        return "R:" + clip(event.content)

    def _track_run(self, outcome: str, same: int) -> None:
        """Count ``outcome``'s run beyond the window (``same``: how often it is in it)."""
        if same < 2:
            if outcome == self.run_outcome:
                self.run_outcome = None  # it had left the window: a new run
        elif outcome == self.run_outcome:
            self.run_total += 1
        else:
            self.run_outcome, self.run_total = outcome, same

    def _joins_reply(self, event: Event, outcome: str | None) -> bool:
        """Whether ``event`` came from the same reply as the result before
        and ended the same way (one reply's parallel calls: one attempt)."""
        before, self.round = self.round, round_of(event)
        results = self.results
        return (
            outcome is not None
            and bool(results)
            and results[-1][0] == outcome
            and same_round(before, self.round)
        )

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        call = event.call
        if (
            event.kind is not _TOOL_RESULT
            or call is None
            or (view.tool_overrides and view.exempt(event.tool))
        ):
            return None
        outcome = comparable_failure(event)
        if outcome is None and not self.settings.failures_only:
            outcome = self._success(event)
        results = self.results
        if self._joins_reply(event, outcome):
            return None  # one reply's calls made together, failing alike: one attempt
        if outcome is None:
            # A cancelled sibling or a refused call is not this call's result
            # and takes no slot.  (Neither has an outcome: ``failure_signature``
            # leaves them out, and they are errors.)
            if not event.is_error or not not_an_outcome(event):
                results.append((None, 0, None))
            return None
        results.append((outcome, hash(call_key(call)), ref(call)))
        # (A result with an outcome always keeps its call's evidence.)
        same = [(c, e) for o, c, e in results if o == outcome and e is not None]
        self._track_run(outcome, len(same))
        calls = {c for c, _ in same}
        if len(same) > 1:
            view.note_similarity(self.name, min(1.0, len(same) / self.settings.threshold))
        threshold = view.threshold(event.tool, self.settings.threshold)
        if len(same) < threshold or len(calls) < self.settings.min_distinct_calls:
            return None
        return [self._detection(event, outcome, same, calls, threshold)]

    def _detection(
        self,
        event: Event,
        outcome: str,
        same: list[tuple[int, EventRef]],
        calls: set[int],
        threshold: int,
    ) -> Detection:
        """The detection of ``same`` results alike after ``calls`` different calls."""
        failure = outcome[:2] != "R:" or failure_signature(event) is not None
        count = max(len(same), self.run_total if outcome == self.run_outcome else 0)
        what = "test failure" if outcome[:2] == "T:" else "error" if outcome[:2] == "E:" else "result"
        shown = shown_failure(outcome) if failure else " ".join(event.content.split())
        empty_handed = failure and any(phrase in shown.lower() for phrase in EMPTY_HANDED)
        level = Level.WARN
        if (
            empty_handed
            and _most_repeated(same) <= 2
            and len(same) < max(threshold, self.settings.empty_handed_threshold)
        ):
            level = Level.NOTICE  # different searches (one made twice at most): exploring, so far
        if empty_handed:
            advice = (
                "You keep looking where it is not: search for it (find, glob, grep) "
                "instead of guessing another name or place."
            )
        else:
            advice = f"The {what} is the same whatever you change: read it and fix its cause ({shown[:100]})."
        return Detection(
            detector=self.name,
            level=level,
            score=min(1.0, len(same) / (threshold + 2)),
            message=f"{len(calls)} different calls ended in the same {what} {count} times: {shown[:80]!r}",
            pattern=f"result:{outcome[:200]}",
            count=count,
            tool=event.tool,
            summary=f"tried {len(calls)} different calls that all ended in the same {what}",
            advice=advice,
            evidence=evidence(e for _, e in same),
        )
