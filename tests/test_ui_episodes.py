"""Loop episodes in the TUI (issue 33 §1): the dashboard feed shows one line per
episode, changed in place (×count, since); the detail view lists episodes, not
one row per repeat; a false positive applies to the whole episode, whichever
detectors joined it, and the session leaves ``terminate``.

The real app over a real hub and SQLite store fed with scripted events at a
frozen clock, driven by Textual's Pilot.
"""

from __future__ import annotations

import pytest

from monitor.events import Level
from monitor.ui.app import LoopwatchApp
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.widgets.dashboard.detections_feed import DetectionsFeed
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from monitor.ui.widgets.detail.detections_list import DetectionsList
from tests.scripted import T0, ScriptedSession, scripted_app, settle

pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def failing(script: ScriptedSession, times: int) -> None:
    for _ in range(times):
        script.call("bash", {"command": "ls /nope"}, "ls: cannot access '/nope'", error=True)


def feed_lines(app: LoopwatchApp) -> list[str]:
    return [line.text for line in app.screen.query_one(DetectionsFeed).lines]


async def test_the_feed_shows_one_line_per_episode_changed_in_place(tmp_path):
    """Was: a line per repeat ("✖ terminate same_error failure_cascade: 610 …" every second)."""
    script = ScriptedSession("looper", "test-agent", T0, str(tmp_path / "logs" / "looper.jsonl"))
    failing(script, 8)
    app = scripted_app(tmp_path, list(script.events))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.hub is not None
        detections = len(app.store.detections("looper"))
        lines = feed_lines(app)
        assert len(lines) == 1, lines  # several detectors, many repeats: one loop
        first = lines[0]
        assert "looper" in first and "since 09:00:" in first and "×8" in first
        before = len(script.events)
        failing(script, 4)
        await app.hub.submit(script.events[before:])
        await app.hub.join()
        await settle(pilot)
        lines = feed_lines(app)
        assert len(lines) == 1 and "×12" in lines[0], lines  # the same line, its count on
        assert lines[0].split(" ✖")[0] == first.split(" ✖")[0]  # since when it began: unchanged
        assert detections > 1


async def test_the_detail_lists_episodes_not_repeats(tmp_path):
    script = ScriptedSession("looper", "test-agent", T0, str(tmp_path / "logs" / "looper.jsonl"))
    failing(script, 8)
    script.call("read_file", {"path": "notes.md"}, "fresh start")
    for n in range(25):  # work that moves on: the loop's episode closes
        script.call("read_file", {"path": f"src/{n}.py"}, f"contents {n}")
    failing(script, 6)  # the same loop again, later: a second episode
    app = scripted_app(tmp_path, list(script.events))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.open_session("looper")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionDetailScreen)
        rows = screen.query_one(DetectionsList).rows
        assert [row.episode for row in rows] == [1, 2], rows
        assert rows[0].closed == "stopped" and rows[1].closed is None
        assert rows[0].count == 8 and rows[0].reports > 1 and len(rows[0].detectors) > 1
        prompt = str(screen.query_one(DetectionsList).get_option_at_index(0).prompt)
        assert "×8" in prompt and "stopped" in prompt


async def test_a_false_positive_applies_to_the_whole_episode(tmp_path):
    """Was: one press per detector, and the row stayed at ``terminate … fingerprint``."""
    script = ScriptedSession("looper", "test-agent", T0, str(tmp_path / "logs" / "looper.jsonl"))
    failing(script, 10)
    app = scripted_app(tmp_path, list(script.events))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        assert table.selected_session == "looper"
        assert app.feed.sessions["looper"].level is Level.TERMINATE
        (episode,) = [c.episode for c in app.feed.episodes_for("looper")]
        assert len(episode.detectors) > 1  # several detectors joined the loop
        await pilot.press("f")
        await settle(pilot)
        info = app.feed.sessions["looper"]
        assert info.level is Level.NONE, (info.level, info.detector, info.reason)
        assert "terminate" not in str(table.get_cell("looper", "level"))
        (closed,) = [c.episode for c in app.feed.episodes_for("looper")]
        assert closed.closed == "false positive"
        marked = app.store.actions("looper")[-1]
        assert marked["kind"] == "false_positive" and marked["outcome"] == "delivered"
        assert all(name in marked["detail"] for name in episode.detectors)
        assert "×10 · false positive" in feed_lines(app)[0]
        assert app.hub is not None
        before = len(script.events)
        failing(script, 3)  # the same loop goes on: none of the detectors that joined flags it again
        await app.hub.submit(script.events[before:])
        await app.hub.join()
        await settle(pilot)
        after = app.feed.sessions["looper"]
        assert after.level is Level.NONE or after.detector not in episode.detectors, after.detector
