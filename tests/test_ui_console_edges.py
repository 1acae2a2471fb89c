"""Rough edges of the console (issue 33 §3): what the dashboard row says after an
acknowledgement, names cut with an ellipsis in toasts.

The real app over a real hub and SQLite store fed with scripted events at a
frozen clock, driven by Textual's Pilot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.ui.app import LoopwatchApp
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from tests.scripted import T0, ScriptedSession, frozen_clock, scripted_hub

pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def looping(session: str, log: Path, repeats: int = 4) -> ScriptedSession:
    script = ScriptedSession(session, "test-agent", T0, str(log))
    for _ in range(repeats):
        script.call("bash", {"command": "cat notes.txt"}, "nothing new")
    return script


def make_app(tmp_path: Path, events: list) -> LoopwatchApp:
    config = Config()
    return LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(
            config, db=tmp_path / "db.sqlite", logs=tmp_path / "logs", events=events
        ),
    )


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    pilot.app.flush_live()
    await pilot.pause()


async def test_after_acknowledge_the_row_says_watching_while_the_loop_cools_down(tmp_path):
    """Help and docs say `a` goes back to watching; the row said NOTICE at the next repeat."""
    script = looping("looper", tmp_path / "logs" / "looper.jsonl")
    app = make_app(tmp_path, list(script.events))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        assert app.feed.sessions["looper"].level >= Level.WARN
        await pilot.press("a")
        await settle(pilot)
        assert app.hub is not None
        before = len(script.events)
        for _ in range(2):  # the same loop, within the cool-down: quieted notices
            script.call("bash", {"command": "cat notes.txt"}, "nothing new")
        await app.hub.submit(script.events[before:])
        await app.hub.join()
        await settle(pilot)
        info = app.feed.sessions["looper"]
        quieted = [d for d in app.store.detections("looper") if d["suppressed"]]
        assert quieted and all(d["level"] == "notice" for d in quieted)
        assert info.level is Level.NONE and info.quiet_until > 0
        level_cell = str(table.get_cell("looper", "level"))
        assert "watching" in level_cell and "notice" not in level_cell.lower(), level_cell
