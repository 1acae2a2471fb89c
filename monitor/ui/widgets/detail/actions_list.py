"""The operator actions taken on the session and their outcomes."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from monitor.ui.literal import literal
from monitor.ui.records import ActionRow
from monitor.ui.render import DEFAULT_PALETTE, Palette, clock

OUTCOME_STYLE = {
    "delivered": "status-live",
    "pending": "level-notice",
    "failed": "level-terminate",
    "refused": "level-critical",
    "unsupported": "level-warn",
}


def action_line(row: ActionRow, palette: Palette = DEFAULT_PALETTE) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{clock(row.ts)} ", style="dim")
    text.append(f"{row.kind:<15}", style="bold")
    text.append(f"{row.outcome:<11}", style=palette.fg(OUTCOME_STYLE.get(row.outcome, "level-watching")))
    if row.detail:
        text.append_text(literal(row.detail))
    if row.text:
        text.append("  “")
        text.append_text(literal(row.text, limit=60))
        text.append("”")
    if row.who:
        text.append(f"  by {row.who}", style="dim")
    return text


def false_positive_line(detector: str, pattern: str, since: float) -> Text:
    """One pattern marked a false positive: muted in this session since then."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{clock(since)} ", style="dim")
    text.append(f"{'not a loop':<15}", style="bold")
    text.append_text(literal(detector))
    text.append(" ")
    text.append_text(literal(pattern, limit=120, style="dim"))
    text.append("  muted as a false positive", style="dim")
    return text


class ActionsList(Static):
    """Latest state of each action (a pending row is replaced by its outcome),
    after the patterns marked a false positive (``false_positives``)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.rows: dict[int, ActionRow] = {}
        self.palette: Palette = DEFAULT_PALETTE
        #: ``(detector, pattern, since)`` of each pattern marked a false positive.
        self.false_positives: tuple[tuple[str, str, float], ...] = ()

    def set_false_positives(self, marks: Any) -> None:
        marks = tuple((str(d), str(p), float(since or 0.0)) for d, p, since in marks)
        if marks != self.false_positives:
            self.false_positives = marks
            self.add_rows([])

    def set_rows(self, rows: list[ActionRow]) -> None:
        self.rows = {}
        self.add_rows(rows)

    def add_rows(self, rows: list[ActionRow]) -> None:
        for row in rows:
            self.rows[row.id or -len(self.rows) - 1] = row
        marks = [false_positive_line(*mark) for mark in self.false_positives]
        if not self.rows:
            self.update(Group(*marks, Text("No actions yet.", style="dim")))
            return
        ordered = sorted(self.rows.values(), key=lambda r: (r.ts, r.id))
        self.update(Group(*marks, *(action_line(r, self.palette) for r in ordered)))
