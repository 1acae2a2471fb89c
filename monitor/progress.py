"""A one-line progress bar on stderr for long offline work (``scan``).

Drawn only when the stream is a terminal (a pipe or a file gets nothing), at
most ten times a second, and erased when the work ends so the report that
follows starts on a clean line.  Shows files, events, the rate and the time
left (estimated from the bytes read so far).  No Textual: ``scan`` is core.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

BAR = 20


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """``update()`` often; ``finish()`` once."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool | None = None,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.stream = stream if stream is not None else sys.stderr
        # The bar's own codes (\r, erase to the end of the line) are written as
        # such; its text holds no agent data (monitor.text.PrintableStream).
        self.stream = getattr(self.stream, "unescaped", self.stream)
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._next = float("-inf")
        self._files = -1
        self.drawn = 0

    def update(
        self, files_done: int, files_total: int, bytes_done: int, bytes_total: int, events: int
    ) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now < self._next and files_done == self._files:
            return  # at most ``interval`` apart, but every new file is shown
        self._next = now + self.interval
        self._files = files_done
        self.stream.write(
            "\r" + self.line(files_done, files_total, bytes_done, bytes_total, events, now) + "\x1b[K"
        )
        self.stream.flush()
        self.drawn += 1

    def line(
        self, files_done: int, files_total: int, bytes_done: int, bytes_total: int, events: int, now: float
    ) -> str:
        elapsed = max(1e-6, now - self.started)
        fraction = min(1.0, bytes_done / bytes_total) if bytes_total else 0.0
        filled = int(fraction * BAR)
        left = _clock(elapsed * (1 - fraction) / fraction) if fraction > 0.01 else "?"
        text = (
            f"[{'█' * filled}{'░' * (BAR - filled)}] {fraction:4.0%}  {files_done}/{files_total} files"
            f" · {events:,} events · {events / elapsed:,.0f}/s · {left} left"
        )
        width = shutil.get_terminal_size((100, 24)).columns
        return text[: max(10, width - 1)]

    def finish(self) -> None:
        """Erase the bar (if one was drawn)."""
        if self.enabled and self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
