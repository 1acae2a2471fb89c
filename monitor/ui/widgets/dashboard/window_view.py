"""The selected session's detection window: what the detectors compare now.

Each line is one event of ``SessionInfo.window``; events whose fingerprint
(tool + canonical arguments, normalized result, or message text) occurs more
than once in the window are highlighted with the theme's ``repeat-highlight``
and marked ``×N`` — a loop shows as a block of highlighted lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.text import Text

from monitor.events import Event, Kind, Level
from monitor.text import call_key, result_key, squash_ws
from monitor.ui.literal import literal
from monitor.ui.render import DEFAULT_PALETTE, Palette, clock
from monitor.ui.widgets.common.text_panel import TextPanel

KIND_TAGS = {
    Kind.TOOL_CALL: "call",
    Kind.TOOL_RESULT: "result",
    Kind.MESSAGE: "msg",
    Kind.SESSION_START: "start",
    Kind.SESSION_END: "end",
    Kind.USAGE: "usage",
    Kind.COMPACTION: "compact",
    Kind.WAITING: "wait",
}


def fingerprint(event: Event) -> str:
    """What makes two window events 'the same' for highlighting."""
    if event.kind is Kind.TOOL_CALL:
        return "call:" + call_key(event)
    if event.kind is Kind.TOOL_RESULT:
        return "result:" + result_key(event)
    return f"{event.kind.value}:{event.role}:{squash_ws(event.content)[:500]}"


def window_lines(window: Sequence[Event], width: int, palette: Palette = DEFAULT_PALETTE) -> list[Text]:
    """One literal line per event; repeated ones highlighted and counted."""
    keys = [fingerprint(e) for e in window]
    counts = Counter(keys)
    lines: list[Text] = []
    for event, key in zip(window, keys):
        repeats = counts[key]
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{event.seq:>6} ", style="dim")
        line.append(f"{clock(event.ts)} ", style="dim")
        tag = KIND_TAGS.get(event.kind, event.kind.value)
        line.append(f"{tag:<6} ", style="bold" if event.kind is Kind.TOOL_CALL else "")
        marker = f"×{repeats:<3}" if repeats > 1 else "    "
        line.append(marker, style=palette.level(Level.WARN) if repeats > 1 else "")
        line.append_text(literal(event.summary(max(10, width)), limit=max(10, width - 24)))
        if repeats > 1:
            line.stylize(palette.bg("repeat-highlight"))
        lines.append(line)
    return lines


class WindowView(TextPanel):
    """The events the detectors compare, repeated ones highlighted."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._shown: tuple[Any, ...] | None = None
        self.lines: list[Text] = []

    def show(
        self, window: tuple[Event, ...] | None, palette: Palette = DEFAULT_PALETTE, force: bool = False
    ) -> None:
        if window is self._shown and not force:
            return
        self._shown = window
        if not window:
            self.lines = []
            self.show_renderable(Text("No calls in the window yet.", style="dim"))
            return
        width = max(20, self.size.width or 80)
        self.lines = window_lines(window, width, palette)
        self.show_renderable(Group(*self.lines))
