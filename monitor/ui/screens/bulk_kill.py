"""One confirmation for killing every marked session: what each kill will do, and which are refused.

Each session is described and checked afresh by the hub (``describe_kill``, ``kill_refusal``);
confirming carries out one kill per killable session through ``hub.act``, which proves the
process again (same user, pid and start time; never pid 1, loopwatch or its parent) and
records each before and after.  Dismisses with the sessions to kill, or an empty list.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from monitor.ui.literal import literal
from monitor.ui.render import plural
from monitor.ui.widgets.common.footer import FittedFooter


class KillPlan(NamedTuple):
    session: str
    describe: str
    #: Why it cannot be killed now ("" when it can).
    refusal: str


def plan_text(plans: list[KillPlan]) -> Text:
    body = Text()
    killable = [p for p in plans if not p.refusal]
    refused = [p for p in plans if p.refusal]
    if killable:
        body.append("Will be killed:\n", style="bold")
        for plan in killable:
            body.append("• ")
            body.append_text(literal(plan.session, style="bold"))
            body.append("\n")
            body.append_text(literal("  " + plan.describe.replace("\n", "\n  "), multiline=True))
            body.append("\n")
    if refused:
        body.append("\nRefused (not killed):\n" if killable else "Refused (not killed):\n", style="bold")
        for plan in refused:
            body.append("• ")
            body.append_text(literal(plan.session, style="bold"))
            body.append(": ")
            body.append_text(literal(plan.refusal, multiline=True))
            body.append("\n")
    if killable:
        body.append("\nEach kill is checked again and recorded before it is carried out.", style="dim")
    return body


class BulkKillScreen(ModalScreen[list[str]]):
    """Confirm killing the marked sessions (``K`` with marks)."""

    BINDINGS = [
        Binding("y", "confirm", "Kill all", id="kill_marked.confirm"),
        Binding("escape,n", "cancel", "Cancel", id="kill_marked.cancel"),
    ]

    def __init__(self, plans: list[KillPlan]):
        super().__init__()
        self.plans = plans

    @property
    def killable(self) -> list[str]:
        return [p.session for p in self.plans if not p.refusal]

    def compose(self) -> ComposeResult:
        count = len(self.killable)
        with Vertical(id="dialog", classes="dialog kill-dialog"):
            title = f"Kill {plural(count, 'marked session')}?" if count else "None of the marked sessions"
            yield Label(Text(title, style="bold"), classes="dialog-title")
            with VerticalScroll(id="kill-body"):
                yield Static(plan_text(self.plans), id="kill-what")
            with Horizontal(classes="dialog-buttons"):
                if count:
                    yield Button(f"Kill {count}  y", variant="error", id="confirm")
                    yield Button("Cancel  esc", id="cancel")
                else:
                    yield Button("Close  esc", id="cancel")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return bool(self.killable) if action == "confirm" else True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_confirm(self) -> None:
        if self.killable:
            self.dismiss(self.killable)

    def action_cancel(self) -> None:
        self.dismiss([])
