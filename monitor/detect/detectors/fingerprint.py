"""Fingerprints: the same call, loosely keyed, made again and again in a row.

Two tiers (design note 003): *exact* — the same tool and arguments N times in
a row (default 3) — and *fuzzy* — the same fingerprint (tool + primary
arguments, shell file reads folded to ``file_read:PATH``) N times in a row
(default 4).  Consecutive means no other call in between.  An exact
repeat only extends the streak while its outcome stays the same.  A fuzzy
repeat extends it while its result shows nothing new — no line that the
earlier results of the run did not already show — so ``cat foo``, ``head
foo``, ``tail foo``, ``cat foo`` is a loop although the four outputs differ,
while paging through a file with a moving ``sed -n`` range, or polling a log
that grows, is not; nor are ranges that come back empty (past the end of the
file): an empty result shows nothing, which is no evidence of nothing new.  The fuzzy tier also ignores streaks answered by plain
acknowledgements (successive different edits of one file).
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.analysis.calls import (
    KEY_CHARS,
    AwaitedRepeat,
    AwaitsRepeats,
    CallRecord,
    attempts,
    call_record,
    events,
    judged_now,
)
from monitor.detect.analysis.signatures import fingerprint
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence
from monitor.events import Event, Kind, Level

_TOOL_RESULT = Kind.TOOL_RESULT
#: A tool name shorter than this, without a colon, makes the first KEY_CHARS
#: characters of its fingerprints ("tool:…") differ from any other tool's.
_PLAIN_TOOL = KEY_CHARS - 1


def _stale_tail(records: list[CallRecord]) -> list[CallRecord]:
    """The longest tail of a same-fingerprint run in which no result showed a
    line the run had not shown before (its first record is the baseline).

    A call still running just before the current one neither extends nor
    breaks the tail; an older call whose result never came breaks it."""
    seen = 0
    start = 0
    for index, record in enumerate(records):
        if not record.done:
            if index != len(records) - 1:
                start, seen = index + 1, 0
            continue
        marks = record.marks()
        if marks & ~seen or index == start or not marks:
            # Something new -- or nothing at all (a range past the end of a
            # file), which is no evidence of nothing new: the run starts over.
            start = index
        seen |= marks
    return records[start:]


@dataclass(frozen=True)
class FingerprintSettings(DetectorSettings):
    threshold: int = 3  # identical calls in a row
    fuzzy_threshold: int = 4  # same fingerprint in a row


def _exact_streak(current: CallRecord, records: list[CallRecord]) -> list[CallRecord]:
    """The exact tier: identical calls at the end of the run (the latest
    first), while their outcomes stay the same (a poll whose output moves is progress)."""
    streak = [current]
    reference: CallRecord | None = None
    for record in reversed(records):
        if not record.same_call(current):
            break
        if reference is not None and not record.same_outcome(reference):
            break
        if reference is None or not reference.done:
            reference = record
        streak.append(record)
    return streak


class Fingerprint(Detector[FingerprintSettings], AwaitsRepeats):
    name = "fingerprint"
    title = "Fingerprint"
    Settings = FingerprintSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    presets = {
        "conservative": {"threshold": 4, "fuzzy_threshold": 5},
        "aggressive": {"threshold": 2, "fuzzy_threshold": 3},
    }

    def __init__(self, settings: FingerprintSettings | None = None):
        super().__init__(settings)
        #: The current run: calls with one fingerprint, in a row, the latest
        #: ``kept`` of them.  (A list, not a deque: most runs are one call,
        #: and a new run is a new list of one, smaller than a deque's block.)
        self.streak: list[CallRecord] = []
        self.kept = max(self.settings.threshold, self.settings.fuzzy_threshold) + 8
        #: Calls in the run, those no longer kept too (its count goes on past ``kept``).
        self.run = 0
        #: The run's fingerprint: its hash and its first KEY_CHARS characters.
        self.print_hash = 0
        self.print_key = ""
        #: The run's tool (``?`` for none), and whether no other tool's
        #: fingerprint can share the first KEY_CHARS characters of its own.
        self.print_tool = "?"
        self.print_plain = False
        #: The run's only call while its fingerprint is not taken yet (until
        #: the next call: most are of another tool, which needs none).
        self.first: Event | None = None
        #: An exact run at its threshold waiting for its results (see calls.py).
        self.awaited: AwaitedRepeat | None = None

    def reset(self) -> None:
        self.streak = []
        self.run = 0
        self.first = None
        self.awaited = None

    def window(self) -> list[Event]:
        return events(self.streak)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        # (Results reach the records through the engine: see calls.py.)
        if event.kind is _TOOL_RESULT:
            if self.awaited is None:
                return None  # no repeat awaits its results (most results)
            proven = self.proven_repeat(event)
            if proven is None:
                return None
            key, fuzzy_needed = proven.extra
            return self._detection("exact", key, proven.records, fuzzy_needed)
        if view.tool_overrides and view.exempt(event.tool):
            return None
        current = call_record(event)
        run = self._extend_run(event, current)
        if run is None:
            return None
        key, records = run
        if current.waited:
            return None  # a poll after a wait: the waiting budget's (waiting.py)
        view.note_similarity(self.name, 0.9)
        return self._judge(event, view, key, current, records)

    def _extend_run(self, event: Event, current: CallRecord) -> tuple[str, list[CallRecord]] | None:
        """Add the call to the run of its fingerprint: the fingerprint and the
        run's calls before it, or ``None`` when it starts a new run."""
        history = self.streak
        tool = event.tool or "?"
        plain = ":" not in tool and len(tool) < _PLAIN_TOOL
        if not history or (plain and self.print_plain and tool != self.print_tool):
            # Another tool than the run's (the common case), so another
            # fingerprint (it starts with "tool:"): a new run starts, and its
            # fingerprint is taken only once a call of the same tool follows.
            self.streak = [current]
            self.run = 1
            self.first = event
            self.print_tool, self.print_plain = tool, plain
            return None
        first = self.first
        if first is not None:
            self.first = None
            made = fingerprint(first)
            self.print_hash, self.print_key = hash(made), made[:KEY_CHARS]
        key = fingerprint(event)
        if hash(key) != self.print_hash or key[:KEY_CHARS] != self.print_key:
            # Not the fingerprint of the run: a new run starts.
            self.streak = [current]
            self.run = 1
            self.print_hash, self.print_key = hash(key), key[:KEY_CHARS]
            self.print_tool, self.print_plain = tool, plain
            return None
        records = history[:]
        history.append(current)
        if len(history) > self.kept:
            del history[0]
        self.run += 1
        return key, records

    def _judge(
        self, event: Event, view: SessionView, key: str, current: CallRecord, records: list[CallRecord]
    ) -> list[Detection] | None:
        """The run's detection, if its exact or its fuzzy tier is long enough."""
        exact_streak = _exact_streak(current, records)
        fuzzy = [current] + list(reversed(_stale_tail(records)))
        s = self.settings
        exact_needed = view.threshold(event.tool, s.threshold)
        fuzzy_needed = max(view.threshold(event.tool, s.fuzzy_threshold), exact_needed)
        awaited = None
        # A tier that reaches back to the run's oldest kept call goes on over the calls no longer kept.
        earlier = max(self.run - len(records) - 1, 0)
        # One reply's calls made together are one attempt: the agent saw no result between them.
        if attempts(exact_streak) >= exact_needed:
            if judged_now(exact_streak, current):
                self.awaited = None
                whole = earlier if len(exact_streak) > len(records) else 0
                return self._detection("exact", key, exact_streak, fuzzy_needed, whole)
            # Fewer than two results back (or the run broke at a differing
            # result: a poll that moved), or a call not sent as the others:
            # judged once they are.
            awaited = AwaitedRepeat(exact_streak, len(exact_streak), exact_needed, (key, fuzzy_needed))
        if attempts(fuzzy) >= fuzzy_needed and not any(r.done and r.acknowledged() for r in fuzzy):
            # Several edits of one file each answered "updated" are work, not a loop.
            return self._detection(
                "fuzzy", key, fuzzy, fuzzy_needed, earlier if len(fuzzy) > len(records) else 0
            )
        if awaited is not None:
            self.awaited = awaited
        return None

    def _detection(
        self, tier: str, key: str, involved: list[CallRecord], fuzzy_needed: int, earlier: int = 0
    ) -> list[Detection]:
        """The detection of a run of ``involved`` calls (the latest first)
        with fingerprint ``key``: identical calls whose results agree
        (``exact``) or calls on one target showing nothing new (``fuzzy``),
        after ``earlier`` calls of the run no longer kept."""
        count = attempts(involved) + earlier
        tool = involved[0].tool
        what = key.split(":", 1)[1] if ":" in key else key
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (fuzzy_needed + 2)),
                message=(
                    f"{tool} called {count} times in a row "
                    + (
                        "with identical arguments and the same result"
                        if tier == "exact"
                        else f"on the same target ({what[:60]}) and nothing new in the results"
                    )
                ),
                pattern=f"{tier}:{key[:200]}",
                count=count,
                tool=tool,
                summary=(
                    f"called {tool} with the same arguments {count} times in a row"
                    if tier == "exact"
                    else f"called {tool} on the same target {count} times in a row"
                ),
                advice="Nothing changed between these calls; use what the last result told you.",
                evidence=evidence(r.ref for r in reversed(involved)),
            )
        ]
