"""Search in the detail view: ``/`` opens a search line, matches as you type.

:class:`SearchBar` is an :class:`~textual.widgets.Input` shown under the event
stream; the detail screen asks the stream's event source for the matching
events (:meth:`EventSource.find`: the store searches tool, arguments and the
stored content; a memory source its lines), moves the cursor to the first
match at or after it and highlights the text on every line.  ``n``/``N`` go to
the next/previous match (wrapping); ``enter`` keeps the search, ``escape``
clears it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


def next_match(matches: list[int], cursor: int, direction: int, *, inclusive: bool = False) -> int | None:
    """The match after (``direction`` 1) or before (-1) ``cursor``, wrapping
    around; ``inclusive``: the cursor itself counts.  ``matches`` is sorted."""
    if not matches:
        return None
    if direction > 0:
        at = bisect_left(matches, cursor) if inclusive else bisect_right(matches, cursor)
        return matches[at % len(matches)]
    at = bisect_right(matches, cursor) if inclusive else bisect_left(matches, cursor)
    return matches[(at - 1) % len(matches)]


class SearchBar(Input):
    """The search line; hidden until ``/``."""

    class Cancelled(Message):
        """Escape: the search is cleared."""

    BINDINGS = [
        Binding(
            "escape",
            "cancel",
            "Clear search",
            show=False,
            id="search.cancel",
            tooltip="Clear the search and close the search line",
        )
    ]
    DEFAULT_CSS = """
    SearchBar { display: none; }
    SearchBar.-shown { display: block; }
    """

    def __init__(self, **kwargs: Any):
        super().__init__(placeholder="search events (enter: keep, esc: clear, n/N: next/previous)", **kwargs)

    def open(self) -> None:
        self.add_class("-shown")
        self.focus()

    def action_cancel(self) -> None:
        self.value = ""
        self.remove_class("-shown")
        self.post_message(self.Cancelled())
