"""Detections as they arrive, newest at the bottom, across all sessions."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from monitor.cost import Spend
from monitor.events import Level
from monitor.ui.literal import literal
from monitor.ui.render import DEFAULT_PALETTE, LEVEL_ICONS, Palette, clock, fit_words

FEED_LINES = 300


#: Narrower than this, a feed line shows the level by its icon alone, leaving room for who and what.
COMPACT_WIDTH = 60


def detection_line(detection: Any, palette: Palette = DEFAULT_PALETTE, compact: bool = False) -> Text:
    level: Level = detection.level
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"{clock(detection.ts)} ", style="dim")
    line.append(
        f"{LEVEL_ICONS[level]} " if compact else f"{LEVEL_ICONS[level]} {level.label:<10}",
        style=palette.level(level),
    )
    line.append_text(literal(detection.session, limit=18))
    line.append(" ")
    line.append_text(literal(detection.detector, style="bold"))
    cost = Spend.from_dict(getattr(detection, "cost", None))
    if cost is not None:
        line.append(f" [{cost.short()}]", style="dim")  # the loop's cost so far
    line.append(": ")
    line.append_text(literal(detection.message))
    if detection.suppressed:
        line.append(f" ({detection.suppressed})", style="dim")
    return line


class DetectionsFeed(RichLog):
    """A bounded log of detections (``notice`` and up)."""

    def __init__(self, **kwargs: Any):
        super().__init__(max_lines=FEED_LINES, wrap=False, markup=False, auto_scroll=True, **kwargs)

    def add(self, detections: list[Any], palette: Palette = DEFAULT_PALETTE) -> None:
        # Lines are cut here, at a word, rather than by the log at any character.
        width = self.scrollable_content_region.width
        if width <= 0 and not self.size.width:  # not laid out yet: write once it is
            self.call_after_refresh(self.add, detections, palette)
            return
        for detection in detections[-FEED_LINES:]:
            line = detection_line(detection, palette, compact=0 < width < COMPACT_WIDTH)
            self.write(fit_words(line, width) if width > 0 else line)
