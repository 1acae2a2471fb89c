"""The dashboard's views and panes: the attention view, the log pane, a maximised pane,
the Reason column widened, the columns chosen, the empty state; and the layout kept across
restarts (:mod:`monitor.ui.ui_state`).

A mixin for :class:`~monitor.ui.screens.dashboard.DashboardScreen`:

* ``W`` shows only the sessions that need attention (``warn`` or above, or waiting for input).
* ``L`` shows the log pane (bad input with file:line and why, action outcomes, what is watched)
  in place of the lower panes.
* ``z`` maximises the focused pane (the table, the feed, the log), ``z`` again restores.
* ``R`` gives the Reason column the room of the others; ``C`` chooses the columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import getters
from textual.binding import Binding
from textual.widgets import Input

from monitor.ui.host import HostApp, ScreenMixin
from monitor.ui.screens.columns import ColumnsScreen
from monitor.ui.ui_state import DashboardLayout, load, save
from monitor.ui.watched import watched
from monitor.ui.widgets.dashboard.empty_state import EmptyState, empty_text
from monitor.ui.widgets.dashboard.log_pane import LogPane
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable

PANE_BINDINGS = [
    Binding(
        "W",
        "attention_view",
        "Attention",
        id="attention.only",
        tooltip="Show only the sessions that need attention (warn or above, waiting for input)",
    ),
    Binding("L", "toggle_log", "Log", id="log", tooltip="Show the log: bad lines, action outcomes, sources"),
    Binding(
        "z",
        "maximize_pane",
        "Zoom",
        show=False,
        id="pane.maximize",
        tooltip="Maximise the focused pane (z again: back)",
    ),
    Binding(
        "R",
        "reason_wide",
        "Wide reason",
        show=False,
        id="reason.wide",
        tooltip="Reason: more room, then on two lines, then back",
    ),
    Binding("C", "choose_columns", "Columns", show=False, id="columns", tooltip="Choose the table's columns"),
]


class DashboardPanes(ScreenMixin):
    if TYPE_CHECKING:
        app = getters.app(HostApp)

        @property
        def table(self) -> SessionsTable: ...

        def show_selected(self, force: bool = False) -> None: ...

    # -- the layout, kept across restarts --------------------------------------------------

    def restore_layout(self) -> None:
        """Before the first rebuild: the sort, filter, view and columns of the last run."""
        saved = load(self.app.ui_state_path)
        table = self.table
        table.sort_column, table.sort_reverse = saved.sort_column, saved.sort_reverse
        table.attention_only = saved.attention_only
        table.hidden = frozenset(saved.hidden_columns)
        table.reason_wide = saved.reason_wide
        table.reason_lines = saved.reason_lines
        if saved.filter_text:
            table.filter_text = saved.filter_text
            filter_input = self.query_one("#filter", Input)
            filter_input.value = saved.filter_text
            filter_input.add_class("-shown")
        if saved.log_shown:
            self.set_log_shown(True)

    def save_layout(self) -> None:
        table = self.table
        problem = save(
            self.app.ui_state_path,
            DashboardLayout(
                sort_column=table.sort_column,
                sort_reverse=table.sort_reverse,
                filter_text=table.filter_text,
                attention_only=table.attention_only,
                hidden_columns=sorted(table.hidden),
                reason_wide=table.reason_wide,
                reason_lines=table.reason_lines,
                log_shown=self.query_one(LogPane).display,
            ),
        )
        if problem and not getattr(self, "_layout_warned", False):
            self._layout_warned = True  # once: the layout is a comfort, not worth a toast per key
            self.app.notify(f"The layout is not kept: {problem}", markup=False, severity="warning")

    def _rebuild(self) -> None:
        table = self.table
        table.rebuild(self.app.feed.sessions, self.app.clock(), width=self.size.width)
        self.show_empty()
        self.show_selected()
        self.save_layout()

    # -- views --------------------------------------------------------------------------

    def action_attention_view(self) -> None:
        table = self.table
        table.attention_only = not table.attention_only
        self._rebuild()
        self.app.notify(
            "Only the sessions that need attention." if table.attention_only else "Every session.",
            title="Sessions",
            markup=False,
            timeout=2,
        )

    def action_reason_wide(self) -> None:
        table = self.table  # normal → wide → wide on two lines → normal
        if not table.reason_wide:
            table.reason_wide, table.reason_lines = True, 1
        elif table.reason_lines == 1:
            table.reason_lines = 2
        else:
            table.reason_wide, table.reason_lines = False, 1
        self._rebuild()

    def action_choose_columns(self) -> None:
        def chosen(hidden: frozenset[str] | None) -> None:
            if hidden is not None:
                self.table.hidden = hidden
                self._rebuild()

        self.app.push_screen(ColumnsScreen(self.table.hidden), chosen)

    def action_maximize_pane(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused
        if focused is None or not self.maximize(focused, container=False):
            self.app.notify("Nothing to maximise here: tab to a pane first.", markup=False, timeout=3)

    # -- the log pane --------------------------------------------------------------------

    def action_toggle_log(self) -> None:
        self.set_log_shown(not self.query_one(LogPane).display)
        self.save_layout()

    def set_log_shown(self, shown: bool) -> None:
        pane = self.query_one(LogPane)
        pane.display = shown
        self.query_one("#lower").display = not shown and self.table.row_count > 0
        if shown:
            feed = self.app.feed
            pane.start(watched(self.app.monitor), list(feed.bad), list(feed.actions))

    # -- the empty state -------------------------------------------------------------------

    def show_empty(self) -> None:
        """The table's place says what is watched and how to connect, while it has no row."""
        table = self.table
        empty = self.query_one(EmptyState)
        nothing = table.row_count == 0
        if nothing:
            why = []
            if table.filter_text:
                why.append(f"matches the filter {table.filter_text!r}")
            if table.attention_only and self.app.feed.sessions:
                why.append("needs attention (W: every session)")
            empty.show_renderable(empty_text(watched(self.app.monitor), " and ".join(why)))
        if empty.display != nothing:
            empty.display = nothing
            table.display = not nothing
            if not nothing and self.focused is None:
                table.focus()
        # nothing selected, nothing to show below: the room goes to the empty state
        self.query_one("#lower").display = not nothing and not self.query_one(LogPane).display
