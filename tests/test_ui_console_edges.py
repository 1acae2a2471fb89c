"""Rough edges of the console (issue 33 §3): what the dashboard row says after an
acknowledgement, names cut with an ellipsis in toasts.

The real app over a real hub and SQLite store fed with scripted events at a
frozen clock, driven by Textual's Pilot.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.hub import Hub
from monitor.store import Store
from monitor.store.writer import EAGER_COMMITS
from monitor.ui.app import LoopwatchApp
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.widgets.common.text_panel import TextPanel
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from tests.scripted import T0, ScriptedSession, frozen_clock, scripted_app, settle

pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def looping(session: str, log: Path, repeats: int = 4) -> ScriptedSession:
    script = ScriptedSession(session, "test-agent", T0, str(log))
    for _ in range(repeats):
        script.call("bash", {"command": "cat notes.txt"}, "nothing new")
    return script


async def test_after_acknowledge_the_row_says_watching_while_the_loop_cools_down(tmp_path):
    """Help and docs say `a` goes back to watching; the row said NOTICE at the next repeat."""
    script = looping("looper", tmp_path / "logs" / "looper.jsonl")
    app = scripted_app(tmp_path, list(script.events))
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


async def test_a_toast_cuts_a_long_reason_with_an_ellipsis(tmp_path):
    """The false positive's toast quoted the reason cut at 120 characters, mid-word and without "…"."""
    script = looping("looper", tmp_path / "logs" / "looper.jsonl")
    app = scripted_app(tmp_path, list(script.events))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        info = app.feed.sessions["looper"]
        assert info.last_detection is not None
        long_reason = replace(info.last_detection, message="the harness refused: " + "word " * 60)
        app.perform("false_positive", "looper", detection=long_reason)
        await settle(pilot)
        toast = [n.message for n in app._notifications][-1]
        assert toast.startswith("looper: delivered — ")
        reason = toast.split(" in this session: ", 1)[1]
        assert len(reason) == 120 and reason.endswith("…")


@asynccontextmanager
async def busy_store_hub(config: Config, db: Path, events: list) -> AsyncIterator[Hub]:
    """A hub whose store groups its commits (flush_ms 3 s: a busy writer waits for more rows)."""
    store = Store(db, clock=frozen_clock(), flush_ms=3000)
    store.start()
    hub = Hub(config, store, clock=frozen_clock())
    await hub.start()
    try:
        await hub.submit(events)
        await hub.join()
        store.flush()
        yield hub
    finally:
        await hub.stop()
        store.close()


async def test_the_event_stream_catches_up_with_the_header_count(tmp_path):
    """Was: the detail header counted events the store had not committed yet (a busy
    writer groups its commits), and a session that then went quiet kept the stream
    behind ("events 15" over "Events — 14") until its next event."""
    script = looping("looper", tmp_path / "looper.jsonl")
    config = Config()
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: busy_store_hub(config, tmp_path / "db.sqlite", list(script.events)),
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.open_session("looper")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionDetailScreen) and app.hub is not None
        for n in range(EAGER_COMMITS + 1):  # one at a time: the writer goes from eager to grouped
            before = len(script.events)
            script.say(f"Let me look again ({n}).")
            await app.hub.submit(script.events[before:])
            await app.hub.join()
            await settle(pilot)
        header = app.feed.sessions["looper"].events
        assert header == len(script.events)
        deadline = time.monotonic() + 20
        while screen.stream.source.count() < header:
            assert time.monotonic() < deadline, "the stream never caught up with the header"
            await pilot.pause(0.05)
        title = str(screen.query_one("#stream-title", TextPanel).render())
        assert f"Events — {header}" in title, title
