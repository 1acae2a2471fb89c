"""Where the event stream reads its rows: pages from the store, or a list.

:class:`StoreEvents` reads fixed-size pages of a session's stored events on
demand and keeps an LRU of pages, so a 100,000-event session costs a couple of
pages of memory and one small indexed query per page scrolled into view.
:class:`MemoryEvents` serves a bounded list (a session without a store).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from monitor.ui.event_text import event_record
from monitor.ui.records import EventRow, event_row

PAGE_SIZE = 200
CACHED_PAGES = 24


class EventSource(Protocol):
    def count(self) -> int: ...
    def row(self, index: int) -> EventRow | None: ...
    def index_of_seq(self, seq: int) -> int: ...
    def refresh(self) -> int: ...
    def record(self, index: int) -> dict[str, Any] | None: ...
    def find(self, text: str) -> list[int]: ...


class StoreEvents:
    """A session's stored events, paged and cached."""

    def __init__(self, store: Any, session: str, page_size: int = PAGE_SIZE):
        self.store = store
        self.session = session
        self.page_size = page_size
        self._pages: OrderedDict[int, list[EventRow]] = OrderedDict()
        self._count = store.count_events(session)
        self.queries = 0

    def count(self) -> int:
        return self._count

    def refresh(self) -> int:
        """Re-count (live sessions grow); the last, partial page is re-read."""
        count = self.store.count_events(self.session)
        if count != self._count:
            self._pages.pop(self._count // self.page_size, None)
            self._count = count
        return count

    def _page(self, number: int) -> list[EventRow]:
        page = self._pages.get(number)
        if page is not None:
            self._pages.move_to_end(number)
            return page
        self.queries += 1
        rows = self.store.events(self.session, offset=number * self.page_size, limit=self.page_size)
        page = [event_row(r) for r in rows]
        self._pages[number] = page
        if len(self._pages) > CACHED_PAGES:
            self._pages.popitem(last=False)
        return page

    def row(self, index: int) -> EventRow | None:
        if index < 0 or index >= self._count:
            return None
        page = self._page(index // self.page_size)
        offset = index % self.page_size
        return page[offset] if offset < len(page) else None

    def index_of_seq(self, seq: int) -> int:
        """Stored seqs are 1-based positions, so index = seq - 1 (checked)."""
        guess = max(0, min(self._count - 1, seq - 1))
        row = self.row(guess)
        if row is None or row.seq == seq:
            return guess
        low, high = 0, self._count - 1  # retention may have pruned the head: search
        while low <= high:
            mid = (low + high) // 2
            found = self.row(mid)
            if found is None:
                break
            if found.seq < seq:
                low = mid + 1
            elif found.seq > seq:
                high = mid - 1
            else:
                return mid
        return max(0, min(self._count - 1, low))

    def record(self, index: int) -> dict[str, Any] | None:
        """The whole stored event at ``index`` (for the event view)."""
        if not 0 <= index < self._count:
            return None
        rows = self.store.events(self.session, offset=index, limit=1)
        return event_record(rows[0]) if rows else None

    def find(self, text: str) -> list[int]:
        """Indexes of the events whose tool, arguments or content contain ``text``."""
        return [self.index_of_seq(seq) for seq in self.store.find_events(self.session, text)]


class MemoryEvents:
    """A bounded in-memory list of events (no store)."""

    def __init__(self, events: Sequence[Any] = ()):
        self.replace(events)

    def replace(self, events: Sequence[Any]) -> None:
        self._events = list(events)
        self._rows = [event_row(e) for e in self._events]

    def record(self, index: int) -> dict[str, Any] | None:
        return event_record(self._events[index]) if 0 <= index < len(self._events) else None

    def find(self, text: str) -> list[int]:
        needle = text.lower()
        return [i for i, row in enumerate(self._rows) if needle in row.summary.lower()]

    def count(self) -> int:
        return len(self._rows)

    def refresh(self) -> int:
        return len(self._rows)

    def row(self, index: int) -> EventRow | None:
        return self._rows[index] if 0 <= index < len(self._rows) else None

    def index_of_seq(self, seq: int) -> int:
        for index, row in enumerate(self._rows):
            if row.seq >= seq:
                return index
        return max(0, len(self._rows) - 1)
