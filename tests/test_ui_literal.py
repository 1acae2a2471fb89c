"""Agent text is shown literally: markup, links and ANSI escapes are characters."""

from __future__ import annotations

import time

from rich.console import Console

from monitor.config import Config
from monitor.events import Event, Kind
from monitor.ui.app import LoopwatchApp
from monitor.ui.literal import literal, plain_markup, visible
from monitor.ui.widgets.dashboard.window_view import window_lines
from tests.scripted import HOSTILE, frozen_clock, scripted_hub


def render(text) -> str:
    console = Console(width=300, record=True, color_system=None, force_terminal=True)
    console.print(text)
    return console.export_text()


def test_literal_keeps_markup_and_shows_escapes():
    """[bold], [link=…] stay as text; ESC and BEL become visible pictures, never control codes."""
    text = literal(HOSTILE)
    assert text.spans == []
    out = render(text)
    assert "[bold red]pwned[/]" in out
    assert "[link=https://evil.example]click[/link]" in out
    assert "␛[31mred␛[0m" in out
    assert "\x1b" not in text.plain and "\x07" not in text.plain
    assert visible("a\nb\tc") == "a⏎b c"
    assert visible("a\nb", multiline=True) == "a\nb"
    assert visible("\x9b") == "\\x9b"


def test_markup_safe_for_notify():
    """plain_markup escapes brackets so a markup parser prints them."""
    from rich.text import Text

    assert Text.from_markup(plain_markup("[bold]x[/bold]")).plain == "[bold]x[/bold]"


def test_window_lines_are_literal():
    """The detection window shows a hostile tool call as typed."""
    event = Event(
        kind=Kind.TOOL_CALL, session="s", ts=0.0, tool="echo", args={"t": "\x1b[31m[b]x[/b]"}, seq=1
    )
    line = window_lines([event, event], 200)[0]
    assert "[b]x[/b]" in line.plain and "␛[31m" in line.plain


async def test_hostile_agent_renders_literally_everywhere(tmp_path, monkeypatch):
    """A session whose agent name, args and output carry markup and escapes: every screen
    and notification shows the characters, and nothing is styled by them."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    config = Config()
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", logs=tmp_path / "logs"),
    )
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        app.flush_live()
        await pilot.pause()
        table = app.screen.query_one("SessionsTable")
        table.select_session("markup-test")
        await pilot.pause()
        agent_cell = table.get_cell("markup-test", "agent")
        assert agent_cell.plain.startswith("[bold red]p") and agent_cell.spans == []
        window = app.screen.query_one("#window")
        shown = "\n".join(line.plain for line in window.lines)
        assert "[bold red]pwned[/] [link=https://evil.example]" in shown
        await pilot.press("i")
        await pilot.press("ctrl+s")
        await pilot.pause()
        await app.workers.wait_for_complete()
        note = app._notifications
        assert note and all("\x1b" not in n.message for n in note)
        assert not any(n.markup for n in note)
        await pilot.press("enter")
        await pilot.pause()
        stream = app.screen.query_one("EventStream")
        lines = [stream.line_text(stream.source.row(i), 300).plain for i in range(stream.source.count())]
        assert any("[bold red]pwned[/]" in line and "␛[31mred␛[0m" in line for line in lines)
        assert all("\x1b" not in line for line in lines)
    monkeypatch.undo()
    time.tzset()
