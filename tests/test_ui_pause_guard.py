"""`p` pauses and resumes a real process from the dashboard; `b` switches the guard.

The real app, hub and store (as in tests/test_ui_actions.py); the agent is a
real subprocess whose state is read from /proc; nothing sleeps.
"""

from __future__ import annotations

import os
import time

import pytest

from monitor.control import process_state
from monitor.ui.widgets.dashboard.escalation_view import escalation_lines
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable, shown_status
from tests.scripted import T0
from tests.test_ui_actions import (  # noqa: F401  (spawn is a fixture)
    SLEEPER,
    looping_session,
    make_app,
    settle,
    spawn,
    stored_actions,
    until,
)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


async def test_p_pauses_then_resumes_the_real_process(tmp_path, spawn, utc):  # noqa: F811
    agent = spawn("-c", SLEEPER)
    log = tmp_path / "logs" / "sleepy.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    app = make_app(tmp_path, looping_session("sleepy", log, pid=agent.pid, start=time.time()))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.screen.query_one(SessionsTable).selected_session == "sleepy"
        await pilot.press("p")
        await settle(pilot)
        await until(pilot, lambda: process_state(agent.pid) in ("T", "t"), "the process to stop")
        await until(pilot, lambda: app.hub.session("sleepy").paused > 0, "the session to show paused")
        assert shown_status(app.hub.session("sleepy")) == "paused"
        await pilot.press("p")
        await settle(pilot)
        await until(pilot, lambda: process_state(agent.pid) in ("S", "R"), "the process to run again")
        rows = [(r["kind"], r["outcome"]) for r in stored_actions(app, "sleepy")]
        assert rows == [("pause", "delivered"), ("resume", "delivered")]


async def test_b_switches_the_guard_for_the_session(tmp_path, utc):
    app = make_app(tmp_path, looping_session("looper", tmp_path / "logs" / "looper.jsonl"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.hub.session("looper").guard is False
        await pilot.press("b")
        await settle(pilot)
        await until(pilot, lambda: app.hub.session("looper").guard, "the guard to be on")
        facts = app.escalation_facts(app.hub.session("looper"))
        shown = " ".join(line.plain for line in escalation_lines(app.hub.session("looper"), facts, T0))
        assert "guard on" in shown
        await pilot.press("b")
        await settle(pilot)
        await until(pilot, lambda: not app.hub.session("looper").guard, "the guard to be off")
        rows = [(r["kind"], r["text"]) for r in stored_actions(app, "looper")]
        assert rows == [("guard", "on"), ("guard", "off")]
