"""The inject modal: the escalation's suggested nudge, editable, then sent.

Dismisses with the text to send, or ``None`` when cancelled.  It says which
channel will carry the message (socket, inbox file) or that none can.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static, TextArea

from monitor.ui.literal import literal, visible
from monitor.ui.widgets.common.footer import FittedFooter

FALLBACK_NUDGE = (
    "[loopwatch] You seem to be repeating yourself without progress. Try a different "
    "approach, or explain what is blocking you."
)


class InjectScreen(ModalScreen[str | None]):
    """Edit and send a message to one session's agent."""

    BINDINGS = [
        Binding("ctrl+s", "send", "Send", id="inject.send", priority=True),
        Binding("escape", "cancel", "Cancel", id="inject.cancel"),
    ]

    def __init__(self, session: str, nudge: str, channel: str):
        super().__init__()
        self.session = session
        self.nudge = nudge or FALLBACK_NUDGE
        self.channel = channel

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            title = Text("Inject a message into ")
            title.append_text(literal(self.session, style="bold"))
            yield Label(title, classes="dialog-title")
            if self.channel in ("", "none"):
                yield Static(
                    Text(
                        "This session has no control channel: the message will be "
                        "recorded but cannot be delivered.",
                        style="bold",
                    ),
                    classes="dialog-warning",
                )
            else:
                yield Static(
                    Text(
                        f"Sent through the session's {self.channel} channel. Edit the suggested nudge below.",
                        style="dim",
                    )
                )
            yield TextArea(
                visible(self.nudge, multiline=True), id="message", soft_wrap=True, show_line_numbers=False
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Send  ctrl+s", variant="primary", id="send")
                yield Button("Cancel  esc", id="cancel")
        yield FittedFooter()  # this dialog's keys, not the dashboard's behind it

    def on_mount(self) -> None:
        message = self.query_one("#message", TextArea)
        # Typing adds to the suggested nudge instead of running into its start.
        message.move_cursor(message.document.end)
        message.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "send":
            self.action_send()
        else:
            self.action_cancel()

    def action_send(self) -> None:
        text = self.query_one("#message", TextArea).text.strip()
        if not text:
            self.notify("Nothing to send: the message is empty.", severity="warning", markup=False)
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)
