"""Choose the sessions table's columns (``C``): space toggles one, enter applies.

Level, Session and Reason are always shown (a row must say which session, how bad and why).
Dismisses with the set of hidden column keys, or ``None`` when cancelled.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, SelectionList
from textual.widgets.selection_list import Selection

from monitor.ui.widgets.common.footer import FittedFooter
from monitor.ui.widgets.dashboard.columns import ALWAYS_SHOWN, COLUMNS


class ColumnsScreen(ModalScreen[frozenset[str] | None]):
    BINDINGS = [
        Binding("enter", "apply", "Apply", id="columns.apply", priority=True),
        Binding("escape", "cancel", "Cancel", id="columns.cancel"),
    ]

    def __init__(self, hidden: frozenset[str]):
        super().__init__()
        self.hidden = hidden

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(Text("Columns of the sessions table", style="bold"), classes="dialog-title")
            choices = [
                Selection(column.label, column.key, column.key not in self.hidden)
                for column in COLUMNS
                if column.key not in ALWAYS_SHOWN
            ]
            yield SelectionList[str](*choices, id="columns")
            yield Label(Text("space show/hide · enter apply · esc cancel", style="dim"))
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_apply(self) -> None:
        shown = set(self.query_one(SelectionList).selected)
        self.dismiss(frozenset(c.key for c in COLUMNS if c.key not in ALWAYS_SHOWN and c.key not in shown))

    def action_cancel(self) -> None:
        self.dismiss(None)
