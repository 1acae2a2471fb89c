"""Similar arguments: the same tool retried with small spelling changes, same failure.

``grep fooBar`` → ``grep foobar`` → ``grep foo_bar``, all "No matches": the
agent varies the arguments slightly (normalized Levenshtein >= 0.8 on the
primary arguments, field by field for objects — design note 001, level 3) and
the outcome stays the same failure.  The check runs when a variant's result
is back: ``threshold`` variants whose results are known and agree, never a
guess at the one still running (two misses and a third try that then finds
it was a search, not a loop).

Not flagged: variants whose results differ (exploration), variants that
succeed (a success is an answer), and variants that differ only in a path,
file name, URL or number — ``git add a.py``, ``git add b.py``… or ``pytest
tests/test_a.py``, ``pytest tests/test_b.py``… is one command over many items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from monitor.detect.analysis.calls import CallRecord, attempts, call_record, events, made_record
from monitor.detect.analysis.failures import failed
from monitor.detect.analysis.shell import output_body
from monitor.detect.analysis.signatures import (
    arg_similarity,
    failed_silently,
    failure_signature,
    not_an_outcome,
    primary_args,
    primary_of,
    varies_only_in_items,
)
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence
from monitor.events import Event, Kind, Level

_TOOL_CALL, _TOOL_RESULT = Kind.TOOL_CALL, Kind.TOOL_RESULT

#: Failure signatures at least this similar (rapidfuzz ratio, 0-100) are "the
#: same failure": "No such file: src/foo" and "No such file: src/fo0".
SAME_FAILURE_RATIO = 90.0
#: Each chain keeps at most this many calls beyond its threshold.
CHAIN_SLACK = 6


@dataclass(frozen=True)
class SimilarArgsSettings(DetectorSettings):
    similarity: float = 0.8  # normalized Levenshtein, per field
    threshold: int = 3  # calls in the chain (the first plus its variants)
    window: int = 10  # calls of any tool the chain may span


def _failure(result: Event) -> str:
    """The comparable failure of a call's result, ``""`` for a result that is
    not a failure (which ends the retry story).  A record's ``failure`` is
    this, or ``None`` while the result is unknown."""
    if not result.is_error:  # (most results: only a short, empty-handed one has a signature)
        return failure_signature(result) or ""
    if not failed(result) and output_body(result.content):
        return ""  # a linter's report (pylint exiting 28): an answer, not a failure
    signature = failure_signature(result)
    if signature is not None:
        return signature
    if failed_silently(result):
        return "E:<no output>"
    return ""


def _same_failure(a: str, b: str) -> bool:
    return a == b or fuzz.ratio(a, b, score_cutoff=SAME_FAILURE_RATIO) >= SAME_FAILURE_RATIO


class _Tool:
    """One tool's retry story: the call number and the arguments of its
    latest call, the chain of calls each similar to the one before (other
    tools may come in between) ending there, and the pattern the chain was
    first reported under (the same loop keeps one name on the escalation
    ladder while its chain slides).  A chain whose latest call has left the
    window is over."""

    __slots__ = ("last", "args", "chain", "pattern")

    def __init__(self, last: int, args: Any, record: CallRecord):
        self.last = last
        self.args = args
        self.chain = [record]
        self.pattern: str | None = None


class SimilarArgs(Detector[SimilarArgsSettings]):
    name = "similar_args"
    title = "Similar arguments"
    Settings = SimilarArgsSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    presets = {
        "conservative": {"similarity": 0.85, "threshold": 5},
        "aggressive": {"similarity": 0.75},
    }

    def __init__(self, settings: SimilarArgsSettings | None = None):
        super().__init__(settings)
        #: Per tool, its story (one dict look-up a call: most calls only
        #: start a new story, and that is a few stores into it).
        self.tools: dict[str, _Tool] = {}
        self.calls = 0
        self.last_tool = ""

    def reset(self) -> None:
        self.tools.clear()

    def window(self) -> list[Event]:
        state = self.tools.get(self.last_tool)
        return events(state.chain) if state else []

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is _TOOL_RESULT:
            state = self._result(event)
            if state is None or (view.tool_overrides and view.exempt(event.tool)):
                return None
            threshold = view.threshold(state.chain[-1].tool, self.settings.threshold)
            if len(state.chain) < threshold or len({r.hash for r in state.chain}) < 2:
                return None
            return self._check(state, event, threshold)
        if event.kind is not _TOOL_CALL or (view.tool_overrides and view.exempt(event.tool)):
            return None
        self.calls += 1
        tool = self.last_tool = event.tool or ""
        record = call_record(event)
        state = self.tools.get(tool)
        if state is None:
            if len(self.tools) >= self.settings.window:
                self._expire()
            self.tools[tool] = _Tool(self.calls, event.args or {}, record)
            return None  # a chain of one call: nothing to check yet
        if not self._extends(state, event, record, view):
            return None
        threshold = view.threshold(event.tool, self.settings.threshold)
        chain = state.chain
        if len(chain) > threshold + CHAIN_SLACK:
            del chain[0]
        return None  # judged when its result is back

    def _result(self, event: Event) -> _Tool | None:
        """Note the comparable failure of a result of a call in its tool's
        chain; the chain, when that result is a failure to judge it by."""
        call = event.call
        state = self.tools.get(call.tool or "") if call is not None else None
        if call is None or state is None:
            return None
        record = made_record(call)
        if record is None or record.failure is not None:
            return None
        if event.is_error and not_an_outcome(event):
            return None
        # Mostly the chain's latest call; a record not in its chain is not judged.
        if state.chain[-1] is record or record in state.chain:
            record.failure = _failure(event)
            return state if record.failure else None
        return None

    def _extends(self, state: _Tool, event: Event, record: CallRecord, view: SessionView) -> bool:
        """Whether the call extends its tool's chain (else it starts a new one)."""
        # The arguments as they are: their primary part is only needed when
        # the next call of the tool is compared with this one (rarely).
        previous, state.last = state.last, self.calls
        before, state.args = state.args, event.args or {}
        chain = state.chain
        if self.calls - previous >= self.settings.window or chain[-1].failure == "":
            # Its last call left the window, or the last variant succeeded:
            # what comes next is a new story (the common case).
            state.pattern = None
            if len(chain) == 1:
                chain[0] = record
            else:
                state.chain = [record]
            return False
        before, now = primary_of(before), primary_args(event)
        score = arg_similarity(before, now, self.settings.similarity)
        if score < self.settings.similarity or varies_only_in_items(before, now):
            # A different attempt, or the same command on the next item.
            state.pattern = None
            state.chain = [record]
            return False
        view.note_similarity(self.name, score)
        chain.append(record)
        return True

    def _expire(self) -> None:
        """Drop every tool whose last call has left the window (bounds memory
        when an agent uses many different tools)."""
        horizon = self.calls - self.settings.window
        tools = self.tools
        for tool in [t for t, state in tools.items() if state.last <= horizon]:
            del tools[tool]

    def _check(self, state: _Tool, event: Event, threshold: int) -> list[Detection] | None:
        # The streak of variants that all failed the same way, counted back
        # from the newest whose result is known (a later one may still be running).
        streak: list[CallRecord] = []
        reference: str | None = None
        for record in reversed(state.chain):
            failure = record.failure
            if failure is None and not streak:
                continue  # sent after it, still running: no evidence either way
            if not failure or (reference is not None and not _same_failure(reference, failure)):
                break
            reference = reference or failure
            streak.append(record)
        if reference is None:
            return None
        involved = list(reversed(streak))
        count = attempts(involved)  # one reply's calls made together: one attempt
        if count < threshold or len({r.hash for r in involved}) < 2:
            return None
        shown = reference[2:]
        pattern = state.pattern
        if pattern is None:
            pattern = state.pattern = f"similar:{event.tool}:{involved[0].key[:160]}"
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (threshold + 2)),
                message=f"{event.tool} retried {count} times with slightly different arguments, "
                f"same failure each time ({shown[:60]!r})",
                pattern=pattern,
                count=count,
                tool=event.tool,
                summary=f"retried {event.tool} {count} times with slightly different arguments "
                "and got the same failure",
                advice="Small variations of the same arguments keep failing the same way; "
                "question the assumption behind them instead.",
                evidence=evidence(r.ref for r in involved),
            )
        ]
