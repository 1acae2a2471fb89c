"""Compact records of recent tool calls and their outcomes.

Several detectors reason about "this call, and what it returned" (exact
repeat, cycle, fingerprint, similar arguments).  They keep windows of
:class:`CallRecord` instead of events: a record holds what a comparison or a
detection can need later -- hashes of the keys, the keys bounded, the
evidence reference, and the result's head and tail -- and nothing that grows
with the event (no ``Event``, no 1 MB content).

A call's record is made once, by :func:`call_record`, and memoized on the
event, so the detectors of a session share it: the keys are computed once per
call, whichever detector sees it first, and the engine attaches the result
(:meth:`CallRecord.attach`) when it pairs it with its call, before any
detector sees the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from monitor.detect.analysis.inputs import CallIO, call_io
from monitor.detect.analysis.memo import NORMALIZED_RESULTS
from monitor.detect.analysis.shell import output_body
from monitor.detect.analysis.signatures import text_is_acknowledgement, text_marks
from monitor.detect.analysis.waits import waited
from monitor.events import CallSnapshot, Event, EventRef, Kind, call_snapshot
from monitor.text import SIMILARITY_CHARS, call_key, clip, sent_hash

#: How much of a key a record keeps (patterns show at most 200 characters).
KEY_CHARS = 200
_TOOL_CALL = Kind.TOOL_CALL


class CallRecord:
    """One tool call: its keys, its evidence, and (once known) its result.

    ``hash`` and ``key`` identify the call (``call_key``): equal
    records have equal hashes of the whole key and equal bounded keys.
    ``exact`` is the hash of its arguments as sent (``hash`` when the key is
    them): two edits that differ only in their lines' indentation share a key.  The
    result is kept as its clipped text (what every result comparison reads)
    until a comparison has reduced it to a hash.  Made by :func:`new_record`.

    ``_ref`` is the evidence reference or the snapshot that makes it;
    ``text`` the result's head and tail (``clip``), ``None`` until it arrives
    (``error``, ``long`` -- over 400 characters -- and the memos are set when
    it does); ``failure`` similar_args' comparable failure (``None`` while
    unknown); ``io`` what the call writes (a repeat after its inputs changed
    is a new call) and whether it was made after a wait (``io.waited``);
    ``reply`` the reply that made the call (``meta["reply"]``), ``None`` where unknown;
    ``asked`` the line of the log where the call was asked for, when that is before
    its own line (``meta["asked"]``: a Vorflux span runs after its reply), else ``None``;
    ``answered`` the seq of its result, ``None`` until it arrives."""

    __slots__ = (
        "seq",
        "ts",
        "tool",
        "hash",
        "exact",
        "key",
        "source",
        "line",
        "_ref",
        "text",
        "error",
        "long",
        "_outcome",
        "_marks",
        "failure",
        "io",
        "reply",
        "asked",
        "answered",
    )
    seq: int
    ts: float
    tool: str | None
    hash: int
    exact: int
    key: str
    source: str
    line: int | None
    _ref: EventRef | tuple[Any, ...]
    text: str | None
    error: bool
    long: bool
    _outcome: int | None
    _marks: int | None
    failure: Any
    io: CallIO
    reply: object
    asked: int | None
    answered: int | None

    @property
    def ref(self) -> EventRef:
        """The call's evidence reference, made when first asked for."""
        found = self._ref
        if isinstance(found, tuple):
            found = self._ref = EventRef.of_call(self.seq, self.source, self.line, found)
        return found

    @property
    def done(self) -> bool:
        """The result arrived."""
        return self.text is not None

    @staticmethod
    def changed_since(io: CallIO, between: list[CallRecord]) -> bool:
        """Whether one of the calls ``between`` (made after an identical
        earlier call) may have changed the inputs of the call ``io`` describes
        (``inputs.call_io`` of its event): then it is a new call."""
        return any(io.changed_by(other.io) for other in between)

    @property
    def waited(self) -> bool:
        """Made after an explicit wait, or only waits (see waiting.py): not a repeat."""
        return self.io.waited

    def same_call(self, other: CallRecord) -> bool:
        return self.hash == other.hash and self.key == other.key

    @property
    def result(self) -> str | None:
        """The normalized result (``result_key``), ``None`` until it arrives."""
        if self.text is None:
            return None
        normalized: str = NORMALIZED_RESULTS[self.text]
        return ("E:" if self.error else "R:") + normalized

    def outcome(self) -> int:
        """The hash of the normalized result, computed once."""
        outcome = self._outcome
        if outcome is None:
            outcome = self._outcome = hash(self.result)
        return outcome

    def same_outcome(self, other: CallRecord) -> bool:
        """Equal outcomes, counting an unknown one as equal (it may still come)."""
        if self.text is None or other.text is None:
            return True
        if self.error == other.error and self.text == other.text:
            return True  # the same head and tail: the same normalized result
        return self.outcome() == other.outcome()

    def marks(self) -> int:
        """:func:`~monitor.detect.analysis.signatures.text_marks` of the result."""
        marks = self._marks
        if marks is None:
            # What the command printed, not the tags wrapped around it (an
            # empty ``<output>`` shows nothing, not the same thing again).
            text = self.text
            assert text is not None  # (asked of a record with its result)
            marks = self._marks = text_marks(output_body(text) if len(text) <= 400 else text)
        return marks

    def acknowledged(self) -> bool:
        """:func:`~monitor.detect.analysis.signatures.is_acknowledgement` of the result."""
        text = self.text
        assert text is not None  # (asked of a record with its result)
        return not self.error and not self.long and text_is_acknowledgement(text)

    def attach(self, result: Event) -> None:
        content = result.content
        self.answered = result.seq
        self.error = result.is_error
        self._outcome = self._marks = None
        if len(content) > 400:
            self.long = True
            self.text = clip(content, SIMILARITY_CHARS)
        else:
            self.long = False
            self.text = content  # (clip() keeps a short text as it is)

    def event(self) -> Event:
        """A stand-in event for the UI's window (seq, kind, summary, key)."""
        return RecalledCall(self)


class AwaitedRepeat:
    """A repeat that reached its threshold before two of its results were
    back: too soon to tell a loop from a poll whose output moves.  It is
    judged as the results come in (:meth:`verdict`), not flagged blind.

    ``records`` are the repeated calls, the latest first; ``count`` and
    ``threshold`` are what the detector saw when the latest was made."""

    __slots__ = ("records", "count", "threshold", "extra")

    def __init__(self, records: list[CallRecord], count: int, threshold: int, extra: Any = None):
        self.records = records
        self.count = count
        self.threshold = threshold
        self.extra = extra  # whatever else the detector needs to word its detection

    def concerns(self, result: Event) -> bool:
        """Whether ``result`` answers one of the awaited calls."""
        call = result.call
        if call is None:
            return False
        record = made_record(call)
        return record is not None and any(r is record for r in self.records)

    def verdict(self) -> bool | None:
        """True once two results are back and every result back agrees (a
        loop); False as soon as two differ (something moved); None while
        fewer than two are back."""
        done = [r for r in self.records if r.text is not None]
        if len(done) < 2:
            return None
        first = done[0]
        if all(first.same_outcome(r) for r in done[1:]):
            return True
        return False


class AwaitsRepeats:
    """For a detector that holds an :class:`AwaitedRepeat` in ``awaited``."""

    awaited: AwaitedRepeat | None = None

    def proven_repeat(self, result: Event) -> AwaitedRepeat | None:
        """The awaited repeat once ``result`` proves it a loop (two results
        back, all alike); it is dropped when they differ (a poll that moved)."""
        awaited = self.awaited
        if awaited is None or not awaited.concerns(result):
            return None
        verdict = awaited.verdict()
        if verdict is None:
            return None
        self.awaited = None
        return awaited if verdict else None


def new_record(event: Event) -> CallRecord:
    """A new record of the tool call ``event`` (:func:`call_record` memoizes it)."""
    record = CallRecord()
    record.tool = event.tool
    key = call_key(event)
    record.seq = seq = event.seq
    record.ts = event.ts
    record.hash = hash(key)
    record.exact = sent_hash(event)
    record.key = key if len(key) <= KEY_CHARS else key[:KEY_CHARS]
    record.source = event.source
    record.line = event.line
    # The evidence reference, or what makes it (most records are never
    # cited): see ``ref``.  (Kept here, not in the event's facts too:
    # ``base.ref`` finds it here.)
    known = event.facts.ref
    found: EventRef | CallSnapshot
    if known is None or known.seq != seq:
        found = call_snapshot(event) or EventRef.of(event)
    else:
        found = known
    record._ref = found
    record.text = None
    record.failure = None
    record.io = call_io(event).kept(bool(waited(event)))
    meta = event.meta
    record.reply = meta.get("reply") if meta else None
    asked = meta.get("asked") if meta else None
    record.asked = asked if isinstance(asked, int) else None
    record.answered = None
    return record


def judged_now(streak: Iterable[CallRecord], latest: CallRecord) -> bool:
    """Whether a repeat of ``latest`` can be flagged as it is made: two results of its
    ``streak`` are back (a stuck call and a poll whose output moves look alike until
    then), and every call of it was sent exactly as ``latest`` (an edit indented
    another way shares its key, and is judged by its own result)."""
    back = 0
    for record in streak:
        if record.exact != latest.exact:
            return False
        back += record.text is not None
    return back >= 2


def attempts(records: Iterable[CallRecord]) -> int:
    """How many attempts ``records`` (in order, either way) are: the calls one reply
    made together count once, as the agent saw none of their results before it made
    them all (:func:`made_together`)."""
    count = 0
    before: CallRecord | None = None
    for record in records:
        if before is None or not made_together(before, record):
            count += 1
        before = record
    return count


def made_together(one: CallRecord, other: CallRecord) -> bool:
    """Whether two neighbouring calls came in one reply, or at once: the same ``reply``
    where the adapter knows it; the later asked for (``asked``) before the earlier ran
    (two agents of one session, each asking for the same read); else the later was
    made before the earlier's result came back (or, that result still out, right
    after it, nothing between)."""
    if one.reply is not None and one.reply == other.reply:
        return True
    earlier, later = (one, other) if one.seq < other.seq else (other, one)
    if later.asked is not None and earlier.line is not None:
        return later.asked < earlier.line
    if earlier.answered is None:
        return later.seq == earlier.seq + 1
    return later.seq < earlier.answered


def call_record(event: Event) -> CallRecord:
    """The record of a tool call, made once per event and shared."""
    facts = event.facts
    record: CallRecord | None = facts.record
    if record is None or record.seq != event.seq:
        record = facts.record = new_record(event)
    return record


def made_record(call: Event) -> CallRecord | None:
    """The record of a tool call if a detector has made it, else ``None``
    (a result is only worth comparing with a call some detector kept)."""
    record: CallRecord | None = call.facts.record
    return record if record is not None and record.seq == call.seq else None


def attach_result(call: Event, result: Event) -> None:
    """Give the call's record, if made, its result: once, when the engine
    pairs them, before any detector sees the result."""
    record = made_record(call)
    if record is not None and record.text is None:
        record.attach(result)


class RecalledCall(Event):
    """An event rebuilt from a record for the UI's window: its summary is the
    evidence's, and its ``call_key`` matches exactly when the calls' keys do."""

    __slots__ = ("_summary",)

    def __init__(self, record: CallRecord):
        found: EventRef = record.ref
        super().__init__(
            _TOOL_CALL,
            "",
            record.ts,
            source=record.source,
            line=record.line,
            tool=record.tool,
            seq=record.seq,
        )
        self.facts.call_key = f"{record.key}#{record.hash:x}"
        self._summary = found.summary

    def summary(self, width: int = 80) -> str:
        text = self._summary
        return text if len(text) <= width else text[: width - 1] + "…"


def events(records: Any) -> list[Event]:
    """Stand-in events for the records (a detector's ``window()``)."""
    return [RecalledCall(record) for record in records]


class CallWindow:
    """The last ``size`` call records, with how many records of each call
    hash it holds: "is this call in the window?" is one dict lookup.  (A
    list, not a deque: a deque's first block alone is 600 bytes, and
    dropping the first of ten pointers costs nothing.)"""

    __slots__ = ("records", "counts", "size")

    def __init__(self, size: int):
        self.records: list[CallRecord] = []
        self.counts: dict[int, int] = {}
        self.size = size

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.records)

    def clear(self) -> None:
        self.records.clear()
        self.counts.clear()

    def push(self, record: CallRecord) -> None:
        records, counts = self.records, self.counts
        if len(records) >= self.size:
            if not records:
                return  # a window of no calls (as a deque with maxlen 0)
            old = records.pop(0).hash
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
        records.append(record)
        key = record.hash
        counts[key] = counts.get(key, 0) + 1
