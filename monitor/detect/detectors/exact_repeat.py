"""Exact repeat: the same tool call again and again within a short window.

A call is keyed by its tool name and canonical arguments (sorted keys, white
space normalized, call ids and timestamps dropped).  The 3rd occurrence in the
last 10 calls warns, but only while the repeats keep getting the same result:
a poll whose output moves is progress, not a loop.  The check runs when the
call is made, so a stuck agent is flagged before its next result arrives --
once two of the repeats' results are back and agree.  A repeat that reaches
its threshold sooner (a threshold of 2, or calls made in parallel) is judged
when its results are back: flagged if they agree, dropped if they differ.

A call whose inputs were rewritten since it last ran is a new call, not a
repeat (:mod:`monitor.detect.analysis.inputs`): ``python fix.py`` after ``cat >
fix.py`` wrote another script, a test script re-run after edits, ``sed -n``
of a file after ``sed -i`` on it, ``git diff > patch.txt`` after edits.  An
empty result (``cp``, a redirect) is no evidence that nothing changed.  A
write that names its file (``cat > fix.patch << EOF``) repeats whatever runs
in between unless that rewrites the same file: restoring a backup between
different edits of its target is a revert cycle, judged by ``retry_rounds``.

The window holds compact call records (:mod:`monitor.detect.analysis.calls`) and
counts them by key, so a call that repeats nothing costs one lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.analysis.calls import (
    AwaitedRepeat,
    AwaitsRepeats,
    CallRecord,
    CallWindow,
    call_record,
    events,
    judged_now,
)
from monitor.detect.analysis.inputs import CallIO, call_io
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence
from monitor.events import Event, Kind, Level

_TOOL_RESULT = Kind.TOOL_RESULT


@dataclass(frozen=True)
class ExactRepeatSettings(DetectorSettings):
    window: int = 10  # the last N tool calls
    threshold: int = 3  # warn at the Nth identical call


class ExactRepeat(Detector[ExactRepeatSettings], AwaitsRepeats):
    name = "exact_repeat"
    title = "Exact repeat"
    Settings = ExactRepeatSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    provides_window = True
    presets = {
        "conservative": {"window": 15, "threshold": 5},
        "aggressive": {"window": 10, "threshold": 2},
    }

    def __init__(self, settings: ExactRepeatSettings | None = None):
        super().__init__(settings)
        self.calls = CallWindow(self.settings.window)
        #: A repeat at its threshold waiting for its results (see calls.py).
        self.awaited: AwaitedRepeat | None = None

    def reset(self) -> None:
        self.calls.clear()
        self.awaited = None

    def window(self) -> list[Event]:
        return events(self.calls)

    def window_records(self) -> tuple[CallRecord, ...]:
        return tuple(self.calls.records)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        # (Results reach the records through the engine: see calls.py.)
        if event.kind is _TOOL_RESULT:
            if self.awaited is None:
                return None  # no repeat awaits its results (most results)
            proven = self.proven_repeat(event)
            if proven is None:
                return None
            return self._detection(proven.records, proven.count, proven.threshold, proven.extra)
        if view.tool_overrides and view.exempt(event.tool):
            return None
        record = call_record(event)
        seen = self.calls.counts.get(record.hash, 0)
        # (A call not in the window repeats nothing, whatever the threshold.)
        if not seen or seen + 1 < view.threshold(event.tool, self.settings.threshold):
            # Too few occurrences in the window to reach the threshold,
            # however the streak would count: only the similarity to note.
            noted = (
                seen
                and view.keeps_similarity
                and not record.waited
                and any(earlier.same_call(record) for earlier in self.calls)
            )
            self.calls.push(record)
            if noted:
                view.note_similarity(self.name, 1.0)
            return None
        return self._repeat(record, event, view)

    def _repeat(self, record: CallRecord, event: Event, view: SessionView) -> list[Detection] | None:
        """A call whose key is in the window often enough to reach the threshold."""
        calls = self.calls
        records = list(calls.records)
        positions = [i for i, earlier in enumerate(records) if earlier.same_call(record)]
        calls.push(record)
        if not positions or record.waited:
            return None  # a hash collision, or a poll after a wait (the waiting budget's)
        view.note_similarity(self.name, 1.0)
        threshold = view.threshold(event.tool, self.settings.threshold)
        if _alike(records, positions) + 1 < threshold:
            return None  # the outcomes alone end the streak short of the threshold
        streak, reference = _streak(record, records, positions, call_io(event))
        if not streak:
            return None
        if reference.done and reference.acknowledged():
            # The same state set again ("Todos have been modified", "Plan
            # updated", a file written with the same content) between other
            # work: bookkeeping, not a loop.  Back to back it still counts
            # (a plan restated and never acted on).
            indices = [*positions[-len(streak) :], len(records)]
            if all(b - a > 1 for a, b in zip(indices, indices[1:])):
                return None
        count = len(streak) + 1
        if count < threshold:
            return None
        records = [record, *streak]  # the latest first
        if not judged_now(streak, record):
            # Fewer than two results back, or a call not sent as the others:
            # judged once its results are.  (A streak that ended at a differing
            # result is a poll that moved: it needs two results in a row that
            # agree before it is flagged again.)
            self.awaited = AwaitedRepeat(records, count, threshold, len(calls))
            return None
        self.awaited = None
        # (``count`` holds this call and the window before it: never say "11 in the last 10".)
        return self._detection(records, count, threshold, max(len(calls), count))

    def _detection(
        self, records: list[CallRecord], count: int, threshold: int, window: int
    ) -> list[Detection]:
        """The detection of ``count`` identical calls (``records``, the latest
        first) whose results agree, seen in a window of ``window`` calls."""
        latest = records[0]
        tool = latest.tool
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (threshold + 2)),
                message=(
                    f"{tool} called {count} times with identical arguments "
                    f"in the last {window} calls, with the same result"
                ),
                pattern=f"call:{latest.key}",
                count=count,
                tool=tool,
                summary=f"called {tool} with the same arguments {count} times",
                advice="Its result has not changed; repeating it will not change it.",
                evidence=evidence(r.ref for r in reversed(records)),
            )
        ]


def _alike(records: list[CallRecord], positions: list[int]) -> int:
    """How long the streak of repeats at ``positions`` (of ``records``) would
    be if nothing between them moved: the repeats counted back from the
    latest while their outcomes agree, as ``_repeat`` counts them.  The
    streak is never longer, so below the threshold this settles it without
    looking at the calls in between (most repeats' outcomes differ)."""
    reference = records[positions[-1]]
    alike = 1
    for at in reversed(positions[:-1]):
        earlier = records[at]
        if not earlier.same_outcome(reference):
            break
        if not reference.done:
            reference = earlier
        alike += 1
    return alike


def _streak(
    record: CallRecord, records: list[CallRecord], positions: list[int], io: CallIO
) -> tuple[list[CallRecord], CallRecord]:
    """The repeats of ``record`` at ``positions`` of the window that make its
    streak (the latest first), and the one whose outcome they share.

    Counted back from the latest repeat while outcomes stay identical and
    nothing in between moved: a different outcome, or a poll between the
    repeats whose output changed (sleep → status → sleep → status), means
    the repeats are getting somewhere.  A call whose inputs were rewritten
    since it last ran (``python fix.py`` after a new fix.py, a read after
    ``sed -i`` of its file) is a new call, not a repeat.  (``moved`` is made
    only once calls between repeats are looked at: a loop's repeats are
    often back to back.)"""
    first = positions[0] + 1
    moved: list[bool] | None = None
    latest = positions[-1]
    reference = records[latest]
    if latest + 1 < len(records):
        moved = _moved(records, first)
        if True in moved[latest + 1 - first :] or record.changed_since(io, records[latest + 1 :]):
            return [], reference
    streak = [reference]
    for later, earlier_at in zip(reversed(positions), reversed(positions[:-1])):
        earlier = records[earlier_at]
        if not earlier.same_outcome(reference):
            break
        if earlier_at + 1 < later:
            if moved is None:
                moved = _moved(records, first)
            if True in moved[earlier_at + 1 - first : later - first] or record.changed_since(
                io, records[earlier_at + 1 : later]
            ):
                break
        if not reference.done:
            reference = earlier
        streak.append(earlier)
    return streak, reference


def _moved(records: list[CallRecord], start: int) -> list[bool]:
    """For each of ``records[start:]``: did it repeat an earlier call of the
    window (any of ``records``) and get a different result?  Then something
    being polled moved.  Records are grouped by call, so each is compared
    only with the earlier records of its own call."""
    groups: dict[int, list[CallRecord]] = {}
    moved: list[bool] = []
    for index, record in enumerate(records):
        if not record.done:
            if index >= start:
                moved.append(False)
            continue
        group = groups.get(record.hash)
        if group is None:
            groups[record.hash] = [record]
            if index >= start:
                moved.append(False)
            continue
        if index >= start:
            key = record.key
            moved.append(any(earlier.key == key and not record.same_outcome(earlier) for earlier in group))
        group.append(record)
    return moved
