"""The sessions table's columns, sized from what they hold within the terminal's width.

Each text column is as wide as its longest value (between a floor and a
ceiling), so "demo-poll_progress" is not cut in the Agent column while
Session has room.  Reason, which says why a session needs attention, takes
what is left; when that is too little, columns give way in ``SHRINK`` order
(down to their floor), then whole columns are dropped in ``DROP`` order, and
only then are Session and Detector cut.
Pure functions: no Textual here, so the layout is tested on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    #: A fixed width; ``None``: sized from content between ``least`` and ``most``.
    width: int | None = None
    least: int = 0
    most: int = 0


COLUMNS: tuple[Column, ...] = (
    Column("level", "Level", 11),
    Column("agent", "Agent", most=20),
    Column("session", "Session", least=10, most=24),
    Column("status", "Status", least=6, most=7),
    Column("events", "Events", 7),
    Column("last", "Last", 4),
    Column("detector", "Detector", least=12, most=17),
    Column("similarity", "Similarity", least=10, most=16),
    Column("source", "Source", least=14, most=32),
    Column("reason", "Reason"),  # the rest of the width
)
#: Who gives way first when Reason is short of ``REASON_WANT``, and how far:
#: Source first down to its file names ("…/run.jsonl", measured as
#: ``source_name``), the others down to their floor (``least``).  Agent is
#: never cut (it is dropped instead); Session and Detector are cut only when
#: dropping columns was not enough (``LAST_RESORT``).
SHRINK = (("source", "source_name"), ("similarity", None), ("source", None))
LAST_RESORT = (("session", None), ("detector", None))
#: Whole columns dropped, in this order, while Reason would get under ``REASON_LEAST``.
DROP = ("source", "events", "agent", "similarity", "status")
REASON_WANT, REASON_LEAST, MIN_REASON = 28, 20, 12
#: With Reason widened (``R``): what it wants, and what it keeps by dropping columns.
WIDE_WANT, WIDE_LEAST = 90, 60
#: Columns that cannot be hidden (``C``): a row must say which session and how bad.
ALWAYS_SHOWN = frozenset({"level", "session", "reason"})
#: Cells of padding per column, and the table's own edges (scrollbar, border).
PAD, EDGE = 2, 4
#: Content widths not measured: the similarity column always wants its full
#: sparkline, and Detector the longest detector name (so that a session's first
#: detection never changes the layout).
DEFAULT_NATURAL = {"similarity": 16, "detector": 17}


def layout(
    width: int, natural: Mapping[str, int], hidden: frozenset[str] = frozenset(), reason_wide: bool = False
) -> list[tuple[str, str, int]]:
    """(key, label, width) of each shown column for a table ``width`` cells
    wide whose longest values are ``natural`` (cells, by column key); ``hidden``
    columns are left out, and ``reason_wide`` gives Reason the room the others
    would take (they shrink, then are dropped in ``DROP`` order)."""
    gone = tuple(sorted(hidden - ALWAYS_SHOWN))
    want, least = (WIDE_WANT, WIDE_LEAST) if reason_wide else (REASON_WANT, REASON_LEAST)
    least = min(least, max(REASON_LEAST, width // 2))
    for dropped in range(len(DROP) + 1):
        shown, sizes, spare = _fit(width, natural, gone + DROP[:dropped], SHRINK, want)
        if spare >= least:
            break
    else:
        shown, sizes, spare = _fit(width, natural, gone + DROP, SHRINK + LAST_RESORT, want)
    sizes["reason"] = max(MIN_REASON, spare)
    return [(c.key, c.label, sizes[c.key]) for c in shown]


def _fit(
    width: int,
    natural: Mapping[str, int],
    gone: tuple[str, ...],
    steps: tuple[tuple[str, str | None], ...],
    want: int = REASON_WANT,
) -> tuple[list[Column], dict[str, int], int]:
    """The columns not ``gone`` at their content widths, shrunk by ``steps``
    until Reason has ``REASON_WANT``; and what is left for Reason."""
    shown = [c for c in COLUMNS if c.key not in gone]
    sizes = {
        c.key: c.width if c.width is not None else _wanted(c, natural) for c in shown if c.key != "reason"
    }
    spare = width - EDGE - PAD * len(shown) - sum(sizes.values())
    least = {c.key: c.least for c in shown if c.width is None}
    for key, soft in steps:
        if spare >= want:
            break
        if key in least and key in sizes:
            floor = max(least[key], natural.get(soft, 0)) if soft else least[key]
            give = min(sizes[key] - floor, want - spare)
            if give > 0:
                sizes[key] -= give
                spare += give
    return shown, sizes, spare


def _wanted(column: Column, natural: Mapping[str, int]) -> int:
    """The column's content width, never under its label, never over ``most``."""
    content = natural.get(column.key, DEFAULT_NATURAL.get(column.key, 0))
    return min(column.most, max(len(column.label), content))
