"""Bounded tables of answers that depend on a text alone, shared by every session.

An agent runs the same commands again and again (``pytest -q``) and a loop
fails the same way again, so what is worked out of a command line or an
output is remembered by its text.  Each table keeps texts up to a length and
is emptied when full: bounded whatever the agents write."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from monitor.text import RESULT_TEXT, SIMILARITY_CHARS, normalize


class TextMemo(dict[Any, Any]):
    """``work``'s answers by text (or by a key made of one), for texts up to
    ``max_chars`` long, at most ``max_size`` of them.  A dict that works out
    what it is missing: ``memo[text]`` is the answer, and a hit is one
    subscript, in C (asked several times an event, a Python call around the
    look-up would cost several times the look-up)."""

    __slots__ = ("max_chars", "max_size", "work")

    def __init__(self, max_chars: int, max_size: int, work: Callable[[Any], Any] | None = None):
        super().__init__()
        self.max_chars = max_chars
        self.max_size = max_size
        self.work = work

    def __missing__(self, text: Any) -> Any:
        """``work(text)``, remembered when ``text`` is short enough (a key
        that is not text, such as a tool's missing name, always is)."""
        if self.work is None:
            raise KeyError(text)
        value = self.work(text)
        if text.__class__ is not str or len(text) <= self.max_chars:
            self.remember(text, value)
        return value

    def keeps(self, text: str) -> bool:
        """Whether answers about ``text`` are remembered."""
        return len(text) <= self.max_chars

    def remember(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` under ``key`` (emptying the table when full); ``value``."""
        if len(self) >= self.max_size:
            self.clear()
        self[key] = value
        return value


def _normalized_result(text: str) -> str:
    return normalize(text, RESULT_TEXT, SIMILARITY_CHARS)


#: Result texts, clipped, by :data:`~monitor.text.RESULT_TEXT` (what
#: ``CallRecord`` and ``Outcome`` compare): a loop gets the same output again and again.
NORMALIZED_RESULTS = TextMemo(SIMILARITY_CHARS, 512, _normalized_result)
