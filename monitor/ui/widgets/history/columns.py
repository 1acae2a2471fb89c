"""The history table's columns, fitted to the terminal's width.

Every column has a width it wants and a floor; when the table is too narrow, columns shrink to their
floor in ``SHRINK`` order, then whole columns go in ``DROP`` order (the least telling first), so that at
80 columns Started, Agent, Session, the final and peak levels and Events stay, each cut with "…" at
worst.  Source takes what is left once the others have what they want.  Pure: no Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HistoryColumn:
    key: str
    label: str
    want: int
    least: int


COLUMNS: tuple[HistoryColumn, ...] = (
    HistoryColumn("started", "Started", 16, 11),  # 2026-05-01 14:00, or 05-01 14:00
    HistoryColumn("agent", "Agent", 18, 10),
    HistoryColumn("session", "Session", 28, 14),
    HistoryColumn("status", "Status", 7, 7),
    HistoryColumn("level", "Final", 11, 11),
    HistoryColumn("peak", "Peak", 11, 11),
    HistoryColumn("events", "Events", 8, 6),
    HistoryColumn("duration", "Length", 7, 7),
    HistoryColumn("loops", "Loop cost", 9, 9),
    HistoryColumn("detector", "Detector", 17, 12),
    HistoryColumn("source", "Source", 40, 14),
)
SHRINK = ("source", "session", "agent", "detector", "started", "events")
DROP = ("loops", "duration", "source", "status", "detector")
#: Cells of padding per column, and the table's own edges (scrollbar, border).
PAD, EDGE = 2, 4


def history_layout(width: int) -> list[tuple[str, str, int]]:
    """(key, label, width) of each column shown in a table ``width`` cells wide."""
    for dropped in range(len(DROP) + 1):
        shown = [c for c in COLUMNS if c.key not in DROP[:dropped]]
        sizes = {c.key: c.want for c in shown}
        room = width - EDGE - PAD * len(shown)
        for key in SHRINK:
            over = sum(sizes.values()) - room
            if over <= 0:
                break
            if key in sizes:
                column = next(c for c in shown if c.key == key)
                sizes[key] = max(column.least, sizes[key] - over)
        if sum(sizes.values()) <= room:
            if "source" in sizes:  # the rest of the width
                sizes["source"] += room - sum(sizes.values())
            return [(c.key, c.label, sizes[c.key]) for c in shown]
    return [(c.key, c.label, sizes[c.key]) for c in shown]  # narrower than any fit: cut at the edge
