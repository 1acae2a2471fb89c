"""Snapshots of every screen and modal at a narrow and a wide terminal.

Time is frozen (``tests.scripted.NOW``, TZ=UTC) and the data is the
scripted demo fed through a real hub and store, so each SVG is deterministic.
Update baselines with ``pytest tests/test_ui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.store import Store
from monitor.ui.app import LoopwatchApp
from tests.scripted import frozen_clock, scripted_hub
from tests.scripted import settle as settled

NARROW, WIDE = (100, 30), (160, 48)
SIZES = pytest.mark.parametrize("size", [NARROW, WIDE], ids=["narrow", "wide"])


pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def live_app(tmp_path: Path, theme: str | None = None) -> LoopwatchApp:
    config = Config()
    return LoopwatchApp(
        config,
        clock=frozen_clock(),
        theme=theme,
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite"),
    )


def history_app(tmp_path: Path) -> LoopwatchApp:
    """A store written by a hub that ran the script and stopped (as after a watch)."""
    db = tmp_path / "history.sqlite"

    async def record() -> None:
        async with scripted_hub(Config(), db=db):
            pass

    asyncio.run(record())
    return LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())


async def settle(pilot) -> None:
    await settled(pilot)
    for widget in pilot.app.screen.query("TextArea, Input"):
        widget.cursor_blink = False  # a blinking cursor would make the SVG random
    await pilot.pause()


def then(*keys: str):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


@SIZES
def test_dashboard(snap_compare, tmp_path, size):
    """The dashboard sorts by attention, shows sparklines, the window with repeats and the ladder."""
    assert snap_compare(live_app(tmp_path), terminal_size=size, run_before=then())


@SIZES
def test_detail(snap_compare, tmp_path, size):
    """Enter opens the top session: its event stream, per-detector sparklines, detections."""
    assert snap_compare(live_app(tmp_path), terminal_size=size, run_before=then("enter"))


@SIZES
def test_history(snap_compare, tmp_path, size):
    """The history screen lists stored sessions with final and peak levels and filters."""
    assert snap_compare(history_app(tmp_path), terminal_size=size, run_before=then())


@SIZES
def test_history_detail(snap_compare, tmp_path, size):
    """A stored session opens read-only, with sparklines replayed and no operator keys."""
    assert snap_compare(history_app(tmp_path), terminal_size=size, run_before=then("enter"))


@SIZES
def test_inject_modal(snap_compare, tmp_path, size):
    """i opens the inject modal pre-filled with the escalation's nudge and names the channel."""
    assert snap_compare(live_app(tmp_path), terminal_size=size, run_before=then("i"))


@SIZES
def test_kill_modal(snap_compare, tmp_path, size):
    """K opens the kill confirmation saying exactly what will happen to the session."""
    assert snap_compare(live_app(tmp_path), terminal_size=size, run_before=then("K"))


@SIZES
def test_help(snap_compare, tmp_path, size):
    """? on the dashboard lists that screen's keys (and the app's) with their keymap ids."""
    assert snap_compare(live_app(tmp_path), terminal_size=size, run_before=then("question_mark"))


def test_markup_session_selected(snap_compare, tmp_path):
    """Agent text with markup and ANSI escapes shows literally in the table, window and feed."""

    async def run_before(pilot) -> None:
        await settle(pilot)
        table = pilot.app.screen.query_one("SessionsTable")
        table.select_session("markup-test")
        await settle(pilot)

    assert snap_compare(live_app(tmp_path), terminal_size=WIDE, run_before=run_before)


@pytest.mark.parametrize("theme", ["loopwatch-light", "loopwatch-high-contrast", "loopwatch-ansi"])
def test_themes(snap_compare, tmp_path, theme):
    """Each packaged theme colours the escalation levels from its own variables."""
    assert snap_compare(live_app(tmp_path, theme=theme), terminal_size=WIDE, run_before=then())
