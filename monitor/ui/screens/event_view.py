"""One event in full: ``enter`` on an event in the detail view.

Tool arguments pretty-printed, results and messages in full (as stored),
scrollable, every character literal.  ``←``/``→`` (or ``[``/``]``) step to the
previous/next event without leaving; ``c`` copies the event; ``escape`` goes
back with the stream's cursor on the event shown last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from monitor.ui.clipboard import copy_text
from monitor.ui.event_text import event_document, event_plain
from monitor.ui.host import HostApp
from monitor.ui.vim_keys import scroll_pane, vim_bindings
from monitor.ui.widgets.common.text_panel import TextPanel

#: vim keys and their arrow equivalents for a scrollable pane (shared with help).
SCROLL_BINDINGS = vim_bindings(
    (
        "scroll('down')",
        "scroll('up')",
        "scroll('home')",
        "scroll('end')",
        "scroll('half_down')",
        "scroll('half_up')",
    ),
    ("scroll.down", "scroll.up", "scroll.top", "scroll.bottom", "scroll.half_down", "scroll.half_up"),
    "line",
)


class EventViewScreen(Screen[int]):
    """The whole text of one event; dismisses with the index shown last."""

    if TYPE_CHECKING:
        app = getters.app(HostApp)

    BINDINGS = [
        Binding("escape", "close", "Back", id="event.back", tooltip="Back to the session"),
        Binding(
            "left,left_square_bracket",
            "step(-1)",
            "Prev event",
            id="event.previous",
            tooltip="Show the previous event",
        ),
        Binding(
            "right,right_square_bracket",
            "step(1)",
            "Next event",
            id="event.next",
            tooltip="Show the next event",
        ),
        Binding("c", "copy", "Copy", id="copy", tooltip="Copy to the clipboard"),
        *SCROLL_BINDINGS,
    ]

    DEFAULT_CSS = """
    EventViewScreen #event-title { height: 1; background: $panel; padding: 0 1; }
    EventViewScreen #event-scroll { height: 1fr; padding: 0 1; }
    EventViewScreen #event-body { width: 100%; }
    """

    def __init__(self, source: Any, index: int, *, search: str = ""):
        super().__init__()
        self.source = source
        self.index = index
        self.search = search
        self.record: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield TextPanel(id="event-title")
        with VerticalScroll(id="event-scroll"):
            yield Static(id="event-body")
        yield Footer()

    def on_mount(self) -> None:
        self.show(self.index)
        self.query_one("#event-scroll").focus()

    def show(self, index: int) -> None:
        record = self.source.record(index)
        if record is None:
            return
        self.index, self.record = index, record
        total = self.source.count()
        self.query_one("#event-title", TextPanel).show_renderable(
            Text(
                f"Event {index + 1:,} of {total:,}  —  ←/→ previous/next · j/k g/G scroll · c copy · esc back",
                no_wrap=True,
                overflow="ellipsis",
            )
        )
        self.query_one("#event-body", Static).update(event_document(record, self.app.palette, self.search))
        self.query_one("#event-scroll", VerticalScroll).scroll_home(animate=False)

    @property
    def text(self) -> str:
        """What is shown, as plain text."""
        return event_plain(self.record) if self.record else ""

    def action_step(self, delta: int) -> None:
        target = self.index + delta
        if 0 <= target < self.source.count():
            self.show(target)
        else:
            self.app.bell()

    def action_scroll(self, where: str) -> None:
        scroll_pane(self.query_one("#event-scroll", VerticalScroll), where)

    def action_copy(self) -> None:
        if self.record is not None:
            copy_text(self.app, self.text, f"event #{self.record.get('seq')}")

    def action_close(self) -> None:
        self.dismiss(self.index)
