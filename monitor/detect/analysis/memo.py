"""Bounded tables of answers that depend on a text alone, shared by every session.

An agent runs the same commands again and again (``pytest -q``) and a loop
fails the same way again, so what is worked out of a command line or an
output is remembered by its text.  Each table keeps texts up to a length and
is emptied when full: bounded whatever the agents write."""

from __future__ import annotations

from typing import Any, Callable, Hashable

from monitor.text import SIMILARITY_CHARS


class TextMemo(dict):
    """Answers by text (or by a key made of one), for texts up to
    ``max_chars`` long, at most ``max_size`` of them.  A dict, so that a hit
    is one ``get``."""

    __slots__ = ("max_chars", "max_size")

    def __init__(self, max_chars: int, max_size: int):
        super().__init__()
        self.max_chars = max_chars
        self.max_size = max_size

    def answer(self, text: str, work: Callable[[str], Any]) -> Any:
        """``work(text)``, remembered when ``text`` is short enough."""
        if len(text) > self.max_chars:
            return work(text)
        found = self.get(text)
        if found is None:
            found = self.remember(text, work(text))
        return found

    def keeps(self, text: str) -> bool:
        """Whether answers about ``text`` are remembered."""
        return len(text) <= self.max_chars

    def remember(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` under ``key`` (emptying the table when full); ``value``."""
        if len(self) >= self.max_size:
            self.clear()
        self[key] = value
        return value


#: ``normalize_result`` of clipped result texts (what ``CallRecord`` and
#: ``Outcome`` compare): a loop gets the same output again and again.
NORMALIZED_RESULTS = TextMemo(SIMILARITY_CHARS, 512)
