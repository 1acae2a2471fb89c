"""Pick a detector to mute for one session (detectors that fired first)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from monitor.ui.literal import literal


class MuteScreen(ModalScreen[str | None]):
    """Dismisses with the detector name, or ``None``."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="mute.cancel")]

    def __init__(self, session: str, detectors: list[tuple[str, str]]):
        """``detectors``: (name, why it is listed) in the order to offer."""
        super().__init__()
        self.session = session
        self.detectors = detectors

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            title = Text("Mute a detector for ")
            title.append_text(literal(self.session, style="bold"))
            yield Label(title, classes="dialog-title")
            options = []
            for name, note in self.detectors:
                prompt = literal(name, style="bold")
                if note:
                    prompt.append(f"  {note}", style="dim")
                options.append(Option(prompt, id=name))
            yield OptionList(*options, id="detectors")
            yield Label(Text("enter mute · esc cancel", style="dim"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
