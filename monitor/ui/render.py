"""Small pure renderers shared by the widgets: levels, sparklines, times.

Colours come from the active theme's variables (:class:`Palette`), so a theme
switch re-colours everything; nothing here parses markup.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.color import Color as RichColor
from rich.style import Style
from rich.text import Text
from textual.color import Color, ColorParseError

from monitor.events import Level
from monitor.ui.themes import DOMAIN_VARIABLES

BARS = " ▁▂▃▄▅▆▇█"
LEVEL_ICONS = {Level.NONE: "·", Level.NOTICE: "○", Level.WARN: "▲", Level.CRITICAL: "◆", Level.TERMINATE: "✖"}


def _rich(value: str, fallback: str) -> RichColor:
    try:
        return Color.parse(value).rich_color
    except ColorParseError:
        return Color.parse(fallback).rich_color


@dataclass(frozen=True)
class Palette:
    """Rich styles for the domain colours of the active theme."""

    colors: Mapping[str, RichColor]

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> Palette:
        return cls(
            {name: _rich(variables.get(name, default), default) for name, default in DOMAIN_VARIABLES.items()}
        )

    def fg(self, name: str, *, bold: bool = False) -> Style:
        return Style(color=self.colors[name], bold=bold)

    def bg(self, name: str) -> Style:
        return Style(bgcolor=self.colors[name])

    def level(self, level: Level) -> Style:
        return Style(color=self.colors[f"level-{level.label}"], bold=level >= Level.WARN)

    def spark(self, value: float) -> Style:
        low, high = self.colors["spark-low"], self.colors["spark-high"]
        if low.triplet is None or high.triplet is None:  # ANSI colours: no blending
            return Style(color=high if value >= 0.6 else low)
        a, b = low.triplet, high.triplet
        t = max(0.0, min(1.0, value))
        mixed = tuple(int(x + (y - x) * t) for x, y in zip(a, b))
        return Style(color=RichColor.from_rgb(*mixed))


DEFAULT_PALETTE = Palette.from_variables(DOMAIN_VARIABLES)


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 event``, ``2 events``, ``1,234 events`` (``words``: an irregular plural)."""
    return f"{count:,} {word if count == 1 else (words or word + 's')}"


def short_path(path: str, width: int) -> str:
    """``path`` in ``width`` characters, keeping its file name: leading
    directories give way first (``…/agents/run.jsonl``, then ``run.jsonl``),
    then the middle of the name (the extension stays)."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    kept = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + 1 + len(kept) + 2 > width:
            break
        kept = f"{part}/{kept}"
    if len(kept) + 2 <= width:
        return "…/" + kept
    name = parts[-1]
    if len(name) <= width:  # the bare name, rather than cut it for "…/"
        return name
    if width < 2:
        return name[:width]
    extension = name[name.rfind(".") :] if "." in name[1:] else ""
    tail = max((width - 1) // 2, min(len(extension), width - 2))
    head = width - 1 - tail
    return name[:head] + "…" + name[len(name) - tail :]


def fit_words(line: Text, width: int) -> Text:
    """``line`` cut to ``width`` cells at a word boundary, ending in ``…``, so
    that a number is never shown half ("called 1…" for 13 times)."""
    if line.cell_len <= width or width < 2:
        return line
    plain = line.plain
    room = width - 1
    cut = plain.rfind(" ", 0, room + 1)
    if cut < room // 2:  # no space in the latter half: cut the word
        cut = room
    shown = line[: cut + 1] if cut < room else line[:room]
    shown.append("…")
    return shown


#: Between fields of one line: visible, so a label never reads as part of the
#: value before it (screen readers and copied text drop edge spaces).
SEP = " · "


def level_text(level: Level, palette: Palette = DEFAULT_PALETTE) -> Text:
    """``▲ warn`` in the level's colour (the label too, not colour alone)."""
    return Text(f"{LEVEL_ICONS[level]} {level.label}", style=palette.level(level))


def spark_text(values: Sequence[float], width: int, palette: Palette = DEFAULT_PALETTE) -> Text:
    """A one-line sparkline on a fixed 0..1 scale (the last ``width`` values)."""
    recent = list(values)[-width:]
    idle = Style(color=palette.colors["level-watching"], dim=True)
    text = Text("▁" * (width - len(recent)), style=idle)
    run, run_level = "", -1  # consecutive equal bars share one span (cheaper to render)
    for value in recent:
        level = round(max(0.0, min(1.0, float(value))) * 8)
        if level != run_level and run:
            text.append(run, palette.spark(run_level / 8) if run_level > 0 else idle)
            run = ""
        run_level = level
        run += BARS[level] if level > 0 else "▁"
    if run:
        text.append(run, palette.spark(run_level / 8) if run_level > 0 else idle)
    return text


def spark_rows(
    values: Sequence[float], width: int, height: int, palette: Palette = DEFAULT_PALETTE
) -> list[Text]:
    """A ``height``-line sparkline on a fixed 0..1 scale, top line first."""
    recent = [max(0.0, min(1.0, float(v))) for v in list(values)[-width:]]
    pad = width - len(recent)
    rows: list[Text] = []
    for row in reversed(range(height)):
        line = Text(
            "▁" * pad if row == 0 else " " * pad,
            style=Style(color=palette.colors["level-watching"], dim=True),
        )
        for v in recent:
            eighths = round(v * height * 8) - row * 8
            if row == 0 and eighths <= 0:
                line.append("▁", Style(color=palette.colors["level-watching"], dim=True))
            else:
                line.append(BARS[max(0, min(8, eighths))], palette.spark(v))
        rows.append(line)
    return rows


def ago(ts: float | None, now: float) -> str:
    """``3s``, ``4m``, ``2h``, ``5d`` since ``ts`` (``-`` when unknown)."""
    if not ts:
        return "-"
    delta = max(0.0, now - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit}"
    return f"{int(delta)}s"


def clock(ts: float | None) -> str:
    """``HH:MM:SS`` in UTC-independent local time (``-`` when unknown)."""
    if not ts:
        return "-"
    try:
        return time.strftime("%H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):  # a time no clock shows
        return "?"


def date_time(ts: float | None, *, seconds: bool = False) -> str:
    """``2026-01-01 09:00`` local time (``seconds``: ``09:00:07``; ``-`` when unknown)."""
    if not ts:
        return "-"
    try:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "?"
