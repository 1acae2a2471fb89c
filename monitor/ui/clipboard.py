"""Copy to the clipboard (Textual's ``copy_to_clipboard``: OSC 52 in terminals
that allow it) with a toast that says what was copied.

The toast names the thing copied and its size, never its content; what is
named comes from the agent (a tool name, a detector) so it is shown with
``markup=False`` and control characters made visible.
"""

from __future__ import annotations

from typing import Any

from monitor.ui.literal import visible


def copy_text(app: Any, text: str, what: str) -> None:
    """Put ``text`` on the clipboard and say so (``what``: "event #12")."""
    app.copy_to_clipboard(text)
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    app.notify(
        visible(f"Copied {what} ({len(text):,} characters, {lines:,} lines)"),
        title="Clipboard",
        markup=False,
        timeout=4,
    )
