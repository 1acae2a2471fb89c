"""The selected session's escalation state: level, ladder, what happens next.

The ladder is the configured sequence of levels for the 1st, 2nd, 3rd …
detection of the same pattern; the current rung is shown reversed, and the
"next" line says which level the next repetition brings and whether loopwatch
will inject or kill on its own (``[control] auto_inject`` / ``auto_kill``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.style import Style
from rich.text import Text

from monitor.events import Level
from monitor.ui.literal import literal
from monitor.ui.render import DEFAULT_PALETTE, LEVEL_ICONS, Palette, clock
from monitor.ui.widgets.common.text_panel import TextPanel


@dataclass(frozen=True)
class EscalationFacts:
    """What the view needs beyond the session snapshot (read from the policy)."""

    ladder: tuple[Level, ...]
    occurrences: int = 0  # detections so far of the current pattern
    proposed: Level = Level.NONE  # what the detector itself proposes for it
    acked_until: float | None = None
    auto_inject: bool = False
    auto_kill: bool = False
    keys: dict[str, str] = field(default_factory=dict)  # binding id -> key shown


def _label(title: str) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{title:<8}", style="bold")
    return text


def escalation_lines(
    info: Any, facts: EscalationFacts, now: float, palette: Palette = DEFAULT_PALETTE
) -> list[Text]:
    lines: list[Text] = []
    level: Level = info.level
    head = _label("Level")
    head.append(f"{LEVEL_ICONS[level]} {level.label.upper()}", style=palette.level(level))
    if info.detector:
        head.append("  by ")
        head.append_text(literal(info.detector))
    if level > Level.NONE and info.last_detection is not None and info.last_detection.count:
        head.append(f"  (×{info.last_detection.count})", style="dim")
    lines.append(head)
    if info.reason:
        reason = Text(f"{'Reason':<8}", style="bold")
        reason.append_text(literal(info.reason, limit=240))
        reason.no_wrap = False
        lines.append(reason)

    lines.append(_ladder_line(facts, level, palette))
    episode = getattr(info, "episode_cost", None)
    if episode is not None:  # what this loop has cost since the session left watching
        cost = _label("Cost")
        cost.append(f"{episode[1].text()} since {clock(episode[0])}", style=palette.level(Level.WARN))
        lines.append(cost)

    closed = getattr(info, "status", "live") in ("ended", "stopped")
    if closed:
        nxt = _label("Next")
        nxt.append(f"nothing: the session has {info.status}", style="dim")
        lines.append(nxt)
    else:
        lines.append(_next_line(facts, level, now, palette))

    auto = _label("")
    auto.append(
        f"auto-inject {'on' if facts.auto_inject else 'off'} · "
        f"auto-kill {'on' if facts.auto_kill else 'off'}",
        style="dim",
    )
    if getattr(info, "guard", False) and not closed:  # said only when on: the common case stays as it was
        auto.append(
            " · guard on: a call continuing a critical loop is denied", style=palette.level(Level.WARN)
        )
    lines.append(auto)
    if level >= Level.WARN and facts.keys and not closed:
        hints = _label("You")
        hints.append(
            " · ".join(
                f"{facts.keys[k]} {name}"
                for k, name in (("ack", "acknowledge"), ("inject", "inject the nudge"), ("kill", "kill"))
                if k in facts.keys
            )
        )
        lines.append(hints)
    lines += _muted_lines(info)
    return lines


def _muted_lines(info: Any) -> list[Text]:
    """The detectors muted, and the patterns marked a false positive (kept across a restart)."""
    lines = []
    if info.muted:
        muted = _label("Muted")
        muted.append_text(literal(", ".join(sorted(info.muted))))
        lines.append(muted)
    marks = getattr(info, "false_positives", ())
    if marks:
        fp = _label("False+")
        detectors = list(dict.fromkeys(detector for detector, _pattern, _since in marks))
        fp.append_text(literal(", ".join(detectors)))
        fp.append(f": marked a false positive since {clock(min(since for *_, since in marks))}", style="dim")
        lines.append(fp)
    return lines


def _ladder_line(facts: EscalationFacts, level: Level, palette: Palette) -> Text:
    """The preset's ladder, the rung the session is on shown reversed."""
    ladder = _label("Ladder")
    current = facts.occurrences - 1 if level > Level.NONE else -1
    for index, rung in enumerate(facts.ladder):
        if index:
            ladder.append("→", style="dim")
        style = palette.level(rung)
        if index == min(current, len(facts.ladder) - 1):
            style = style + Style(reverse=True)
        ladder.append(f"{LEVEL_ICONS[rung]}{rung.label}", style=style)
    return ladder


def _next_line(facts: EscalationFacts, level: Level, now: float, palette: Palette) -> Text:
    """What the next repeat does: quiet (acknowledged), warn, or the next rung."""
    nxt = _label("Next")
    if facts.acked_until and facts.acked_until > now:
        nxt.append(
            f"acknowledged — its patterns quiet until {clock(facts.acked_until)}; "
            "a new pattern, or this one twice as bad, breaks through",
            style="dim",
        )
    elif level == Level.NONE:
        nxt.append("watching: the first repetition past a threshold warns", style="dim")
    else:
        index = min(max(facts.occurrences, 0), len(facts.ladder) - 1)
        rung = max(facts.ladder[index], facts.proposed)
        # A session never steps down while it repeats: a pattern that came in above its
        # rung (or another pattern's higher level) stays where it is.
        coming = max(rung, level)
        nxt.append("next repeat → " if coming > level else "next repeat stays at ")
        nxt.append(f"{LEVEL_ICONS[coming]} {coming.label}", style=palette.level(coming))
        if coming == rung:
            nxt.append(f" (rung {index + 1}/{len(facts.ladder)})", style="dim")
    return nxt


class EscalationView(TextPanel):
    """Level, ladder and next step for the selected session."""

    def show(
        self, info: Any | None, facts: EscalationFacts | None, now: float, palette: Palette = DEFAULT_PALETTE
    ) -> None:
        if info is None or facts is None:
            self.show_renderable(Text("No session selected.", style="dim"))
            return
        self.show_renderable(Group(*escalation_lines(info, facts, now, palette)))
