"""The kill confirmation: what exactly will be signalled, or why it cannot be.

``describe`` is the hub's ``describe_kill(session)`` ("SIGTERM pid 123
(python agent.py), then SIGKILL after 5 s") and ``refusal`` the session's
``kill`` field (empty when killable).  Dismisses ``True`` only on an explicit
confirmation; a refused kill offers nothing but Close.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from monitor.ui.literal import literal
from monitor.ui.widgets.common.footer import FittedFooter


class KillScreen(ModalScreen[bool]):
    """Confirm (or explain why not) killing one session's process."""

    BINDINGS = [
        Binding("y", "confirm", "Kill", id="kill.confirm"),
        Binding("escape,n", "cancel", "Cancel", id="kill.cancel"),
    ]

    def __init__(self, session: str, describe: str, refusal: str):
        super().__init__()
        self.session = session
        self.describe = describe
        self.refusal = refusal

    @property
    def killable(self) -> bool:
        return not self.refusal

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog kill-dialog"):
            title = Text("Kill session ")
            title.append_text(literal(self.session, style="bold"))
            title.append("?" if self.killable else "")
            yield Label(title, classes="dialog-title")
            if self.killable:
                body = Text("What will happen:\n", style="")
                body.append_text(literal(self.describe, style="bold", multiline=True))
                body.append(
                    "\n\nThe action is recorded in the database before it is carried out.", style="dim"
                )
            else:
                body = Text("This session cannot be killed:\n")
                body.append_text(literal(self.refusal or self.describe, style="bold", multiline=True))
            with VerticalScroll(id="kill-body"):  # a long refusal scrolls; the buttons stay
                yield Static(body, id="kill-what")
            with Horizontal(classes="dialog-buttons"):
                if self.killable:
                    yield Button("Kill  y", variant="error", id="confirm")
                    yield Button("Cancel  esc", id="cancel")
                else:
                    yield Button("Close  esc", id="cancel")
        yield FittedFooter()  # this dialog's keys, not the dashboard's behind it

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return self.killable
        return True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_confirm(self) -> None:
        if self.killable:
            self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
