"""Past sessions from the SQLite store, filterable; enter opens one read-only.

Filters: agent (a part of the name, any case), since (``2026-05-01``, ``2026-05-01 14:00``, or a
duration back from now: ``90m``, ``12h``, ``3d``), level (reached at least),
and free text (in id, agent or source).  Filters apply as you type.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, Select
from textual.widgets._select import SelectOverlay

from monitor.cost import stored_loop_cost
from monitor.events import Level
from monitor.ui.literal import literal
from monitor.ui.read_only_keys import ReadOnlyKeys
from monitor.ui.render import date_time, level_text, plural, short_path
from monitor.ui.screens.dashboard_console import TABLE_VIM_BINDINGS, TableVimKeys
from monitor.ui.widgets.common.footer import FittedFooter
from monitor.ui.widgets.common.row_table import RowTable
from monitor.ui.widgets.history.columns import history_layout
from monitor.ui.widgets.history.filters import HistoryFilters

HISTORY_LIMIT = 500


def _duration(first: float | None, last: float | None) -> str:
    if not first or not last:
        return "-"
    seconds = max(0, int(last - first))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _cells(row: dict[str, Any], widths: dict[str, int], palette: Any) -> dict[str, Text]:
    """One stored session's cells by column key, each cut (with "…") to its column's width."""
    level = Level.parse(row.get("level") or "watching")
    peak = Level.parse(row.get("peak") or row.get("level") or "watching")
    started = date_time(row.get("first_seen"))
    if widths.get("started", 16) < len(started):
        started = started[5:]  # without the year: 05-01 14:00
    return {
        "started": Text(started),
        "agent": literal(row.get("agent") or "-", limit=widths.get("agent", 12)),
        "session": literal(row["id"], limit=widths.get("session", 24)),
        "status": Text(row.get("status") or "-"),
        "level": level_text(level, palette),
        "peak": level_text(peak, palette),
        "events": Text(f"{row.get('events') or 0:,}", justify="right"),
        "duration": Text(_duration(row.get("first_seen"), row.get("last_seen")), justify="right"),
        "loops": Text(loops.short() if (loops := stored_loop_cost(row)) else "-", justify="right"),
        "detector": literal(row.get("detector") or "", limit=widths.get("detector", 16)),
        "source": literal(short_path(row.get("source") or "", widths.get("source", 30))),
    }


class HistoryScreen(ReadOnlyKeys, TableVimKeys, Screen):
    """Browse the database."""

    BINDINGS = [
        Binding("enter", "open_session", "Open", id="open", priority=True),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("escape", "back", "Back", id="back"),
        *TABLE_VIM_BINDINGS,
    ]

    def compose(self) -> ComposeResult:
        yield Label("History — past sessions (read-only)", classes="panel-title", id="history-title")
        yield HistoryFilters(id="history-filters")
        yield RowTable(id="history-table", cursor_type="row")
        yield Label("", id="history-status")
        yield FittedFooter()

    #: Set once mounted: live batches and restyles are applied only then.
    ready = False

    def on_mount(self) -> None:
        self.ready = True
        self.history_columns: list[tuple[str, str, int]] = []
        self.query_one(HistoryFilters).prefill(getattr(self.app, "history_filters", {}) or {})
        self.fit_columns()
        self.query_one(DataTable).focus()

    def on_resize(self) -> None:
        if self.ready:
            self.fit_columns()

    def fit_columns(self) -> None:
        """Columns fitted to the width (monitor/ui/widgets/history/columns.py); rows again if they changed."""
        columns = history_layout(self.size.width)
        if columns == self.history_columns:
            return
        self.history_columns = columns
        table = self.query_one(DataTable)
        keep = (
            table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        )
        table.clear(columns=True)
        for key, label, width in columns:
            table.add_column(label, key=key, width=width)
        self.reload(keep)

    def filters(self) -> dict[str, Any]:
        return self.query_one(HistoryFilters).values(self.app.clock())

    def reload(self, keep: str | None = None) -> None:
        """The sessions the filters find; the selected one (or ``keep``) stays selected."""
        status = self.query_one("#history-status", Label)
        try:
            filters = self.filters()
        except ValueError as exc:
            status.update(Text(str(exc), style="bold"))
            return
        store = self.app.store
        if store is None:  # the history screen is opened over a store
            return
        hits: list[dict] = []
        if filters.get("text"):
            from monitor.store.search import search

            text = filters.pop("text")
            rows, hits = search(store, text, **filters, limit=HISTORY_LIMIT, as_you_type=True)
        else:
            rows = store.list_sessions(**filters, limit=HISTORY_LIMIT)
        table = self.query_one(DataTable)
        selected = keep
        if table.row_count:
            selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear()
        palette = self.app.palette
        widths = {key: width for key, _, width in self.history_columns}
        for row in rows:
            cells = _cells(row, widths, palette)
            table.add_row(*(cells[key] for key, _, _ in self.history_columns), key=row["id"])
        if selected is not None:
            try:
                table.move_cursor(row=table.get_row_index(selected), animate=False)
            except Exception:
                pass
        more = " (showing the most recent)" if len(rows) >= HISTORY_LIMIT else ""
        found = f" · {plural(len(hits), 'matching event')}" if hits else ""
        status.update(
            Text(
                f"{plural(len(rows), 'session')}{more}{found} · enter or click again: open · / filter · esc back",
                style="dim",
            )
        )

    def on_input_changed(self, event: Input.Changed) -> None:
        self.reload()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.reload()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_session()

    def action_open_session(self) -> None:
        table = self.query_one(DataTable)
        focused = self.focused
        if isinstance(focused, SelectOverlay):  # enter in an open filter list chooses the option
            focused.action_select()
            return
        if isinstance(focused, Select):
            focused.expanded = True
            return
        if not table.has_focus:
            table.focus()
            return
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key is not None:  # every row is added with its session id as key
            self.app.open_session(key, read_only=True)

    def read_only_view(self) -> str | None:
        return "The history"

    def action_filter(self) -> None:
        self.query_one("#text", Input).focus()

    def action_back(self) -> None:
        focused = self.focused
        if isinstance(focused, Input):
            self.query_one(DataTable).focus()
            return
        self.app.go_back()

    def restyle(self) -> None:
        self.reload()
