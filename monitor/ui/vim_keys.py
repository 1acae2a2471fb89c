"""vim keys beside the arrows: one set of bindings for the tables, the event
list and the scrollable panes, each with its own actions and keymap ids."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding

#: j, k, g, G, ctrl+d, ctrl+u: down, up, first, last, half a page down, half a page up.
VIM_KEYS = ("j", "k", "g", "G", "ctrl+d", "ctrl+u")


def vim_bindings(
    actions: tuple[str, str, str, str, str, str], ids: tuple[str, str, str, str, str, str], noun: str
) -> list[Binding]:
    """Hidden bindings of ``VIM_KEYS`` to ``actions`` under the keymap ``ids``;
    the tooltips (the help screen's text) name what moves: ``noun``."""
    descriptions = ("Down", "Up", "First", "Last", "Half page down", "Half page up")
    tooltips = (
        f"Next {noun} (also ↓)",
        f"Previous {noun} (also ↑)",
        f"First {noun} (also home)",
        f"Last {noun} (also end)",
        "Half a page down (also pgdn: a page)",
        "Half a page up (also pgup: a page)",
    )
    return [
        Binding(key, action, description, show=False, id=id_, tooltip=tooltip)
        for key, action, description, id_, tooltip in zip(VIM_KEYS, actions, descriptions, ids, tooltips)
    ]


def scroll_pane(pane: Any, where: str) -> None:
    """Scroll a pane ``down``/``up`` a line, to its ``home``/``end``, or
    ``half_down``/``half_up`` half its height (ctrl+d / ctrl+u)."""
    if where in ("half_down", "half_up"):
        step = max(1, pane.size.height // 2)
        pane.scroll_relative(y=step if where == "half_down" else -step, animate=False)
    else:
        getattr(pane, f"scroll_{where}")(animate=False)
