"""A restarted ``watch`` on the same database (issue 33 §3): the hub takes up
the sessions the database holds (shown, closed, with their last level, reason
and counts), a session that goes on in its tailed log keeps its escalation,
and nothing is shown or stored twice.

Real parts: the real :class:`~monitor.hub.live.LiveMonitor` over real files and
SQLite, run twice, and the real app over the second run, driven by Pilot.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.hub.live import LiveMonitor
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.widgets.dashboard.detections_feed import DetectionsFeed
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from monitor.ui.widgets.detail.detections_list import DetectionsList
from tests.restartkit import caught_up, open_detail, restarted_app
from tests.test_restart import counts, run_once
from tests.test_watch_headless import loop_lines

pytestmark = pytest.mark.usefixtures("utc")


def session_rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id, agent, source, first_seen, last_seen, level, peak, detector, reason, events, "
            "detections FROM sessions ORDER BY id"
        ).fetchall()


def shown(live: LiveMonitor) -> dict[str, tuple]:
    assert live.hub is not None
    return {
        info.id: (info.status, info.level, info.detector, info.reason, info.events)
        for info in live.hub.sessions()
    }


async def test_a_restart_shows_the_stored_sessions_once_and_stores_nothing_again(tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "loop.jsonl").write_text(loop_lines("looping", 10))
    (logs / "calm.jsonl").write_text(loop_lines("calm", 1))
    db = tmp_path / "x.db"
    first = await run_once([logs], db)
    rows, stored = session_rows(db), counts(db)
    before = shown(first)
    assert before["looping"][1] is Level.TERMINATE and before["calm"][1] is Level.NONE

    again = await run_once([logs], db)
    assert again.hub is not None and again.hub.events_total == 0 and again.hub.seeded == 2
    after = shown(again)
    assert set(after) == {"looping", "calm"}  # was empty: nothing new arrived
    for session, (status, level, detector, reason, events) in after.items():
        assert status == "stopped"  # closed: this watcher has stopped too
        assert (level, detector, reason, events) == before[session][1:]
    assert session_rows(db) == rows and counts(db) == stored


async def test_a_loop_that_goes_on_after_a_restart_keeps_its_rung(tmp_path: Path):
    """Was: three more identical failures after the restart left the session at
    ``warn`` (``peak`` terminate): its ladder started again at the first rung."""
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 10))
    db = tmp_path / "x.db"
    await run_once([log], db)
    with log.open("a") as out:
        out.write(loop_lines("s1", 3, start=10))
    live = await run_once([log], db)
    assert live.hub is not None and live.hub.events_total == 6
    info = live.hub.session("s1")
    assert info is not None and info.level is Level.TERMINATE and info.events == 26
    with sqlite3.connect(db) as conn:
        level, peak, events = conn.execute("SELECT level, peak, events FROM sessions").fetchone()
        new = conn.execute("SELECT DISTINCT level FROM detections WHERE seq > 20").fetchall()
    assert (level, peak, events) == ("terminate", "terminate", 26)
    assert new == [("terminate",)]
    with sqlite3.connect(db) as conn:  # every detector of the loop's episode kept its rung
        levels = conn.execute("SELECT level, peak FROM episodes ORDER BY number").fetchall()
    assert levels[-1] == ("terminate", "terminate"), levels
    events, distinct, detections, distinct_d = counts(db)
    assert events == distinct == 26 and detections == distinct_d


async def test_a_seeded_session_keeps_its_mutes(tmp_path: Path):
    """A detector muted after one restart (on the seeded session) stays muted after the next."""
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 6))
    db = tmp_path / "x.db"
    await run_once([log], db)
    live = LiveMonitor(Config(), db=str(db), use_socket=False)
    async with live.running() as hub:
        muted = await hub.act("mute", "s1", detector="exact_repeat")
        assert muted.outcome == "delivered", muted
    again = await run_once([log], db)
    assert again.hub is not None
    assert "exact_repeat" in again.hub.engine.summary("s1").muted


async def test_the_restarted_dashboard_lists_the_stored_sessions(tmp_path: Path):
    """The real app on a restarted watcher: the rows are there, closed, at their last
    level, and the feed shows their stored loop episodes."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "loop.jsonl").write_text(loop_lines("looping", 10))
    db = tmp_path / "x.db"
    await run_once([logs], db)
    app = restarted_app([logs], db)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        app.flush_live()
        await pilot.pause()
        table = app.screen.query_one(SessionsTable)
        assert [key.value for key in table.rows] == ["looping"]
        info = app.feed.sessions["looping"]
        assert info.level is Level.TERMINATE and info.status == "idle" and info.events == 20
        row = " ".join(str(cell) for cell in table.get_row("looping"))
        assert "TERMINATE" in row.upper() and "idle" in row, row
        # The feed shows the loop episode the earlier run stored (it was empty).
        feed = app.screen.query_one(DetectionsFeed)
        assert list(feed.episodes) == [("looping", 1)]
        assert "looping" in feed.lines[0].text and "×" in feed.lines[0].text


async def test_the_restarted_detail_lists_each_episode_once(tmp_path: Path):
    """A restarted watcher numbers its episodes after the stored ones (as the store does):
    the detail and the feed show the earlier run's episode and the new one, each once."""
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 10))
    db = tmp_path / "x.db"
    await run_once([log], db)
    with log.open("a") as out:
        out.write(loop_lines("s1", 4, start=10))
    app = restarted_app([log], db)
    async with app.run_test(size=(160, 48)) as pilot:
        await caught_up(app, pilot, events=8)
        await open_detail(app, pilot, "s1")
        screen = app.screen
        assert isinstance(screen, SessionDetailScreen)
        rows = screen.query_one(DetectionsList).rows
        stored = app.store.episodes("s1")
        assert len(stored) == 2 and len(rows) == 2, (stored, rows)
        assert rows[0].first_ts < rows[1].first_ts
        # The new run numbers its episode after the stored one, as the store does:
        # the feed shows both, each on its own line.
        assert [e["number"] for e in stored] == [1, 2]
        app.pop_screen()
        await pilot.pause()
        feed = app.screen.query_one(DetectionsFeed)
        assert list(feed.episodes) == [("s1", 1), ("s1", 2)], list(feed.episodes)
