"""What the dashboard says with no session: what is watched, the socket, how to connect an agent."""

from __future__ import annotations

from rich.text import Text

from monitor.ui.literal import literal
from monitor.ui.watched import Watched, connect_lines
from monitor.ui.widgets.common.text_panel import TextPanel


def empty_text(facts: Watched, filtered: str = "") -> Text:
    """The message: why nothing is shown (a filter, the attention view) or how to get sessions."""
    text = Text()
    if filtered:
        text.append(f"No session {filtered}.", style="bold")
        return text
    text.append("No sessions yet.\n\n", style="bold")
    text.append("Watching   ", style="dim")
    text.append_text(literal(facts.files or "no log files"))
    text.append("\nSocket     ", style="dim")
    text.append_text(literal(facts.socket or "none: agents cannot connect to this monitor"))
    if facts.otlp:
        text.append("\nOTLP       ", style="dim")
        text.append_text(literal(facts.otlp))
    text.append("\n\nConnect an agent:\n", style="bold")
    for command, what in connect_lines(facts):
        text.append("  ")
        text.append_text(literal(command, style="bold"))
        text.append("\n      ")
        text.append(what, style="dim")
        text.append("\n")
    return text


class EmptyState(TextPanel):
    """Shown instead of the sessions table while it has no rows."""
