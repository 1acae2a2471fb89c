"""The history screen's filter bar: agent, since, level, text."""

from __future__ import annotations

import re
from datetime import datetime

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Select

from monitor.events import Level

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
LEVEL_CHOICES = [
    (f"≥ {level.label}", level.label) for level in (Level.NOTICE, Level.WARN, Level.CRITICAL, Level.TERMINATE)
]


def parse_since(text: str, now: float) -> float | None:
    """Epoch seconds for the ``since`` filter; ``ValueError`` if unreadable."""
    text = text.strip()
    if not text:
        return None
    match = _DURATION.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(
            f"since: expected a date (2026-05-01) or a duration (12h, 3d), got {text!r}"
        ) from None


class HistoryFilters(Horizontal):
    """Four filters; the screen reloads on every change."""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="agent", id="agent")
        yield Input(placeholder="since: 2026-05-01 or 12h", id="since")
        yield Select(LEVEL_CHOICES, prompt="any level", id="level", allow_blank=True)
        yield Input(placeholder="search any text", id="text")

    def values(self, now: float) -> dict:
        """The store's ``list_sessions`` filters; ``ValueError`` for a bad date."""
        level = self.query_one("#level", Select).value
        return {
            "agent": self.query_one("#agent", Input).value.strip() or None,
            "since": parse_since(self.query_one("#since", Input).value, now),
            "level": level if isinstance(level, str) else None,
            "text": self.query_one("#text", Input).value.strip() or None,
        }

    def prefill(self, filters: dict) -> None:
        """Start from the command line's filters (``history --tui --agent …``)."""
        with self.prevent(Input.Changed, Select.Changed):
            if filters.get("agent"):
                self.query_one("#agent", Input).value = filters["agent"]
            if filters.get("since"):
                self.query_one("#since", Input).value = datetime.fromtimestamp(filters["since"]).strftime(
                    "%Y-%m-%d %H:%M"
                )
            if filters.get("level") in {value for _, value in LEVEL_CHOICES}:
                self.query_one("#level", Select).value = filters["level"]
            if filters.get("text"):
                self.query_one("#text", Input).value = filters["text"]
