"""Snapshots of the dashboard's triage (issue 33 §2): marks and a range, the one kill
confirmation for the marked sessions, the attention view, the log pane, the column chooser,
the empty state; at 160x48 and 80x24.

Same determinism as ``test_ui_snapshots`` (frozen clock, TZ=UTC, scripted events through a
real hub and store). What is watched is a fixed stand-in here (a real monitor's paths are
temporary); ``test_ui_triage`` checks the real one.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.formats.base import Problem
from monitor.ui.app import LoopwatchApp
from monitor.updates import ProblemReported
from tests.scripted import HOSTILE, frozen_clock, scripted_hub
from tests.test_ui_snapshots import WIDE, live_app, settle, then

pytestmark = pytest.mark.usefixtures("utc")

SMALL = (80, 24)
SIZES = pytest.mark.parametrize("size", [SMALL, WIDE], ids=["small", "wide"])
WATCHED = SimpleNamespace(
    files=SimpleNamespace(
        describe=lambda: "9 file(s) under /var/log/agents",
        start_policy=SimpleNamespace(describe=lambda: "only new lines are read"),
    ),
    sockets=SimpleNamespace(unix_path="/run/user/1000/loopwatch.sock", tcp_address=None),
    otlp=None,
    store=SimpleNamespace(path="/home/op/.local/share/loopwatch/loopwatch.db"),
)


def watched_app(tmp_path: Path, events: list | None = None) -> LoopwatchApp:
    config = Config()
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", events=events),
    )
    app.monitor = WATCHED
    return app


@SIZES
def test_marked_sessions(snap_compare, tmp_path, size):
    """space marks the first row, v then j j marks a range: ● before each marked id."""
    assert snap_compare(
        live_app(tmp_path), terminal_size=size, run_before=then("g", "space", "j", "j", "v", "j")
    )


@SIZES
def test_kill_marked(snap_compare, tmp_path, size):
    """K with two sessions marked: one dialog listing what each kill does."""
    assert snap_compare(
        live_app(tmp_path), terminal_size=size, run_before=then("g", "space", "j", "space", "K")
    )


def test_attention_view(snap_compare, tmp_path):
    """W: only the sessions at warn or above."""
    assert snap_compare(live_app(tmp_path), terminal_size=WIDE, run_before=then("W"))


@SIZES
def test_log_pane(snap_compare, tmp_path, size):
    """L after a bad line and an acknowledgement: file:line and why (literal), the outcome,
    what is watched."""

    async def run_before(pilot) -> None:
        await settle(pilot)
        problem = Problem("/var/log/agents/claude-7f3a.jsonl", 41, f"invalid JSON: {HOSTILE}")
        pilot.app.hub.publish(ProblemReported(problem))
        await pilot.press("g", "a")
        await settle(pilot)
        acked = pilot.app.screen.query_one("SessionsTable").selected_session
        deadline = time.monotonic() + 20  # the hub publishes the session's new level coalesced
        while pilot.app.feed.sessions[acked].level >= Level.WARN and time.monotonic() < deadline:
            await pilot.pause(0.05)
        pilot.app.hub.publish(pilot.app.hub.stats())  # the header's counts as the hub's next tick has them
        await settle(pilot)
        await pilot.press("L")
        await settle(pilot)

    assert snap_compare(watched_app(tmp_path), terminal_size=size, run_before=run_before)


def test_column_chooser(snap_compare, tmp_path):
    """C: the columns that can be hidden, each with its check box."""
    assert snap_compare(live_app(tmp_path), terminal_size=WIDE, run_before=then("C"))


@SIZES
def test_empty_dashboard(snap_compare, tmp_path, size):
    """No session yet: what is watched, the socket, the commands that connect an agent."""
    assert snap_compare(watched_app(tmp_path, events=[]), terminal_size=size, run_before=then())


@SIZES
def test_reason_on_two_lines(snap_compare, tmp_path, size):
    """R twice: Reason has the room of the columns it displaced, on two lines per row."""
    assert snap_compare(live_app(tmp_path), terminal_size=size, run_before=then("R", "R"))
