"""The screens tell the truth about a session (issue 15): nudged, then back to
watching; a false positive leaves the feed alone; the dashboard, the detail
view and the history agree; sessions of a stopped watcher are "stopped".

A real app, hub and SQLite store (``tests/test_ui_actions.py``'s harness), driven
with the Pilot; the tests wait with deadlines, never sleeps.
"""

from __future__ import annotations

from monitor.events import Level
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.screens.history import HistoryScreen
from monitor.ui.widgets.dashboard.counts import CountsBar  # noqa: F401  (the header of counts)
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from tests.scripted import ScriptedSession, settle
from tests.test_ui_actions import looping_session, make_app, until


def status_cell(app, session: str) -> str:
    table = app.screen.query_one(SessionsTable)
    return str(table.get_cell(session, "status"))


def changed_course(session: str, log, start: float) -> list:
    script = ScriptedSession(session, "test-agent", start, str(log))
    script.events.clear()  # no second session_start
    script.calls = 100  # new call ids: a call id seen before is the same call again (dropped)
    script.say("Understood. I'll stop what I was repeating and check the path first.")
    for n in range(5):
        script.call("read_file", {"path": f"src/module_{n}.py"}, f"contents of module {n}")
    return script.events


async def test_inject_shows_nudged_then_watching_when_the_loop_stops(tmp_path, utc):
    log = tmp_path / "logs" / "looper.jsonl"
    app = make_app(tmp_path, looping_session("looper", log))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.hub.session("looper").level >= Level.WARN
        await pilot.press("i")
        await pilot.press("ctrl+s")
        await settle(pilot)
        await until(pilot, lambda: app.hub.session("looper").nudged, "the inject to be delivered")
        await settle(pilot)
        assert status_cell(app, "looper") == "nudged"
        assert app.hub.stats().warnings_open == 1
        await app.hub.submit(changed_course("looper", log, app.hub.session("looper").last_ts))
        await app.hub.join()
        await settle(pilot)
        info = app.hub.session("looper")
        assert info.level == Level.NONE and "recovered" in info.reason
        assert status_cell(app, "looper") == "live"
        assert app.hub.stats().warnings_open == 0
        # The history keeps what happened: the inject, the detections, the peak.
        app.store.flush()
        row = app.store.get_session("looper")
        assert row["level"] == "watching" and row["peak"] != "watching"
        assert [a["kind"] for a in app.store.actions("looper")] == ["inject"]


async def test_false_positive_quiets_the_feed_and_history_agrees(tmp_path, utc):
    log = tmp_path / "logs" / "looper.jsonl"
    app = make_app(tmp_path, looping_session("looper", log))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        flagged = app.hub.session("looper").last_detection
        await pilot.press("f")
        await settle(pilot)
        await until(pilot, lambda: app.store.actions("looper"), "the false positive to be recorded")
        feed = app.screen.query_one("DetectionsFeed")
        lines_before = len(feed.lines)
        script = ScriptedSession("looper", "test-agent", app.hub.session("looper").last_ts, str(log))
        script.events.clear()
        for _ in range(4):
            script.call("bash", {"command": "ls /nope"}, "ls: cannot access '/nope'", error=True)
        await app.hub.submit(script.events)
        await app.hub.join()
        await settle(pilot)
        new_lines = [line.text for line in feed.lines[lines_before:]]
        assert not [text for text in new_lines if flagged.detector in text], new_lines
        level = app.hub.session("looper").level
        app.store.flush()
        assert app.store.get_session("looper")["level"] == level.label
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionDetailScreen)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("h")
        await settle(pilot)
        await until(
            pilot,
            lambda: isinstance(app.screen, HistoryScreen) and app.screen.query_one("DataTable").row_count,
            "the history screen",
        )
        final = app.screen.query_one("DataTable").get_row("looper")[4]  # Final: the stored level
        assert level.label in str(final)
