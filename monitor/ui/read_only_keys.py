"""An operator key pressed where nothing can be acted on says why (issue 33 §3).

A stored session (``loopwatch open``, a session opened from the history) and
the history itself hide the operator actions (acknowledge, inject, kill…):
there is no live agent to act on.  The key used to do nothing at all; it now
says the view is read-only and where the action works.  A key typed into a
filter, or bound to something else on the screen, is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual import events
from textual.widgets import Input

from monitor.ui.operator import OPERATOR_BINDINGS, OPERATOR_COMMANDS


def operator_keys(keymap: Mapping[str, str]) -> dict[str, str]:
    """Key -> operator action, as the keymap binds them."""
    out: dict[str, str] = {}
    for binding in OPERATOR_BINDINGS:
        spec = keymap.get(binding.id or "", binding.key)
        for key in spec.split(","):
            out.setdefault(key.strip(), binding.action)
    return out


class ReadOnlyKeys:
    """Mixed into a screen: :meth:`read_only_view` says whether it is read-only now."""

    app: Any
    focused: Any
    active_bindings: Any

    def read_only_view(self) -> str | None:
        """What is read-only ("this stored session", "the history"), or None."""
        return None

    def on_key(self, event: events.Key) -> None:
        what = self.read_only_view()
        if what is None or isinstance(self.focused, Input):
            return
        action = operator_keys(self.app.config.ui.keymap).get(event.key)
        if action is None:
            return
        active = self.active_bindings.get(event.key)
        if active is not None and active.enabled and active.binding.action not in OPERATOR_COMMANDS:
            return  # the screen's own use of the key
        title = OPERATOR_COMMANDS[action][0].lower()
        self.app.notify(
            f"{what} is read-only: {title} acts on a live session only (in `loopwatch watch`).",
            title="Read-only",
            markup=False,
        )
        event.stop()
        event.prevent_default()
