"""Every operator action end to end: key → modal → database row → the agent
(a real process, or its inbox file) → the UI.

The app runs with a real hub and a real SQLite store in ``tmp_path``, fed with
scripted events at a frozen clock; nothing sleeps: the tests poll with a
deadline through ``pilot.pause``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.ui.app import LoopwatchApp
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.screens.help import HelpScreen
from monitor.ui.screens.inject import InjectScreen
from monitor.ui.screens.kill import KillScreen
from monitor.ui.screens.mute import MuteScreen
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from monitor.ui.widgets.detail.actions_list import ActionsList
from tests.scripted import T0, ScriptedSession, frozen_clock, scripted_app, scripted_hub, settle

#: A minimal agent: follows its inbox and writes down the first inject it gets.
INBOX_AGENT = r"""
import json, os, sys, time
inbox, out = sys.argv[1], sys.argv[2]
pos, deadline = 0, time.time() + 60
while time.time() < deadline:
    if os.path.exists(inbox):
        with open(inbox) as f:
            f.seek(pos); data = f.read(); pos = f.tell()
        for line in data.splitlines():
            message = json.loads(line)
            if message["type"] == "inject":
                with open(out + ".tmp", "w") as o:
                    o.write(message["text"])
                os.replace(out + ".tmp", out)
                sys.exit(0)
    time.sleep(0.02)
sys.exit(3)
"""
SLEEPER = "import time; time.sleep(120)"


def looping_session(session: str, log: Path, pid: int | None = None, start: float = T0) -> list:
    script = ScriptedSession(session, "test-agent", start, str(log), pid=pid)
    for _ in range(4):
        script.call("bash", {"command": "ls /nope"}, "ls: cannot access '/nope'", error=True)
    return script.events


def calm_session(session: str, log: Path) -> list:
    script = ScriptedSession(session, "calm-agent", T0 + 1, str(log))
    for n in range(3):
        script.call("read_file", {"path": f"f{n}.py"}, f"contents {n}")
    return script.events


@pytest.fixture
def spawn():
    processes: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, *args])
        processes.append(proc)
        return proc

    yield start
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def make_app(tmp_path: Path, events: list, **kwargs) -> LoopwatchApp:
    config = Config()
    config.control = type(config.control)(kill_grace_seconds=2.0)
    return scripted_app(tmp_path, events, config=config, **kwargs)


async def until(pilot, condition, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def stored_actions(app: LoopwatchApp, session: str) -> list[dict]:
    return app.store.actions(session)


def notifications(app: LoopwatchApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_inject_reaches_a_real_agent_process(tmp_path, spawn, utc):
    """i opens the modal with the escalation's nudge; an edit is sent, recorded and received."""
    log = tmp_path / "logs" / "looper.jsonl"
    out = tmp_path / "received.txt"
    agent = spawn("-c", INBOX_AGENT, str(log) + ".inbox.jsonl", str(out))
    app = make_app(tmp_path, looping_session("looper", log))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.screen.query_one(SessionsTable).selected_session == "looper"
        await pilot.press("i")
        modal = app.screen
        assert isinstance(modal, InjectScreen)
        text_area = modal.query_one("#message")
        assert text_area.text.startswith("[loopwatch]")
        assert text_area.text == app.hub.session("looper").nudge
        text_area.text = "Stop listing /nope; it does not exist. Create it first."
        await pilot.press("ctrl+s")
        await settle(pilot)
        await until(pilot, lambda: agent.poll() is not None, "the agent to receive the inject")
        assert agent.returncode == 0
        assert out.read_text() == "Stop listing /nope; it does not exist. Create it first."
        rows = stored_actions(app, "looper")
        assert [(r["kind"], r["outcome"]) for r in rows] == [("inject", "delivered")]
        assert rows[0]["text"] == "Stop listing /nope; it does not exist. Create it first."
        assert any(n.startswith("Inject: looper: delivered") for n in notifications(app))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionDetailScreen)
        shown = app.screen.query_one(ActionsList).rows
        assert [(r.kind, r.outcome) for r in shown.values()] == [("inject", "delivered")]


async def test_inject_cancel_sends_nothing(tmp_path, utc):
    """Escape closes the inject modal without recording or sending anything."""
    log = tmp_path / "logs" / "looper.jsonl"
    app = make_app(tmp_path, looping_session("looper", log))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("i")
        assert isinstance(app.screen, InjectScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, InjectScreen)
        assert stored_actions(app, "looper") == []
        assert not Path(str(log) + ".inbox.jsonl").exists()


async def test_inject_box_types_after_the_suggested_nudge(tmp_path, utc):
    """The cursor starts at the end of the pre-filled nudge: what the operator
    types follows it ("…[loopwatch] CRITICAL:" ran into the typed text)."""
    log = tmp_path / "logs" / "looper.jsonl"
    app = make_app(tmp_path, looping_session("looper", log))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("i")
        assert isinstance(app.screen, InjectScreen)
        nudge = app.hub.session("looper").nudge
        await pilot.press("space", "O", "K")
        assert app.screen.query_one("#message").text == nudge + " OK"


async def test_kill_signals_the_real_process(tmp_path, spawn, utc):
    """k shows pid and command line; y kills the process; the row and the UI say so."""
    victim = spawn("-c", SLEEPER)
    log = tmp_path / "logs" / "victim.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()  # a pid is trusted only from a log file of the monitor's user...
    # ...in records newer than the process (older ones would name a reused pid)
    app = make_app(tmp_path, looping_session("victim", log, pid=victim.pid, start=time.time()))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("K")
        modal = app.screen
        assert isinstance(modal, KillScreen)
        assert modal.killable
        assert f"SIGTERM pid {victim.pid}" in modal.describe
        # The command line is shown (shortened to fit, so only its start is
        # certain: the interpreter path varies with where the repo lives).
        assert "python" in modal.describe
        assert "Verified:" in modal.describe and "NOT confirmed by the agent" in modal.describe
        await pilot.press("y")
        await settle(pilot)
        await until(pilot, lambda: victim.poll() is not None, "the process to end")
        rows = stored_actions(app, "victim")
        assert [(r["kind"], r["outcome"]) for r in rows] == [("kill", "delivered")]
        assert any(n.startswith("Kill: victim: delivered") for n in notifications(app))


async def test_kill_refused_explains_why(tmp_path, spawn, utc):
    """A session whose process is gone offers only Close and says why."""
    gone = spawn("-c", "pass")
    gone.wait()
    config = Config()
    events = looping_session("ghost", tmp_path / "logs" / "ghost.jsonl", pid=gone.pid)
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", events=events, channels=False),
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("K")
        modal = app.screen
        assert isinstance(modal, KillScreen)
        assert not modal.killable
        assert str(gone.pid) in modal.refusal
        await pilot.press("y")  # disabled: nothing happens
        await pilot.pause()
        assert app.screen is modal
        await pilot.press("escape")
        await settle(pilot)
        assert stored_actions(app, "ghost") == []


async def test_kill_checks_again_a_process_that_exited_after_it_was_seen(tmp_path, spawn, utc):
    """The pid was alive and verified when the session was seen; it has exited since: Close only."""
    victim = spawn("-c", SLEEPER)
    log = tmp_path / "logs" / "victim.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    app = make_app(tmp_path, looping_session("victim", log, pid=victim.pid, start=time.time()))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        victim.kill()
        victim.wait()
        await pilot.press("K")
        modal = app.screen
        assert isinstance(modal, KillScreen) and not modal.killable
        assert f"pid {victim.pid} has already exited" in modal.refusal


async def test_an_ended_session_is_not_offered_an_inject_or_a_kill(tmp_path, utc):
    """i and K on a session that has ended say why instead of opening a dialog; nothing is sent."""
    log = tmp_path / "logs" / "done.jsonl"
    script = ScriptedSession("done", "test-agent", T0, str(log))
    for _ in range(4):
        script.call("bash", {"command": "ls /nope"}, "ls: cannot access '/nope'", error=True)
    script.end()
    app = make_app(tmp_path, script.events)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("i")
        await settle(pilot)
        assert not isinstance(app.screen, InjectScreen)
        await pilot.press("K")
        await settle(pilot)
        assert not isinstance(app.screen, KillScreen)
        said = notifications(app)
        assert any(n.startswith("Nothing to inject into: done: the session has ended") for n in said), said
        assert any(n.startswith("Nothing to kill: done: the session has ended") for n in said), said
        assert stored_actions(app, "done") == []
        assert not (tmp_path / "logs" / "done.jsonl.inbox.jsonl").exists()


async def test_ack_false_positive_and_mute(tmp_path, utc):
    """a, f and m change the session's escalation, are recorded, and reach the inbox."""
    log = tmp_path / "logs" / "looper.jsonl"
    app = make_app(
        tmp_path, looping_session("looper", log) + calm_session("calm", tmp_path / "logs" / "calm.jsonl")
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        assert table.selected_session == "looper"  # most urgent first
        assert app.feed.sessions["looper"].level >= Level.WARN

        last = app.feed.sessions["looper"].last_detection.detector
        await pilot.press("f")
        await settle(pilot)
        marked = stored_actions(app, "looper")[-1]
        # The whole loop episode is marked, whichever detectors joined it (they are named).
        assert marked["kind"] == "false_positive" and last in marked["detail"].split(" no longer ")[0]
        assert table.selected_session == "looper"  # acting pins the selection through re-sorts

        await pilot.press("m")
        modal = app.screen
        assert isinstance(modal, MuteScreen)
        assert modal.detectors[0] == (last, "raised the current level")
        await pilot.press("enter")
        await settle(pilot)
        muted = stored_actions(app, "looper")[-1]
        assert (muted["kind"], muted["outcome"]) == ("mute", "delivered")
        assert app.feed.sessions["looper"].muted == frozenset({last})

        if app.feed.sessions["looper"].level > Level.NONE:
            await pilot.press("a")
            await settle(pilot)
            assert stored_actions(app, "looper")[-1]["kind"] == "ack"
            assert app.feed.sessions["looper"].level == Level.NONE
            inbox = [orjson.loads(line) for line in Path(str(log) + ".inbox.jsonl").read_bytes().splitlines()]
            assert inbox[-1]["type"] == "ack"
        kinds = [r["kind"] for r in stored_actions(app, "looper")]
        assert kinds[:2] == ["false_positive", "mute"]
        assert all(r["outcome"] == "delivered" for r in stored_actions(app, "looper"))


async def test_keymap_remaps_an_action(tmp_path, spawn, utc):
    """[ui] keymap moves kill to ctrl+k: the new key opens the modal, the old one does nothing."""
    log = tmp_path / "logs" / "looper.jsonl"
    config = Config()
    config.ui = type(config.ui)(keymap={"kill": "ctrl+k"})
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(
            config, db=tmp_path / "db.sqlite", logs=tmp_path / "logs", events=looping_session("looper", log)
        ),
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("K")
        assert not isinstance(app.screen, KillScreen)
        await pilot.press("ctrl+k")
        assert isinstance(app.screen, KillScreen)


async def test_open_filter_help_history_and_quit(tmp_path, utc):
    """enter opens the detail, / filters the table, ? shows help, h history, q quits."""
    logs = tmp_path / "logs"
    app = make_app(
        tmp_path, looping_session("looper", logs / "a.jsonl") + calm_session("calm", logs / "b.jsonl")
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        assert table.row_count == 2
        await pilot.press("slash", "c", "a", "l", "m")
        await pilot.pause()
        assert table.row_count == 1 and table.selected_session == "calm"
        await pilot.press("enter")  # leaves the filter for the table
        await pilot.press("enter")  # opens the session
        await settle(pilot)
        assert isinstance(app.screen, SessionDetailScreen) and app.screen.session == "calm"
        await pilot.press("escape")
        await pilot.press("escape")  # clears the filter
        await pilot.pause()
        assert table.row_count == 2
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        ids = {row[1] for row in app.screen.rows}
        assert {"ack", "inject", "kill", "false_positive", "mute", "open", "filter", "help", "quit"} <= ids
        await pilot.press("escape")
        await pilot.press("h")
        await pilot.pause()
        assert type(app.screen).__name__ == "HistoryScreen"
        await pilot.press("escape")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_mouse_click_opens_and_footer_acts(tmp_path, utc):
    """Clicking a selected row opens it; clicking the footer's Inject key opens the modal."""
    logs = tmp_path / "logs"
    app = make_app(tmp_path, looping_session("looper", logs / "a.jsonl"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        footer_key = next(k for k in app.screen.query("FooterKey") if k.action == "inject")
        await pilot.click(footer_key)
        await pilot.pause()
        assert isinstance(app.screen, InjectScreen)
        await pilot.click("#cancel")
        await pilot.pause()
        await pilot.click(SessionsTable, offset=(20, 1))
        await pilot.pause()
        await pilot.click(SessionsTable, offset=(20, 1))
        await settle(pilot)
        assert isinstance(app.screen, SessionDetailScreen)


async def test_actions_in_the_command_palette(tmp_path, utc):
    """The palette lists the operator actions for the selected session."""
    logs = tmp_path / "logs"
    app = make_app(tmp_path, looping_session("looper", logs / "a.jsonl"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Acknowledge",
            "Inject message",
            "Kill session",
            "Mark false positive",
            "Mute detector",
            "History",
            "Help",
            "Theme: loopwatch-light",
        ):
            assert title in titles
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Acknowledge")
        command.callback()
        await settle(pilot)
        assert stored_actions(app, "looper")[-1]["kind"] == "ack"
