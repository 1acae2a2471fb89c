"""Show agent text literally: never as markup, never as terminal escapes.

Agent output routinely contains ``[bold]``, ``[link=…]`` and ANSI escape
sequences.  Everything the UI shows from an agent goes through :func:`literal`
(a :class:`rich.text.Text`, which is never parsed as markup) and control
characters become visible pictures (``ESC`` is shown as ``␛``), so a hostile or
noisy agent can neither style the UI nor move the terminal's cursor.
"""

from __future__ import annotations

from rich.markup import escape
from rich.style import Style
from rich.text import Text

from monitor.text import CONTROL_PICTURES

#: Translation table: every C0/C1 control character (and bidi control) to a visible picture.
_CONTROLS = dict(CONTROL_PICTURES)
_ONE_LINE = dict(_CONTROLS)
_ONE_LINE[ord("\n")] = "⏎"
_ONE_LINE[ord("\t")] = " "
_MULTI_LINE = dict(_CONTROLS)
del _MULTI_LINE[ord("\n")]
_MULTI_LINE[ord("\t")] = "    "


def visible(text: str | None, *, multiline: bool = False) -> str:
    """``text`` with control characters replaced by visible pictures."""
    if not text:
        return ""
    return str(text).translate(_MULTI_LINE if multiline else _ONE_LINE)


def literal(
    text: str | None, style: str | Style = "", *, multiline: bool = False, limit: int | None = None
) -> Text:
    """A :class:`Text` that displays ``text`` exactly as characters."""
    shown = visible(text, multiline=multiline)
    if limit is not None and len(shown) > limit:
        shown = shown[: max(0, limit - 1)] + "…"
    return Text(shown, style=style, no_wrap=not multiline, overflow="ellipsis" if not multiline else "fold")


def plain_markup(text: str | None) -> str:
    """Agent text made safe for a markup string (``notify``, ``Static``)."""
    return escape(visible(text, multiline=True))
