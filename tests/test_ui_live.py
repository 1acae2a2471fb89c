"""Live data paths: coalescing, in-place table updates, sparkline assignment,
the virtualized event stream, evidence jumps, history filters and `open`."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from monitor.config import Config
from monitor.ui.app import LoopwatchApp
from monitor.ui.live import LiveFeed
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.widgets.common.sparkline import SimilaritySparkline
from monitor.ui.widgets.detail.detections_list import DetectionsList
from monitor.ui.widgets.detail.event_stream import EventStream
from monitor.updates import SessionChanged, Stats
from tests.scripted import (
    T0,
    ScriptedSession,
    frozen_clock,
    history_app,
    record_history,
    scripted_hub,
    settle,
)

pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def test_feed_coalesces_to_the_latest_snapshot():
    """Many updates between flushes become one batch with the newest snapshot per session."""
    requests = []
    feed = LiveFeed(lambda: requests.append(1))

    class Info:
        def __init__(self, id, n):
            self.id, self.n = id, n

    for n in range(1000):
        feed.push(SessionChanged(Info(f"s{n % 3}", n)))
    feed.push(Stats(10, 1.5, 3, 1))
    batch = feed.drain()
    assert sorted(batch.sessions) == ["s0", "s1", "s2"]
    assert batch.sessions["s0"].n == 999 and batch.stats.events_per_sec == 1.5
    assert not feed.drain()
    assert len(requests) == 1001  # the app turns these into at most refresh_hz flushes


async def test_table_updates_in_place_and_flushes_are_rate_limited(tmp_path):
    """New events for a session update its cells (no rebuild); the app flushes ≤ refresh_hz/s."""
    config = Config()
    config.ui = replace(config.ui, refresh_hz=5.0)
    app = LoopwatchApp(
        config, clock=frozen_clock(), hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite")
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("SessionsTable")
        rebuilds, updates, flushes = table.rebuilds, table.cell_updates, app.flushes
        spark = app.screen.query_one("#spark", SimilaritySparkline)
        before = spark.sparks
        script = ScriptedSession("claude-7f3a", "claude-code", T0 + 100, "/var/log/agents/claude-7f3a.jsonl")
        started = time.monotonic()
        for _ in range(20):
            script.call("bash", {"command": "ls /tmp/build/out"}, "still missing", error=True)
            await app.hub.submit(script.events[-2:])
            await app.hub.join()
            await pilot.pause()
        deadline = time.monotonic() + 10
        while app.feed.pending and time.monotonic() < deadline:
            await pilot.pause(0.05)
        elapsed = time.monotonic() - started
        assert table.rebuilds == rebuilds
        assert table.cell_updates > updates
        events = f"{app.feed.sessions['claude-7f3a'].events:,}"
        assert table.get_cell("claude-7f3a", "events").plain == events
        row = table.get_row_index("claude-7f3a")
        drawn = "".join(segment.text for segment in table.render_line(row + 1 - table.scroll_offset.y))
        assert f" {events} " in drawn  # the repaint shows the new value, not a cached one
        assert app.flushes - flushes <= elapsed * 5 + 2
        assert spark.sparks is app.feed.sessions["claude-7f3a"].similarity
        assert spark.sparks is not before and isinstance(spark.data, tuple)


async def test_event_stream_is_virtualized_and_jumps_to_evidence(tmp_path):
    """A long stored session renders only visible lines from a few pages; a detection jumps."""
    db = tmp_path / "db.sqlite"
    script = ScriptedSession("long", "agent", T0, "/logs/long.jsonl")
    for n in range(1500):
        script.call("read_file", {"path": f"f{n}.py"}, f"contents {n}")
    for _ in range(4):
        script.call("bash", {"command": "make"}, "error 1", error=True)
    config = Config()
    app = LoopwatchApp(
        config, clock=frozen_clock(), hub_factory=lambda: scripted_hub(config, db=db, events=script.events)
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.open_session("long")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionDetailScreen)
        stream = screen.query_one(EventStream)
        assert stream.source.count() == len(script.events)
        assert stream.cursor == len(script.events) - 1  # follows the end
        assert stream.source.queries <= 3
        assert stream.lines_rendered < 200
        await pilot.press("home")
        await pilot.pause()
        assert stream.scroll_offset.y == 0 and stream.current.seq == 1
        detections = screen.query_one(DetectionsList)
        assert detections.rows
        row = detections.rows[0]
        detections.focus()
        detections.highlighted = 0
        await pilot.press("enter")
        await pilot.pause()
        target = row.evidence[0] if row.evidence else row.seq
        assert stream.current.seq == target
        assert stream.highlight == frozenset(row.evidence or (row.seq,))
        assert stream.has_focus


async def test_history_filters_and_read_only_open(tmp_path):
    """Agent, level and text filters narrow the list; enter opens a session with no actions."""
    app = await history_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        assert table.row_count == 6
        app.screen.query_one("#agent").value = "codex"
        await pilot.pause()
        assert table.row_count == 2
        app.screen.query_one("#agent").value = ""
        app.screen.query_one("#level").value = "critical"
        await pilot.pause()
        assert {str(k.value) for k in table.rows} == {"claude-7f3a", "swe-agent-3"}
        app.screen.query_one("#text").value = "swe"
        await pilot.pause()
        assert [str(k.value) for k in table.rows] == ["swe-agent-3"]
        app.screen.query_one("#since").value = "yesterday-ish"
        await pilot.pause()
        assert "since:" in str(app.screen.query_one("#history-status").render())
        app.screen.query_one("#since").value = "2025-12-31"
        await pilot.pause()
        table.focus()
        await pilot.press("enter")
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, SessionDetailScreen) and detail.read_only
        assert detail.session == "swe-agent-3"
        for action in ("ack", "inject", "kill", "false_positive", "mute"):
            assert detail.check_action(action, ()) is False
        assert detail.query_one(DetectionsList).rows
        sparks = detail.query("DetectorSparkline")
        assert sparks and any(s.detector == "cycle" for s in sparks)
        await pilot.press("K")
        await pilot.pause()
        assert app.screen is detail
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "HistoryScreen"


async def test_open_mode_shows_one_stored_session(tmp_path):
    """`loopwatch open` mode starts on the session, read-only; escape goes back to the history of
    sessions (the one shown among them), escape there quits."""
    app = await history_app(tmp_path, mode="open", session="claude-7f3a")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionDetailScreen) and app.screen.read_only
        assert app.screen.query_one(EventStream).source.count() == 16
        await pilot.press("escape")
        await settle(pilot)
        assert type(app.screen).__name__ == "HistoryScreen" and app.is_running
        assert "claude-7f3a" in [key.value for key in app.screen.query_one("#history-table").rows]
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 0


def test_open_command_errors(tmp_path, capsys):
    """`loopwatch open` names a missing database or an unknown session and exits 2."""
    from monitor.cli import main

    assert main(["open", "nope", "--db", str(tmp_path / "missing.sqlite")]) == 2
    assert "no loopwatch database" in capsys.readouterr().err
    db = tmp_path / "h.sqlite"
    record_history(db)
    assert main(["open", "zzz", "--db", str(db)]) == 2
    assert "no stored session 'zzz'" in capsys.readouterr().err
    assert main(["open", "claude", "--db", str(db), "--theme", "nope"]) == 2
    assert "ui.theme: unknown theme" in capsys.readouterr().err


async def test_history_prefilled_from_the_command_line(tmp_path):
    """`history --tui --agent codex --level warn` opens with those filters applied."""
    app = await history_app(tmp_path)
    app.history_filters = {"agent": "swe-agent", "level": "warn", "since": T0 - 3600, "text": None}
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        assert [str(k.value) for k in table.rows] == ["swe-agent-3"]
        assert app.screen.query_one("#since").value == "2026-01-01 08:00"
