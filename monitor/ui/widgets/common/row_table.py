"""A DataTable whose rows are the things: ``home``/``end`` go to the first/last row.

Textual's DataTable sends ``home``/``end`` to the leftmost/rightmost column, which in a table with a
row cursor scrolls it sideways and leaves the cursor where it was.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable


class RowTable(DataTable):
    """A row-cursor table: ``home``/``end`` first/last row (``ctrl+home``/``ctrl+end`` too)."""

    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]
