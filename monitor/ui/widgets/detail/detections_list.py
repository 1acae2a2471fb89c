"""The session's detections; selecting one jumps the stream to its evidence."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from monitor.ui.literal import literal
from monitor.ui.records import DetectionRow
from monitor.ui.render import DEFAULT_PALETTE, LEVEL_ICONS, Palette, clock, plural


def detection_prompt(row: DetectionRow, palette: Palette = DEFAULT_PALETTE) -> Text:
    text = Text()
    text.append(f"{clock(row.ts)} ", style="dim")
    text.append(f"{LEVEL_ICONS[row.level]} {row.level.label:<10}", style=palette.level(row.level))
    text.append_text(literal(row.detector, style="bold"))
    text.append(f"  #{row.seq}", style="dim")
    if row.evidence:
        text.append(f" · {plural(len(row.evidence), 'event')}", style="dim")
    if row.cost is not None:
        text.append(f" · loop {row.cost.short()}", style="dim")  # its episode's cost so far
    text.append("\n  ")
    text.append_text(literal(row.message, limit=300))
    if row.suppressed:
        text.append(f" — {row.suppressed}", style="dim")
    return text


class DetectionsList(OptionList):
    """Newest last; enter or click jumps to the evidence."""

    class Jump(Message):
        def __init__(self, row: DetectionRow):
            super().__init__()
            self.row = row

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.rows: list[DetectionRow] = []
        self.palette: Palette = DEFAULT_PALETTE

    def set_rows(self, rows: list[DetectionRow]) -> None:
        self.rows = list(rows)
        self.clear_options()
        if not self.rows:
            self.add_option(Option(Text("No detections.", style="dim"), id="none", disabled=True))
            return
        self.add_options([Option(detection_prompt(r, self.palette)) for r in self.rows])

    def append_rows(self, rows: list[DetectionRow]) -> None:
        if not rows:
            return
        if not self.rows:
            self.clear_options()
        at_end = self.highlighted is None or self.highlighted >= len(self.rows) - 1
        self.rows.extend(rows)
        self.add_options([Option(detection_prompt(r, self.palette)) for r in rows])
        if at_end:
            self.scroll_end(animate=False)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.rows):
            self.post_message(self.Jump(self.rows[event.option_index]))
