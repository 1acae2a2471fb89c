"""The session's loop episodes (one row each, updated in place; a single
detection where no episode holds it); selecting one jumps the stream to its evidence."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from monitor.ui.literal import literal
from monitor.ui.records import DetectionRow
from monitor.ui.render import DEFAULT_PALETTE, LEVEL_ICONS, Palette, clock, plural


def episode_key(row: DetectionRow) -> tuple[float, str]:
    """Which episode a row is: when it began and the detector that opened it (not
    its number: the store's and a restarted watcher's numbers differ)."""
    return (round(row.first_ts, 3), row.detectors[0] if row.detectors else row.detector)


def episode_prompt(row: DetectionRow, palette: Palette = DEFAULT_PALETTE) -> Text:
    """``since 02:31:02 ✖ terminate  failure_cascade+2 ×610 · #12–#1,220 · 305 reports``, then its message."""
    text = Text()
    text.append(f"since {clock(row.first_ts)} ", style="dim")
    style = palette.level(row.level) if row.closed is None else "dim"
    text.append(f"{LEVEL_ICONS[row.level]} {row.level.label:<10}", style=style)
    text.append_text(literal(row.detector, style="bold"))
    if len(row.detectors) > 1:
        text.append(f"+{len(row.detectors) - 1}", style="bold")
    text.append(f" ×{row.count}", style="bold")
    text.append(f"  #{row.first_seq}–#{row.seq}", style="dim")
    if row.reports > 1:
        text.append(f" · {plural(row.reports, 'report')}", style="dim")
    if row.cost is not None:
        text.append(f" · loop {row.cost.short()}", style="dim")
    text.append("\n  ")
    text.append_text(literal(row.message, limit=300))
    if len(row.detectors) > 1:
        text.append(f" ({', '.join(row.detectors)})", style="dim")
    if row.closed is not None:
        text.append(f" — {row.closed}", style="dim")
    elif row.suppressed:
        text.append(f" — {row.suppressed}", style="dim")
    return text


def detection_prompt(row: DetectionRow, palette: Palette = DEFAULT_PALETTE) -> Text:
    if row.episode:
        return episode_prompt(row, palette)
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

    def upsert_rows(self, rows: list[DetectionRow]) -> None:
        """Episode rows: one already listed changes in place, a new one is added last."""
        where = {episode_key(row): at for at, row in enumerate(self.rows) if row.episode}
        fresh = []
        for row in rows:
            at = where.get(episode_key(row)) if row.episode else None
            if at is None:
                fresh.append(row)
                continue
            self.rows[at] = row
            self.replace_option_prompt_at_index(at, detection_prompt(row, self.palette))
        self.append_rows(fresh)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.rows):
            self.post_message(self.Jump(self.rows[event.option_index]))
