"""The key help: the actions of the screen it was opened from, each with its
binding id (for ``[ui] keymap``) and its key now.

:func:`screen_bindings` collects what works on a screen: its own bindings
(those it does not disable, e.g. operator actions on a past session), those of
the widgets on it (the event stream's vim keys, the search line) and the app's.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

from monitor.ui.vim_keys import scroll_pane, vim_bindings

#: Screen class name -> the help's title.
TITLES = {
    "DashboardScreen": "the dashboard",
    "SessionDetailScreen": "a session",
    "HistoryScreen": "history",
    "EventViewScreen": "an event",
    "RepeatDiffScreen": "repeats",
}


def help_title(screen: Screen) -> str:
    name = TITLES.get(type(screen).__name__)
    return f"loopwatch keys — {name}" if name else "loopwatch keys"


def _own(cls: type) -> list[Binding]:
    found = []
    for klass in reversed(cls.__mro__):
        found += [b for b in klass.__dict__.get("BINDINGS", ()) if isinstance(b, Binding) and b.id]
    return found


def screen_bindings(screen: Screen) -> list[Binding]:
    """Bindings with an id that act on ``screen``: its own first, then its widgets', then the app's."""
    seen: dict[str | None, Binding] = {}  # _own keeps only bindings with an id
    for binding in _own(type(screen)):
        if screen.check_action(binding.action.split("(")[0], ()) is not False:
            seen.setdefault(binding.id, binding)
    for widget in screen.query("*"):
        for binding in _own(type(widget)):
            seen.setdefault(binding.id, binding)
    for binding in _own(type(screen.app)):
        seen.setdefault(binding.id, binding)
    return list(seen.values())


class HelpScreen(ModalScreen[None]):
    """A table of actions; any of escape, ? or q closes it."""

    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close"),
        *vim_bindings(
            (
                "scroll('down')",
                "scroll('up')",
                "scroll('home')",
                "scroll('end')",
                "scroll('half_down')",
                "scroll('half_up')",
            ),
            ("help.down", "help.up", "help.first", "help.last", "help.half_down", "help.half_up"),
            "line",
        ),
    ]

    def __init__(self, rows: list[tuple[str, str, str]], title: str = "loopwatch keys"):
        """``rows``: (key, binding id, what it does)."""
        super().__init__()
        self.rows = rows
        self.heading = title

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
        table.add_column("Key", style="bold", no_wrap=True)
        table.add_column("Action")
        table.add_column("keymap id", style="dim", no_wrap=True)
        for key, binding_id, description in self.rows:
            table.add_row(Text(key), Text(description), Text(binding_id))
        with VerticalScroll(id="dialog", classes="dialog help-dialog"):
            yield Label(self.heading, classes="dialog-title")
            yield Static(table)
            yield Static(
                Text(
                    "Similarity sparklines: one bar per step (a call with its result, or a reply). "
                    "The lower half is how much the step repeats earlier ones — a call repeated with a new "
                    "result (honest polling) stays low; the upper half is only for steps flagged at warn or "
                    "above. A row of full bars is a loop; short bars are work that looks alike.\n"
                    "Acknowledge (a): back to watching; the patterns standing now are quiet for the "
                    "cool-down ([escalation] cooldown_seconds); a new pattern, or one of them twice as "
                    "bad, breaks through. False positive (f): that pattern is never flagged again in "
                    "this session. After an inject a session is nudged until it has taken 5 steps "
                    "without a warning, then it is back to watching.\n"
                    "Status: live (a source is delivering it), paused (p stopped its process), idle, "
                    "ended, stopped (its watcher stopped).\n"
                    "Marks (dashboard): space marks a session (●), v marks a range as the cursor moves (v "
                    "again ends it), x clears; then a, f and K act on every marked session, each recorded "
                    "on its own; K asks once and lists the sessions it cannot kill, with why.",
                    style="dim",
                )
            )
            yield Static(
                Text(
                    'Remap any key in the config file: [ui] keymap = { kill = "ctrl+k" }\n'
                    "Switch themes from the command palette (ctrl+p → Theme) or with --theme.\n"
                    "Mouse: click a row to select it, click it again to open; click the footer keys.",
                    style="dim",
                )
            )

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, where: str) -> None:
        """j/k/g/G/ctrl+d/ctrl+u scroll the keys when they do not fit."""
        scroll_pane(self.query_one("#dialog", VerticalScroll), where)
