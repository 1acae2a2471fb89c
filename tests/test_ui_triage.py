"""Triage on the dashboard (issue 33 §2): marks and actions on every marked session, the
attention view and ``w``, the log pane, pane control and a layout kept across restarts,
the empty state.

The real app over a real hub and SQLite store in ``tmp_path`` (scripted events, a frozen
clock), driven by Pilot; kills signal real processes; the log pane and the empty state read a
real :class:`~monitor.hub.live.LiveMonitor` following a real file and socket.  Nothing sleeps.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from monitor.config import Config
from monitor.control import process_state
from monitor.events import Level
from monitor.hub.live import LiveMonitor
from monitor.sources.paths import StartPolicy
from monitor.ui.app import LoopwatchApp
from monitor.ui.screens.bulk_kill import BulkKillScreen
from monitor.ui.screens.columns import ColumnsScreen
from monitor.ui.ui_state import DashboardLayout, load, save
from monitor.ui.widgets.dashboard.columns import layout
from monitor.ui.widgets.dashboard.empty_state import EmptyState
from monitor.ui.widgets.dashboard.log_pane import LOG_LINES, LogPane
from monitor.ui.widgets.dashboard.sessions_table import MARK, SessionsTable
from monitor.ui.widgets.dashboard.sorting import needs_attention, next_unvisited
from monitor.updates import DetectionRaised
from tests.scripted import HOSTILE, T0, ScriptedSession, frozen_clock, scripted_app, scripted_hub
from tests.test_ui_actions import (
    SLEEPER,
    looping_session,
    notifications,
    settle,
    spawn,
    stored_actions,
    until,
)
from tests.test_watch_headless import loop_lines

pytestmark = pytest.mark.usefixtures("utc")
__all__ = ["spawn"]  # the fixture, imported for these tests


def make_app(tmp_path: Path, events: list | None = None, channels: bool = True, **kwargs) -> LoopwatchApp:
    config = Config()
    config.control = type(config.control)(kill_grace_seconds=2.0)
    return scripted_app(tmp_path, events, config=config, channels=channels, **kwargs)


def session_cell(table: SessionsTable, session: str) -> str:
    return table.get_cell(session, "session").plain


def fleet(tmp_path: Path, count: int) -> list:
    """``count`` sessions failing the same call, each at warn or above, plus one calm one."""
    events = []
    for n in range(count):
        events += looping_session(f"loop-{n}", tmp_path / "logs" / f"loop-{n}.jsonl", start=T0 + n)
    calm = ScriptedSession("calm", "calm-agent", T0 + 50, str(tmp_path / "logs" / "calm.jsonl"))
    calm.call("read_file", {"path": "a.py"}, "contents")
    return sorted([*events, *calm.events], key=lambda e: (e.ts, e.session, e.line or 0))


# -- marks and actions on all marked --------------------------------------------------------


async def test_space_and_a_visual_range_mark_rows_and_ack_acts_on_each(tmp_path):
    app = make_app(tmp_path, fleet(tmp_path, 4))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        order = table.row_ids()
        await pilot.press("g", "space", "j", "space")
        assert table.marks == set(order[:2])
        assert session_cell(table, order[0]).startswith(MARK) and not session_cell(
            table, order[2]
        ).startswith(MARK)
        await pilot.press("space")  # again: unmarked
        assert table.marks == {order[0]}
        await pilot.press("x")
        assert table.marks == set() and not session_cell(table, order[0]).startswith(MARK)
        await pilot.press("g", "j", "v", "j", "j")  # a range from row 1 to row 3, growing as the cursor moves
        assert table.marks == set(order[1:4])
        await pilot.press("k")
        assert table.marks == set(order[1:3])
        await pilot.press("v", "j", "j")  # ended: moving no longer marks
        assert table.marks == set(order[1:3])
        marked = sorted(table.marks)
        assert all(app.feed.sessions[s].level >= Level.WARN for s in marked)
        await pilot.press("a")
        await settle(pilot)
        for session in marked:  # one recorded action per session, as from one session
            assert [(r["kind"], r["outcome"]) for r in stored_actions(app, session)] == [("ack", "delivered")]
        others = [s for s in order if s not in marked]
        assert all(stored_actions(app, s) == [] for s in others)
        summary = notifications(app)[-1]
        assert summary.startswith("Acknowledged: 2 sessions") and all(s in summary for s in marked)


async def test_false_positive_on_marked_sessions_skips_one_without_a_detection(tmp_path):
    app = make_app(tmp_path, fleet(tmp_path, 2))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        for session in ("loop-0", "loop-1", "calm"):
            table.select_session(session)
            await pilot.press("space")
        await pilot.press("f")
        await settle(pilot)
        for session in ("loop-0", "loop-1"):
            assert [r["kind"] for r in stored_actions(app, session)] == ["false_positive"]
        assert stored_actions(app, "calm") == []
        assert "calm: skipped — no detection to mark" in notifications(app)[-1]


async def test_kill_marked_asks_once_lists_refusals_and_proves_each_process(tmp_path, spawn):
    """Two real processes, one pid that has exited and pid 1: one dialog; the two die, the
    others are refused with why, and each session has its own recorded kill (or none)."""
    victims = [spawn("-c", SLEEPER), spawn("-c", SLEEPER)]
    gone = spawn("-c", "pass")
    gone.wait()
    logs = tmp_path / "logs"
    logs.mkdir()
    events = []
    now = time.time()
    for n, pid in enumerate([victims[0].pid, victims[1].pid, gone.pid, 1]):
        log = logs / f"s{n}.jsonl"
        log.touch()  # a pid is trusted only from a log file of the monitor's user, newer than the process
        events += looping_session(f"s{n}", log, pid=pid, start=now + n)
    app = make_app(tmp_path, sorted(events, key=lambda e: (e.ts, e.session, e.line or 0)), channels=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        for session in ("s0", "s1", "s2", "s3"):
            table.select_session(session)
            await pilot.press("space")
        await pilot.press("K")
        modal = app.screen
        assert isinstance(modal, BulkKillScreen)
        assert modal.killable == ["s0", "s1"] or sorted(modal.killable) == ["s0", "s1"]
        refused = {p.session: p.refusal for p in modal.plans if p.refusal}
        assert set(refused) == {"s2", "s3"}
        assert f"pid {gone.pid} is not running" in refused["s2"]
        assert "pid 1" in refused["s3"]
        shown = str(modal.query_one("#kill-what").render())
        assert "Refused (not killed)" in shown and f"SIGTERM pid {victims[0].pid}" in shown
        await pilot.press("y")
        await settle(pilot)
        await until(pilot, lambda: all(v.poll() is not None for v in victims), "both processes to end")
        await settle(pilot)
        for session in ("s0", "s1"):
            assert [(r["kind"], r["outcome"]) for r in stored_actions(app, session)] == [
                ("kill", "delivered")
            ]
        assert stored_actions(app, "s2") == [] and stored_actions(app, "s3") == []
        summary = notifications(app)[-1]
        assert summary.startswith("Kill: 2 sessions") and "s3: skipped" in summary


async def test_kill_marked_cancel_kills_nothing(tmp_path, spawn):
    victim = spawn("-c", SLEEPER)
    log = tmp_path / "logs" / "v.jsonl"
    log.parent.mkdir()
    log.touch()
    app = make_app(tmp_path, looping_session("v", log, pid=victim.pid, start=time.time()), channels=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("space", "K")
        assert isinstance(app.screen, BulkKillScreen)
        assert app.screen.query_one("#confirm").region.height > 0  # the button fits at 80x24
        await pilot.press("escape")
        await settle(pilot)
        assert victim.poll() is None and stored_actions(app, "v") == []


async def test_pause_marked_stops_each_process_and_p_again_resumes_them(tmp_path, spawn):
    """Two real processes marked: p stops both (state T, recorded per session), p again
    (every marked one paused) continues both."""
    victims = [spawn("-c", SLEEPER), spawn("-c", SLEEPER)]
    logs = tmp_path / "logs"
    logs.mkdir()
    events = []
    now = time.time()
    for n, victim in enumerate(victims):
        log = logs / f"p{n}.jsonl"
        log.touch()
        events += looping_session(f"p{n}", log, pid=victim.pid, start=now + n)
    app = make_app(tmp_path, sorted(events, key=lambda e: (e.ts, e.session, e.line or 0)), channels=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        for session in ("p0", "p1"):
            table.select_session(session)
            await pilot.press("space")
        await pilot.press("p")
        await until(pilot, lambda: all(process_state(v.pid) == "T" for v in victims), "both stopped")
        await until(pilot, lambda: all(app.feed.sessions[s].paused for s in ("p0", "p1")), "both paused")
        await pilot.press("p")
        await until(pilot, lambda: all(process_state(v.pid) in "RS" for v in victims), "both running")
        await settle(pilot)
        for session in ("p0", "p1"):
            kinds = [(r["kind"], r["outcome"]) for r in stored_actions(app, session)]
            assert kinds == [("pause", "delivered"), ("resume", "delivered")], kinds
        assert notifications(app)[-1].startswith("Resumed: 2 sessions")


# -- the attention view and w ---------------------------------------------------------------


def test_next_unvisited_reaches_every_session_although_the_order_moves():
    """The queue's order changes between presses (warnings come and go): "the one after the
    current one" bounced between two sessions; each is visited once, then it wraps."""

    def presses(pick) -> list[str]:
        queue, seen, current = ["a", "b", "c", "d"], [], None
        for _ in range(5):
            current = pick(queue, current)
            seen.append(current)
            queue.remove(current)
            queue.insert(0, current)  # the one just shown is now the longest waiting
        return seen

    def next_in(queue: list[str], current: str | None) -> str:  # what w did before
        return queue[(queue.index(current) + 1) % len(queue)] if current in queue else queue[0]

    visited: set[str] = set()
    seen = presses(lambda queue, current: next_unvisited(queue, current, visited))
    assert sorted(seen[:4]) == ["a", "b", "c", "d"] and seen[4] in "abcd"
    assert set(presses(next_in)) == {"a", "b"}
    assert next_unvisited([], "a", visited) is None and visited == set()


def test_needs_attention_is_warn_or_waiting():
    def info(level, status="live", **extra):
        return SimpleNamespace(level=level, status=status, **extra)

    assert needs_attention(info(Level.WARN)) and needs_attention(info(Level.TERMINATE))
    assert not needs_attention(info(Level.NOTICE))
    assert needs_attention(info(Level.NONE, "waiting"))  # a waiting-for-input status (h35-live)
    assert needs_attention(info(Level.NONE, waiting=True))


async def test_w_visits_every_session_in_turn_and_wraps_while_the_order_moves(tmp_path):
    """Eight sessions at warn or above; after each press the visited one becomes the longest
    waiting (as when the feed's ring drops older detections): w still visits all eight, then wraps."""
    app = make_app(tmp_path, fleet(tmp_path, 8))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        warned = {s for s, i in app.feed.sessions.items() if i.level >= Level.WARN}
        assert len(warned) == 8
        visited = []
        for n in range(9):
            await pilot.press("w")
            session = table.selected_session
            visited.append(session)
            last = app.feed.sessions[session].last_detection
            app.feed.push(DetectionRaised(dataclasses.replace(last, ts=T0 - 100 - n)))
            await settle(pilot)
        assert set(visited[:8]) == warned and len(set(visited[:8])) == 8
        assert visited[8] in warned  # a new round


async def test_attention_view_shows_only_what_needs_attention(tmp_path):
    app = make_app(tmp_path, fleet(tmp_path, 3))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        assert "calm" in table.row_ids()
        await pilot.press("W")
        await pilot.pause()
        assert sorted(table.row_ids()) == ["loop-0", "loop-1", "loop-2"]
        await pilot.press("W")
        await pilot.pause()
        assert "calm" in table.row_ids()


# -- the log pane --------------------------------------------------------------------------


@pytest.fixture
def short_dir():
    """A short directory for a Unix socket (paths are limited to ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="lw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def live_app(tmp_path: Path, short_dir: Path, log: Path) -> tuple[LoopwatchApp, LiveMonitor]:
    config = Config()
    live = LiveMonitor(
        config,
        paths=[str(log)],
        start_policy=StartPolicy(mode="start"),
        db=str(tmp_path / "db.sqlite"),
        socket_path=str(short_dir / "lw.sock"),
    )
    app = LoopwatchApp(config, clock=frozen_clock(), hub_factory=live.running)
    app.monitor = live
    return app, live


async def test_empty_state_says_what_is_watched_the_socket_and_how_to_connect(tmp_path, short_dir):
    log = tmp_path / "agent.jsonl"
    log.write_text("")
    app, live = live_app(tmp_path, short_dir, log)
    for size in ((160, 48), (80, 24)):
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            empty = app.screen.query_one(EmptyState)
            assert empty.display and not app.screen.query_one(SessionsTable).display
            text = empty.render().plain
            assert "No sessions yet" in text
            assert "1 file(s) under" in text and str(log) in text
            assert str(short_dir / "lw.sock") in text
            assert "loopwatch install-hook claude" in text and "loopwatch install-hook codex" in text
            assert f"LOOPWATCH_SOCKET={short_dir / 'lw.sock'} python examples/example_agent.py" in text
            assert empty.region.height >= 12  # it is all on the screen, even at 80x24
        app, live = live_app(tmp_path, short_dir, log)


async def test_log_pane_lists_bad_lines_literally_action_outcomes_and_sources(tmp_path, short_dir):
    log = tmp_path / "a[red]x\x1bz.jsonl"  # a hostile file name: shown as characters
    lines = loop_lines("agent", 6).splitlines()
    lines.insert(2, '{"broken": ' + HOSTILE)
    log.write_text("\n".join(lines) + "\n")
    app, live = live_app(tmp_path, short_dir, log)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.feed.problems >= 1 and "agent" in app.feed.sessions, "the file read")
        await settle(pilot)
        await pilot.press("L")
        pane = app.screen.query_one(LogPane)
        assert pane.display and not app.screen.query_one("#lower").display
        text = "".join(strip.text for strip in pane.lines)
        shown = str(log).replace("\x1b", "␛")
        # file:line of the bad line, and why (the pane wraps: a space at a wrap point is not shown)
        assert "".join(f"{shown}:3: invalid JSON".split()) in "".join(text.split())
        assert "\x1b" not in text and "a[red]x␛z.jsonl" in text  # literal, never markup or an escape
        assert str(short_dir / "lw.sock") in text and "watching" in text
        await pilot.press("a")
        await settle(pilot)
        text = "".join(strip.text for strip in pane.lines)
        assert "ack agent: delivered" in text
        await pilot.press("L")
        assert not pane.display and app.screen.query_one("#lower").display


def test_log_pane_is_a_ring():
    assert LOG_LINES == LogPane().max_lines


# -- pane control and the layout kept across restarts ---------------------------------------


def test_reason_widened_takes_the_room_of_other_columns():
    natural = {"agent": 12, "session": 16, "status": 5, "source": 30, "source_name": 14}
    normal = dict((k, w) for k, _, w in layout(160, natural))
    wide = dict((k, w) for k, _, w in layout(160, natural, reason_wide=True))
    assert wide["reason"] >= 60 > normal["reason"]
    hidden = dict((k, w) for k, _, w in layout(160, natural, hidden=frozenset({"source", "level"})))
    assert "source" not in hidden and "level" in hidden  # level cannot be hidden
    assert hidden["reason"] > normal["reason"]


async def test_maximise_widen_choose_columns_and_the_layout_survives_a_restart(tmp_path):
    state = tmp_path / "state" / "ui.json"
    app = make_app(tmp_path, fleet(tmp_path, 3))
    app.ui_state_path = state
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = app.screen
        table = screen.query_one(SessionsTable)
        await pilot.press("z")
        assert screen.maximized is table
        await pilot.press("z")
        assert screen.maximized is None
        reason = dict((k, w) for k, _, w in table._columns)["reason"]
        await pilot.press("R")
        await pilot.pause()
        assert dict((k, w) for k, _, w in table._columns)["reason"] > reason
        await pilot.press("R")  # again: Reason on two lines, each row two lines high
        await pilot.pause()
        assert table.reason_lines == 2 and all(row.height == 2 for row in table.rows.values())
        wide = dict((k, w) for k, _, w in table._columns)["reason"]
        cells = [table.get_cell(sid, "reason") for sid in table.row_ids()]
        long = [c for c in cells if "\n" in c.plain]
        assert long and all(max(map(len, c.plain.split("\n"))) <= wide for c in cells)
        await pilot.press("C")
        chooser = app.screen
        assert isinstance(chooser, ColumnsScreen)
        await pilot.press("space", "enter")  # the first choice, Agent, hidden
        await pilot.pause()
        assert "agent" not in [k for k, _, _ in table._columns]
        await pilot.press("s", "W", "L")
        await pilot.press("slash", "l", "o", "o", "p", "enter")
        await pilot.pause()
    saved = load(state)
    assert saved == DashboardLayout(
        sort_column="level",
        sort_reverse=False,
        filter_text="loop",
        attention_only=True,
        hidden_columns=["agent"],
        reason_wide=True,
        reason_lines=2,
        log_shown=True,
    )
    again = make_app(tmp_path / "second", fleet(tmp_path, 3))
    again.ui_state_path = state
    async with again.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = again.screen.query_one(SessionsTable)
        assert table.sort_column == "level" and table.attention_only and table.reason_wide
        assert table.reason_lines == 2
        assert table.filter_text == "loop" and "agent" not in [k for k, _, _ in table._columns]
        assert again.screen.query_one(LogPane).display
        assert sorted(table.row_ids()) == ["loop-0", "loop-1", "loop-2"]


def test_layout_is_never_written_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "ui.json").symlink_to(target)
    assert save(state / "ui.json", DashboardLayout(filter_text="x")) is None
    assert target.read_text() == "keep me" and not (state / "ui.json").is_symlink()
    assert load(state / "ui.json").filter_text == "x"
    linked = tmp_path / "linked"
    linked.symlink_to(state)
    problem = save(linked / "ui.json", DashboardLayout())
    assert problem and "symbolic link" in problem
    (state / "ui.json").write_text(
        '{"sort_column": "nonsense", "hidden_columns": ["agent", 3], "log_shown": 1}'
    )
    assert load(state / "ui.json") == DashboardLayout(hidden_columns=["agent"])
    os.chmod(state, 0o777)
    assert "writable by others" in (save(state / "ui.json", DashboardLayout()) or "")


async def test_triage_keys_are_in_the_help_and_can_be_rebound(tmp_path):
    """Every triage key is listed in the dashboard's help with its keymap id; a user keymap
    moves one, and a key another dashboard action has is refused."""
    from monitor.config import ConfigError
    from monitor.ui.app import check_keymap

    ids = {
        "mark",
        "mark.range",
        "mark.clear",
        "attention.only",
        "log",
        "pane.maximize",
        "reason.wide",
        "columns",
    }
    config = Config()
    config.ui = dataclasses.replace(config.ui, keymap={"mark": "M"})
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", events=fleet(tmp_path, 2)),
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        listed = {binding_id: key for key, binding_id, _ in app.key_help(app.screen)}
        assert ids <= set(listed) and listed["mark"] == "M"
        await pilot.press("M")
        assert app.screen.query_one(SessionsTable).marks == {
            app.screen.query_one(SessionsTable).selected_session
        }
    with pytest.raises(ConfigError, match="already ack's key"):
        check_keymap({"mark": "a"})
    with pytest.raises(ConfigError, match="already mark's key"):
        check_keymap({"ack": "space"})


async def test_a_range_ended_before_the_cursor_move_is_told_still_reaches_the_cursor(tmp_path):
    """Typed fast (v j j v in a terminal), the second v can run before the table has told the
    screen about the moves: the range still ends where the cursor is."""
    app = make_app(tmp_path, fleet(tmp_path, 4))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = app.screen
        table = screen.query_one(SessionsTable)
        await pilot.press("g", "v")
        screen.action_table("cursor_down")  # no pause: the RowHighlighted messages are still queued
        screen.action_table("cursor_down")
        screen.action_mark_range()
        assert table.marks == set(table.row_ids()[:3])
