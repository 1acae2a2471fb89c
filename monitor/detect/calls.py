"""A bounded history of recent tool calls with their outcomes.

Several detectors reason about "this call, and what it returned": they keep a
:class:`CallHistory`, append calls as they are made and fill in each call's
result when it arrives (matched by identity through ``Event.call``).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterator

from monitor.events import Event, Kind
from monitor.text import result_key


class CallRecord:
    __slots__ = ("key", "event", "result_event")

    def __init__(self, key: str, event: Event):
        self.key = key
        self.event = event
        self.result_event: Event | None = None  # None until the result arrives

    @property
    def result(self) -> str | None:
        """The normalized result; computed only when a comparison needs it
        (normalizing every result would dominate the engine's cost)."""
        return None if self.result_event is None else result_key(self.result_event)

    def same_outcome(self, other: CallRecord) -> bool:
        """Equal outcomes, counting an unknown one as equal (it may still come)."""
        a, b = self.result_event, other.result_event
        if a is None or b is None:
            return True
        if a.content == b.content and a.is_error == b.is_error:
            return True
        return result_key(a) == result_key(b)


class CallHistory:
    """The last ``size`` calls of one session, keyed by ``key_of``."""

    def __init__(self, size: int, key_of: Callable[[Event], str]):
        self.records: deque[CallRecord] = deque(maxlen=size)
        self.key_of = key_of

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.records)

    def clear(self) -> None:
        self.records.clear()

    def add_call(self, event: Event) -> CallRecord:
        record = CallRecord(self.key_of(event), event)
        self.records.append(record)
        return record

    def add_result(self, event: Event) -> CallRecord | None:
        """Attach a tool result to the call it answers; return that record."""
        call = event.call
        if call is None or event.kind is not Kind.TOOL_RESULT:
            return None
        for record in reversed(self.records):
            if record.event is call:
                record.result_event = event
                return record
        return None

    def events(self) -> list[Event]:
        return [record.event for record in self.records]
