"""The key help: every action, its binding id (for ``[ui] keymap``) and its key now."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class HelpScreen(ModalScreen[None]):
    """A table of actions; any of escape, ? or q closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    def __init__(self, rows: list[tuple[str, str, str]]):
        """``rows``: (key, binding id, what it does)."""
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
        table.add_column("Key", style="bold", no_wrap=True)
        table.add_column("Action")
        table.add_column("keymap id", style="dim", no_wrap=True)
        for key, binding_id, description in self.rows:
            table.add_row(Text(key), Text(description), Text(binding_id))
        with VerticalScroll(id="dialog", classes="dialog help-dialog"):
            yield Label("loopwatch keys", classes="dialog-title")
            yield Static(table)
            yield Static(Text(
                "Remap any key in the config file: [ui] keymap = { kill = \"ctrl+k\" }\n"
                "Switch themes from the command palette (ctrl+p → Theme) or with --theme.\n"
                "Mouse: click a row to select it, click it again to open; click the footer keys.",
                style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
