"""The header line: sessions live, warnings open, events/s, at a glance."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from monitor.cost import Spend
from monitor.events import Level
from monitor.ui.render import DEFAULT_PALETTE, SEP, Palette, plural
from monitor.ui.widgets.common.text_panel import TextPanel


class CountsBar(TextPanel):
    """``loopwatch  ● 12 live · ▲ 3 warnings open · loops today $4.20 · 154.0 events/s · 9,120 events``."""

    def show(
        self,
        *,
        live: int,
        warnings: int,
        events_per_sec: float,
        total: int,
        problems: int = 0,
        title: str = "loopwatch",
        palette: Palette = DEFAULT_PALETTE,
        loop_cost: Spend | None = None,
        store: str = "",
        waiting: int = 0,
    ) -> None:
        text = Text()
        text.append(f" {title} ", style="bold reverse")
        text.append("  ● ", style=palette.fg("status-live"))
        text.append(f"{live} live", style="bold")
        if waiting:  # blocked on the person: neither working nor looping
            text.append(SEP)
            text.append("◆ ", style=palette.fg("status-waiting"))
            text.append(f"{waiting} waiting for input", style="bold")
        warn_style = palette.level(Level.WARN) if warnings else palette.fg("level-watching")
        text.append(SEP)
        text.append("▲ ", style=warn_style)
        text.append(f"{plural(warnings, 'warning')} open", style="bold" if warnings else "")
        if loop_cost:  # measured: what loop episodes spent today, shown once there is some
            text.append(SEP)
            text.append(f"loops today {loop_cost.short()}", style=palette.level(Level.WARN))
        text.append(f"{SEP}{events_per_sec:,.1f} events/s")
        text.append(SEP)
        text.append(plural(total, "event"), style="dim")
        if problems:
            text.append(SEP)
            text.append(plural(problems, "bad line"), style=palette.fg("level-critical"))
        if store:  # a full disk, rows lost: the operator must know the record is incomplete
            text.append(SEP)
            text.append(f" {store} ", style=palette.fg("level-critical", bold=True) + Style(reverse=True))
        self.show_renderable(text)
