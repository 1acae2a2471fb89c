"""Snapshots of the console screens of issue 18: the full event view, search in
the detail view, the diff of repeats, help per screen, the sorted dashboard.

Same determinism as ``test_ui_snapshots`` (frozen clock, TZ=UTC, scripted
events through a real hub and store), whose helpers are reused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import Config
from monitor.ui.app import LoopwatchApp
from tests.scripted import frozen_clock, scripted_hub
from tests.test_ui_console import reader_session
from tests.test_ui_snapshots import WIDE, live_app, settle, then

pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)

SMALL = (80, 24)


def reader_app(tmp_path: Path) -> LoopwatchApp:
    """One session: a long result with markup and escapes, then sed on four files failing."""
    config = Config()
    return LoopwatchApp(
        config,
        clock=frozen_clock(),
        session="reader",
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", events=reader_session()),
    )


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["small", "wide"])
def test_event_view(snap_compare, tmp_path, size):
    """enter on an event shows it whole: arguments as indented JSON, the result in full,
    markup and escape sequences literal (␛), previous/next in the title and footer."""

    def run_before(pilot):
        return then("g", "j", "j", "j", "enter")(pilot)

    assert snap_compare(reader_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["small", "wide"])
def test_detail_search(snap_compare, tmp_path, size):
    """/ then text: the matching events are highlighted, the title counts them."""
    assert snap_compare(
        reader_app(tmp_path), terminal_size=size, run_before=then("slash", "s", "e", "d", "enter", "n")
    )


def test_repeat_diff(snap_compare, tmp_path):
    """d on a detection: its repeats word-diffed — the file name that changes is marked,
    identical results are one line each."""

    async def run_before(pilot) -> None:
        await settle(pilot)
        detections = pilot.app.screen.query_one("DetectionsList")
        detections.focus()
        detections.highlighted = 3  # failure_cascade (after stale_outcome at the same line)
        await pilot.press("d")
        await settle(pilot)

    assert snap_compare(reader_app(tmp_path), terminal_size=WIDE, run_before=run_before)


def test_help_in_detail(snap_compare, tmp_path):
    """? in the detail view lists that screen's keys: search, copy, diff, vim keys, K kill."""
    assert snap_compare(live_app(tmp_path), terminal_size=WIDE, run_before=then("enter", "question_mark"))


def test_dashboard_sorted_by_agent(snap_compare, tmp_path):
    """s twice sorts the sessions by agent (▼ on the header); the selection is kept."""
    assert snap_compare(live_app(tmp_path), terminal_size=WIDE, run_before=then("s", "s"))


def priced_app(tmp_path: Path, session: str | None = None) -> LoopwatchApp:
    """One session looping on a failing test run, each response reporting its usage."""
    from tests.test_loop_cost import priced_loop

    config = Config()
    return LoopwatchApp(
        config,
        clock=frozen_clock(),
        session=session,
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", events=priced_loop()),
    )


async def _with_stats(pilot) -> None:
    await settle(pilot)
    pilot.app.hub.publish(pilot.app.hub.stats())  # the hub's next tick, now
    await settle(pilot)


@pytest.mark.parametrize("session", [None, "spender"], ids=["dashboard", "detail"])
def test_loop_cost(snap_compare, tmp_path, session):
    """What the loop cost: "loops today" in the header and each detection's cost so far
    in the feed; in the detail view, the episode's cost and each detection's."""
    assert snap_compare(priced_app(tmp_path, session), terminal_size=WIDE, run_before=_with_stats)
