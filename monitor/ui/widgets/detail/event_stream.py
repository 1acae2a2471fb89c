"""The full event stream of one session, virtualized.

A :class:`~textual.scroll_view.ScrollView` whose virtual height is the number
of events; only the visible lines are fetched (from an
:class:`~monitor.ui.widgets.detail.event_source.EventSource`) and rendered, so
100,000 events scroll like 100.  A cursor line can be moved with the keys or
the mouse; :meth:`EventStream.jump_to_seq` centres an event (the evidence of a
detection) and highlights the evidence set.  When the cursor is on the last
event the stream follows new events.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from monitor.ui.literal import literal
from monitor.ui.records import EventRow
from monitor.ui.render import DEFAULT_PALETTE, Palette, clock
from monitor.ui.vim_keys import vim_bindings
from monitor.ui.widgets.detail.event_source import EventSource

KIND_TAGS = {
    "tool_call": "call",
    "tool_result": "result",
    "message": "msg",
    "session_start": "start",
    "session_end": "end",
    "usage": "usage",
    "compaction": "compact",
    "waiting": "wait",
}


class EventStream(ScrollView, can_focus=True):
    """Every event of a session, one line each."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False, id="stream.up"),
        Binding("down", "cursor(1)", "Down", show=False, id="stream.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="stream.page_up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="stream.page_down"),
        Binding("home", "edge(0)", "First", show=False, id="stream.first"),
        Binding("end", "edge(1)", "Last", show=False, id="stream.last"),
        *vim_bindings(
            ("cursor(1)", "cursor(-1)", "edge(0)", "edge(1)", "half(1)", "half(-1)"),
            (
                "stream.vim_down",
                "stream.vim_up",
                "stream.vim_first",
                "stream.vim_last",
                "stream.half_down",
                "stream.half_up",
            ),
            "event",
        ),
        Binding(
            "enter",
            "open",
            "Open event",
            show=False,
            id="stream.open",
            tooltip="Show the whole event (arguments, result, message in full)",
        ),
    ]

    COMPONENT_CLASSES = {"event-stream--cursor"}
    DEFAULT_CSS = """
    EventStream { height: 1fr; }
    EventStream > .event-stream--cursor { background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold; }
    """

    cursor = reactive(0, always_update=True)

    class Open(Message):
        """The operator asked for the whole event at ``index``."""

        def __init__(self, stream: EventStream, index: int):
            super().__init__()
            self.stream = stream
            self.index = index

    class CursorMoved(Message):
        def __init__(self, stream: EventStream, row: EventRow | None):
            super().__init__()
            self.stream = stream
            self.row = row

    def __init__(self, source: EventSource, **kwargs: Any):
        super().__init__(**kwargs)
        self.source = source
        self.palette: Palette = DEFAULT_PALETTE
        self.highlight: frozenset[int] = frozenset()
        self.follow = True
        self.lines_rendered = 0
        #: The detail view's search text: its matches are highlighted on every line.
        self.search = ""

    def on_mount(self) -> None:
        self._resize_virtual()
        if self.follow:
            self.call_after_refresh(self.action_edge, 1)

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(max(1, self.scrollable_content_region.width), self.source.count())

    def on_resize(self, event: events.Resize) -> None:
        self._resize_virtual()

    def grew(self) -> None:
        """The source has more events: extend, and follow if at the end."""
        before = self.source.count()
        after = self.source.refresh()
        if after == before:
            return
        at_end = self.cursor >= before - 1
        self._resize_virtual()
        if at_end and self.follow:
            self.cursor = after - 1
            self.scroll_to(y=max(0, after - self.scrollable_content_region.height), animate=False)
        self.refresh()

    # -- rendering -----------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        row = self.source.row(index)
        if row is None:
            return Strip.blank(width, self.rich_style)
        self.lines_rendered += 1
        text = self.line_text(row, width)
        if index == self.cursor and self.has_focus:
            text.stylize(self.get_component_rich_style("event-stream--cursor"))
        elif index == self.cursor:
            text.stylize(Style(underline=True))
        segments = list(text.render(self.app.console))
        return Strip(segments).apply_style(self.rich_style).adjust_cell_length(width, self.rich_style)

    def line_text(self, row: EventRow, width: int) -> Text:
        palette = self.palette
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{row.seq:>7} ", style="dim")
        line.append(f"{clock(row.ts)} ", style="dim")
        tag = KIND_TAGS.get(row.kind, row.kind)
        style = palette.fg("level-critical") if row.is_error else ("bold" if row.kind == "tool_call" else "")
        line.append(f"{tag:<7} ", style=style)
        line.append_text(literal(row.summary, limit=max(8, width - 25)))
        if row.seq in self.highlight:
            line.stylize(palette.bg("repeat-highlight"))
        if self.search:
            line.highlight_words([self.search], Style(reverse=True, bold=True), case_sensitive=False)
        line.truncate(width, overflow="ellipsis")
        return line

    # -- cursor ----------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        count = self.source.count()
        if count and not 0 <= new < count:
            self.cursor = max(0, min(count - 1, new))
            return
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.CursorMoved(self, self.source.row(new)))

    def _scroll_to_cursor(self) -> None:
        height = self.scrollable_content_region.height or 1
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        self.cursor = max(0, min(self.source.count() - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.scrollable_content_region.height - 1))

    def action_half(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.scrollable_content_region.height // 2))

    def action_open(self) -> None:
        if self.source.count():
            self.post_message(self.Open(self, self.cursor))

    def action_edge(self, end: int) -> None:
        self.cursor = self.source.count() - 1 if end else 0

    def on_click(self, event: events.Click) -> None:
        index = self.scroll_offset.y + event.y
        if 0 <= index < self.source.count():
            self.cursor = index

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def jump_to_seq(self, seq: int, highlight: frozenset[int] = frozenset()) -> None:
        """Centre event ``seq`` and highlight ``highlight`` (evidence seqs)."""
        self.highlight = highlight
        index = self.source.index_of_seq(seq)
        height = self.scrollable_content_region.height or 1
        self.follow = False
        self.scroll_to(y=max(0, index - height // 2), animate=False)
        self.cursor = index
        self.refresh()

    @property
    def current(self) -> EventRow | None:
        return self.source.row(self.cursor)
