"""The dashboard's feed: one line per loop episode across all sessions, newest
last, each line updated in place as its loop goes on (since when, ``×count``),
not one line per repeat (monitor/detect/episodes.py)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from monitor.cost import Spend
from monitor.events import Level
from monitor.ui.literal import literal
from monitor.ui.render import DEFAULT_PALETTE, LEVEL_ICONS, Palette, clock, fit_words

FEED_LINES = 300


#: Narrower than this, an episode's line shows the level by its icon alone, leaving room
#: for who and what (it says more than a detection's did: since when, who joined, ×count).
EPISODE_COMPACT_WIDTH = 80
#: Narrower still (80 columns), the start time goes without the word "since".
TINY_WIDTH = 45


def episode_line(
    change: Any, palette: Palette = DEFAULT_PALETTE, compact: bool = False, tiny: bool = False
) -> Text:
    """``since 02:31:02 ✖ terminate  same_error failure_cascade+2 ×610: <message>``:
    when the episode began, its level, who, its detectors (the leading one, and
    how many more joined) and its count, then what its leading detector says;
    a closed one is dim and says why it closed (``×610 · stopped``)."""
    episode = change.episode
    level: Level = episode.level
    closed = episode.closed
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"{clock(episode.first_ts)} " if tiny else f"since {clock(episode.first_ts)} ", style="dim")
    line.append(
        f"{LEVEL_ICONS[level]} " if compact else f"{LEVEL_ICONS[level]} {level.label:<10}",
        style=palette.level(level) if closed is None else "dim",
    )
    line.append_text(literal(episode.session, limit=18))
    if tiny:  # (the count before who counted it: a cut line keeps it)
        line.append(f" ×{episode.count}", style="bold")
    line.append(" ")
    line.append_text(literal(episode.detector, style="bold"))
    others = len(episode.detectors) - 1
    if others > 0:
        line.append(f"+{others}", style="bold")  # other detectors that joined the same loop
    if not tiny:
        line.append(f" ×{episode.count}", style="bold")
    if closed is not None:
        line.append(f" · {closed}", style="bold")  # before the message: a cut line still says so
    detection = change.detection
    cost = Spend.from_dict(getattr(detection, "cost", None)) if detection is not None else None
    if cost is not None:
        line.append(f" [{cost.short()}]", style="dim")  # the loop's cost so far
    line.append(": ")
    line.append_text(literal(episode.message))
    if closed is not None:
        line.stylize(Style(dim=True))
    elif detection is not None and detection.suppressed:
        line.append(f" ({detection.suppressed})", style="dim")
    return line


class DetectionsFeed(ScrollView, can_focus=False):
    """The latest ``FEED_LINES`` loop episodes, one line each (newest last);
    follows the end unless scrolled up."""

    DEFAULT_CSS = "DetectionsFeed { height: 1fr; }"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.episodes: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._order: list[Any] = []
        self.palette: Palette = DEFAULT_PALETTE

    def show(self, changes: Iterable[Any], palette: Palette = DEFAULT_PALETTE) -> None:
        """Latest changes of episodes: a known episode's line changes where it is, a new one is added last."""
        self.palette = palette
        at_end = self.scroll_offset.y >= self.max_scroll_y
        for change in changes:
            episode = change.episode
            self.episodes[(episode.session, episode.number)] = change
        while len(self.episodes) > FEED_LINES:
            self.episodes.popitem(last=False)
        self._order = list(self.episodes.values())
        self.virtual_size = Size(max(1, self.scrollable_content_region.width), len(self._order))
        if at_end:
            self.scroll_end(animate=False, immediate=True)
        self.refresh()

    @property
    def lines(self) -> list[Strip]:
        """Every line as drawn now (for reading in tests)."""
        return [self._strip(index, self.scrollable_content_region.width) for index in range(len(self._order))]

    def render_line(self, y: int) -> Strip:
        return self._strip(self.scroll_offset.y + y, self.scrollable_content_region.width)

    def _strip(self, index: int, width: int) -> Strip:
        if not 0 <= index < len(self._order) or width <= 0:
            return Strip.blank(max(0, width), self.rich_style)
        compact, tiny = width < EPISODE_COMPACT_WIDTH, width < TINY_WIDTH
        line = episode_line(self._order[index], self.palette, compact=compact, tiny=tiny)
        # Cut here, at a word, rather than at any character.
        segments = list(fit_words(line, width).render(self.app.console))
        return Strip(segments).apply_style(self.rich_style).adjust_cell_length(width, self.rich_style)

    def on_resize(self) -> None:
        self.virtual_size = Size(max(1, self.scrollable_content_region.width), len(self._order))
