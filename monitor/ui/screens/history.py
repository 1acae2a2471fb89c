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
from monitor.ui.render import date_time, level_text, plural, short_path
from monitor.ui.screens.dashboard_console import TABLE_VIM_BINDINGS, TableVimKeys
from monitor.ui.widgets.common.footer import FittedFooter
from monitor.ui.widgets.common.row_table import RowTable
from monitor.ui.widgets.history.filters import HistoryFilters

HISTORY_LIMIT = 500


def _duration(first: float | None, last: float | None) -> str:
    if not first or not last:
        return "-"
    seconds = max(0, int(last - first))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


class HistoryScreen(TableVimKeys, Screen):
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
        table = self.query_one(DataTable)
        for key, label, width in (
            ("started", "Started", 16),
            ("agent", "Agent", 12),
            ("session", "Session", 24),
            ("status", "Status", 7),
            ("level", "Final", 11),
            ("peak", "Peak", 11),
            ("events", "Events", 8),
            ("duration", "Length", 7),
            ("loops", "Loop cost", 9),
            ("detector", "Detector", 16),
            ("source", "Source", 30),
        ):
            table.add_column(label, key=key, width=width)
        self.query_one(HistoryFilters).prefill(getattr(self.app, "history_filters", {}) or {})
        self.reload()
        table.focus()

    def filters(self) -> dict[str, Any]:
        return self.query_one(HistoryFilters).values(self.app.clock())

    def reload(self) -> None:
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
        selected = None
        if table.row_count:
            selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear()
        palette = self.app.palette
        for row in rows:
            level = Level.parse(row.get("level") or "watching")
            peak = Level.parse(row.get("peak") or row.get("level") or "watching")
            table.add_row(
                Text(date_time(row.get("first_seen"))),
                literal(row.get("agent") or "-", limit=12),
                literal(row["id"], limit=24),
                Text(row.get("status") or "-"),
                level_text(level, palette),
                level_text(peak, palette),
                Text(f"{row.get('events') or 0:,}", justify="right"),
                Text(_duration(row.get("first_seen"), row.get("last_seen")), justify="right"),
                Text(loops.short() if (loops := stored_loop_cost(row)) else "-", justify="right"),
                literal(row.get("detector") or "", limit=16),
                literal(short_path(row.get("source") or "", 30)),
                key=row["id"],
            )
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
