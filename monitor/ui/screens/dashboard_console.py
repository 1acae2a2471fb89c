"""Moving around the dashboard: vim keys, sorting by any column, and a key that
visits the sessions needing attention.

A mixin for :class:`~monitor.ui.screens.dashboard.DashboardScreen`:

* ``j``/``k``, ``g``/``G``, ``ctrl+d``/``ctrl+u`` move the table's cursor
  (beside the arrows, pgup/pgdn, home/end).
* ``s`` cycles the sort column (attention → level → agent → … → attention),
  ``S`` reverses; clicking a column header sorts by it (again: reversed).
* ``w`` selects the next session needing attention (warn or above, or waiting
  for input), the one waiting longest (oldest unacknowledged warning) first;
  each once per round, however the order moves, then it wraps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import getters
from textual.binding import Binding
from textual.widgets import DataTable

from monitor.ui.host import HostApp, ScreenMixin
from monitor.ui.vim_keys import vim_bindings
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from monitor.ui.widgets.dashboard.sorting import COLUMN_TITLES, attention_queue, next_unvisited, waiting_since

#: vim keys for a table screen (the dashboard and history share them).
TABLE_VIM_BINDINGS = vim_bindings(
    (
        "table('cursor_down')",
        "table('cursor_up')",
        "table('scroll_top')",
        "table('scroll_bottom')",
        "table_half(1)",
        "table_half(-1)",
    ),
    ("table.down", "table.up", "table.first", "table.last", "table.half_down", "table.half_up"),
    "row",
)

DASHBOARD_CONSOLE_BINDINGS = [
    Binding(
        "w",
        "next_attention",
        "Next warning",
        id="attention.next",
        tooltip="Select the next session needing attention (longest waiting first; visits each, then wraps)",
    ),
    Binding("s", "cycle_sort", "Sort", id="sort", tooltip="Sort by the next column (attention first)"),
    Binding("S", "reverse_sort", "Reverse", show=False, id="sort.reverse", tooltip="Reverse the sort order"),
    *TABLE_VIM_BINDINGS,
]


class TableVimKeys(ScreenMixin):
    """vim keys acting on the screen's first DataTable (when no input has the focus)."""

    if TYPE_CHECKING:
        app = getters.app(HostApp)

    def vim_table(self) -> DataTable:
        return self.query_one(DataTable)

    def action_table(self, action: str) -> None:
        table = self.vim_table()
        getattr(table, f"action_{action}")()

    def action_table_half(self, direction: int) -> None:
        table = self.vim_table()
        step = max(1, table.scrollable_content_region.height // 2)
        table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + direction * step)))


class DashboardConsole(TableVimKeys):
    """Sorting and the attention key for the dashboard."""

    if TYPE_CHECKING:  # the screen provides them

        @property
        def table(self) -> SessionsTable: ...

        def show_selected(self, force: bool = False) -> None: ...

        def save_layout(self) -> None: ...

    #: The sessions ``w`` selected in this round (each is visited once before it wraps).
    _visited: set[str] | None = None

    def action_cycle_sort(self) -> None:
        table = self.table
        keys = [key for key, _, _ in table._columns]
        column = table.sort_column
        following = (
            keys[keys.index(column) + 1]
            if column in keys and keys.index(column) + 1 < len(keys)
            else (None if column is not None else keys[0])
        )
        self.sort_table(following, False)

    def action_reverse_sort(self) -> None:
        self.sort_table(self.table.sort_column, not self.table.sort_reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        table = self.table
        column = event.column_key.value
        reverse = not table.sort_reverse if column == table.sort_column else False
        self.sort_table(column, reverse)

    def sort_table(self, column: str | None, reverse: bool) -> None:
        table = self.table
        table.user_selected = True  # the selected session stays selected
        table.sort_by(column, reverse, self.app.feed.sessions)
        self.save_layout()
        what = "attention (level, then live/idle, then start)" if column is None else COLUMN_TITLES[column]
        self.app.notify(
            f"Sorted by {what}{', reversed' if reverse else ''}", title="Sessions", markup=False, timeout=2
        )

    def attention_order(self) -> list[str]:
        feed = self.app.feed

        def since(info: Any) -> float:
            acks = [a.ts for a in feed.actions_for(info.id) if a.kind == "ack"]
            return waiting_since(info, feed.detections_for(info.id), acks)

        return attention_queue(feed.sessions.values(), since)

    def action_next_attention(self) -> None:
        table = self.table
        if self._visited is None:
            self._visited = set()
        target = next_unvisited(self.attention_order(), table.selected_session, self._visited)
        if target is None:
            self.app.notify("No session waits for input or is at warn or above.", markup=False, timeout=3)
            return
        if not table.select_session(target):
            self.app.notify(f"{target} is hidden by the filter.", markup=False, timeout=3)
            return
        table.user_selected = True
        self.show_selected()
