"""The live dashboard: every session at a glance, the selected one in depth.

Top: counts (sessions live, warnings open, events/s).  Middle: the sessions
table, most urgent first.  Bottom left: the selected session's similarity
sparkline and detection window; bottom right: its escalation state and the
feed of detections from all sessions.  Updates arrive in coalesced batches
(:meth:`DashboardScreen.apply_live`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label

from monitor.events import Kind, Level
from monitor.ui.literal import literal
from monitor.ui.live import Batch
from monitor.ui.operator import OPERATOR_BINDINGS, OperatorActions
from monitor.ui.render import plural
from monitor.ui.screens.dashboard_console import DASHBOARD_CONSOLE_BINDINGS, DashboardConsole
from monitor.ui.screens.dashboard_panes import PANE_BINDINGS, DashboardPanes
from monitor.ui.screens.triage import TRIAGE_BINDINGS, DashboardTriage
from monitor.ui.widgets.common.footer import FittedFooter
from monitor.ui.widgets.common.sparkline import SimilaritySparkline
from monitor.ui.widgets.common.text_panel import TextPanel
from monitor.ui.widgets.dashboard.counts import CountsBar
from monitor.ui.widgets.dashboard.detections_feed import DetectionsFeed
from monitor.ui.widgets.dashboard.empty_state import EmptyState
from monitor.ui.widgets.dashboard.escalation_view import EscalationView
from monitor.ui.widgets.dashboard.log_pane import LogPane
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from monitor.ui.widgets.dashboard.window_view import WindowView


def window_title_text(window: tuple) -> str:
    """What the window panel shows: the replies a message detection cites, or the compared calls."""
    if window and all(event.kind is Kind.MESSAGE for event in window):
        return f"Window — the repeated replies ({plural(len(window), 'reply', 'replies')})"
    return f"Window — what the detectors compare ({plural(len(window), 'event')})"


class DashboardScreen(DashboardPanes, DashboardTriage, DashboardConsole, OperatorActions, Screen):
    """Live sessions, sorted by attention."""

    BINDINGS = [
        *OPERATOR_BINDINGS,
        Binding(
            "enter",
            "open_session",
            "Open",
            id="open",
            priority=True,
            tooltip="Open the selected session (events, detections, actions)",
        ),
        Binding("slash", "filter", "Filter", id="filter", tooltip="Filter sessions by text"),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            show=False,
            id="filter.clear",
            tooltip="Clear the session filter",
        ),
        Binding("h", "app.history", "History", id="history", tooltip="Past sessions from the database"),
        *DASHBOARD_CONSOLE_BINDINGS,
        *TRIAGE_BINDINGS,
        *PANE_BINDINGS,
    ]

    def compose(self) -> ComposeResult:
        yield CountsBar(id="counts")
        yield Input(
            placeholder="filter sessions: agent, id, source, level, detector, reason (enter: done, esc: clear)",
            id="filter",
        )
        yield SessionsTable(id="sessions")
        yield EmptyState(id="empty")
        yield LogPane(id="log")
        with Horizontal(id="lower"):
            with Vertical(id="selected"):
                yield TextPanel("Similarity", id="spark-title", classes="panel-title")
                yield SimilaritySparkline(id="spark")
                yield TextPanel("Window", id="window-title", classes="panel-title")
                yield WindowView(id="window")
            with Vertical(id="side"):
                yield Label("Escalation", classes="panel-title")
                yield EscalationView(id="escalation")
                yield Label("Loop episodes", classes="panel-title")
                yield DetectionsFeed(id="feed")
        yield FittedFooter()

    # -- data ----------------------------------------------------------------

    @property
    def table(self) -> SessionsTable:
        return self.query_one(SessionsTable)

    #: Set once mounted: live batches and restyles are applied only then.
    ready = False

    def on_mount(self) -> None:
        self.ready = True
        table = self.table
        table.palette = self.app.palette
        self.restore_layout()
        table.rebuild(self.app.feed.sessions, self.app.clock(), width=self.app.size.width)
        self.show_empty()
        self.query_one(DetectionsFeed).show(self.app.feed.episodes.values(), self.app.palette)
        self.show_counts()
        self.show_selected()
        table.focus()
        self.set_interval(1.0, self.tick, name="dashboard-clock")

    def on_resize(self) -> None:
        table = self.table
        if table.needs_rebuild(self.size.width):
            table.rebuild(self.app.feed.sessions, self.app.clock(), width=self.size.width)

    def apply_live(self, batch: Batch) -> None:
        """One coalesced batch of hub updates."""
        now = self.app.clock()
        table = self.table
        if batch.sessions:
            table.apply(batch.sessions.values(), now, self.app.feed.sessions)
            self.show_empty()
        log = self.query_one(LogPane)
        if log.display and (batch.bad or batch.actions):
            log.add(batch.bad, batch.actions)
        if batch.episodes:  # one line per loop episode, updated in place
            self.query_one(DetectionsFeed).show(batch.episodes.values(), self.app.palette)
        self.show_counts()
        selected = table.selected_session
        if selected is not None and selected in batch.sessions:
            self.show_selected()
        elif selected is not None and batch.sessions:
            self.refresh_operator_bindings()

    def tick(self) -> None:
        self.table.tick(self.app.feed.sessions, self.app.clock())

    def restyle(self) -> None:
        """The theme changed: re-render everything coloured."""
        table = self.table
        table.palette = self.app.palette
        table.rebuild(self.app.feed.sessions, self.app.clock(), width=self.size.width)
        self.query_one(DetectionsFeed).show((), self.app.palette)
        self.show_counts()
        self.show_selected(force=True)

    def show_counts(self) -> None:
        feed = self.app.feed
        sessions = feed.sessions.values()
        stats = feed.stats
        live = sum(1 for s in sessions if s.status == "live")
        warnings = sum(1 for s in sessions if s.level >= Level.WARN)
        self.query_one(CountsBar).show(
            live=stats.sessions_live if stats else live,
            warnings=stats.warnings_open if stats else warnings,
            events_per_sec=stats.events_per_sec if stats else 0.0,
            total=stats.events_total if stats else sum(s.events for s in sessions),
            problems=feed.problems,
            title=self.app.title,
            palette=self.app.palette,
            loop_cost=getattr(stats, "loop_cost_today", None),
            store=getattr(stats, "store", ""),
            waiting=sum(1 for s in sessions if getattr(s, "waiting_since", 0) and s.status != "ended"),
        )

    def pin_selection(self) -> None:
        self.table.user_selected = True

    def selected_info(self) -> Any | None:
        session = self.table.selected_session
        return self.app.feed.sessions.get(session) if session else None

    def show_selected(self, force: bool = False) -> None:
        info = self.selected_info()
        palette = self.app.palette
        window_title = self.query_one("#window-title", TextPanel)
        spark_title = self.query_one("#spark-title", TextPanel)
        if info is None:
            spark_title.show_renderable(Text("Similarity"))
            window_title.show_renderable(Text("Window"))
            self.query_one(SimilaritySparkline).show(None)
            self.query_one(WindowView).show(None, palette, force=True)
            self.query_one(EscalationView).show(None, None, self.app.clock(), palette)
        else:
            title = Text("Similarity — ")
            title.append_text(literal(info.id, limit=40))
            if info.agent:
                title.append(" · ")
                title.append_text(literal(info.agent, limit=20))
            spark_title.show_renderable(title)
            window_title.show_renderable(Text(window_title_text(info.window)))
            self.query_one(SimilaritySparkline).show(info.similarity)
            self.query_one(WindowView).show(info.window, palette, force=force)
            self.query_one(EscalationView).show(
                info, self.app.escalation_facts(info), self.app.clock(), palette
            )
        self.refresh_operator_bindings()

    # -- events and actions ------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.extend_range()
        self.show_selected()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_session()

    def action_open_session(self) -> None:
        filter_input = self.query_one("#filter", Input)
        if filter_input.has_focus:
            self.table.focus()
            self.save_layout()
            return
        info = self.selected_info()
        if info is not None:
            self.app.open_session(info.id)

    def action_filter(self) -> None:
        filter_input = self.query_one("#filter", Input)
        filter_input.add_class("-shown")
        filter_input.focus()

    def action_clear_filter(self) -> None:
        filter_input = self.query_one("#filter", Input)
        if filter_input.value:
            filter_input.value = ""
        filter_input.remove_class("-shown")
        self.table.focus()
        self.save_layout()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        table = self.table
        table.filter_text = event.value.strip()
        table.rebuild(self.app.feed.sessions, self.app.clock(), width=self.size.width)
        self.show_empty()
        self.show_selected()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.table.focus()
            self.save_layout()
