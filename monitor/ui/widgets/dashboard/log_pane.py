"""The log pane (``L``): bad input with file:line and why, action outcomes, what is watched.

The header's "· 101 bad lines" counts what this pane lists: each problem a source or the
hub reported, with where it was and why it was skipped.  A ring (:data:`LOG_LINES`), every
line literal (agent text and file names can hold markup or escapes).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from monitor.hub.actions import AUTO_WHO
from monitor.ui.literal import literal
from monitor.ui.render import clock
from monitor.ui.watched import Watched

LOG_LINES = 500
#: How each action outcome is marked (the rest is its text).
OUTCOME_STYLE = {"delivered": "green", "pending": "", "failed": "bold red", "refused": "yellow"}


def problem_line(problem: Any) -> Text:
    line = Text(overflow="fold")
    line.append("bad input ", style="bold yellow")
    line.append_text(literal(getattr(problem, "where", str(getattr(problem, "source", "?")))))
    line.append(": ")
    line.append_text(literal(getattr(problem, "reason", str(problem))))
    return line


def action_line(action: Any) -> Text:
    line = Text(overflow="fold")
    line.append(f"{clock(action.ts)} ", style="dim")
    line.append(f"{action.kind} ", style="bold")
    line.append_text(literal(action.session, limit=40))
    line.append(": ")
    line.append(action.outcome, style=OUTCOME_STYLE.get(action.outcome, ""))
    if action.detail:
        line.append(" — ")
        line.append_text(literal(action.detail))
    if action.who == AUTO_WHO:  # the operator's own actions need no name
        line.append(" (automatic)", style="dim")
    return line


def watched_lines(facts: Watched) -> list[Text]:
    rows = [
        ("watching", facts.files or "no log files"),
        ("socket", facts.socket or "none: agents cannot connect to this monitor"),
        ("otlp", facts.otlp),
        ("database", facts.db or "none: nothing is recorded"),
    ]
    lines = []
    for label, value in rows:
        if value:
            line = Text(f"{label:<9}", style="dim")
            line.append_text(literal(value))
            lines.append(line)
    return lines


class LogPane(RichLog):
    """Bounded, literal, newest at the bottom."""

    def __init__(self, **kwargs: Any):
        # wrapped: a long path must not hide the line number and the reason after it
        super().__init__(max_lines=LOG_LINES, wrap=True, markup=False, auto_scroll=True, **kwargs)

    def add(self, problems: list[Any], actions: list[Any]) -> None:
        for problem in problems[-LOG_LINES:]:
            self.write(problem_line(problem))
        for action in actions[-LOG_LINES:]:
            self.write(action_line(action))

    def start(self, facts: Watched, problems: list[Any], actions: list[Any]) -> None:
        """Everything from the beginning: what is watched, then what the feed still holds."""
        self.clear()
        for line in watched_lines(facts):
            self.write(line)
        self.add(problems, actions)
