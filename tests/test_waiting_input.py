"""Waiting for input (issue 35 §1): a session blocked on the person is its own state.

The hook payloads are built from the field names of the current hook
references (no agent runs here):

* Claude Code, https://code.claude.com/docs/en/hooks -- ``Notification``
  (``notification_type``: ``permission_prompt`` / ``idle_prompt`` /
  ``elicitation_dialog``, ``message``, ``title``), ``PermissionRequest``
  (``tool_name``, ``tool_input``, ``permission_suggestions``),
  ``PermissionDenied`` (``tool_name``, ``tool_input``, ``tool_use_id``,
  ``reason``), ``Elicitation`` (``mcp_server_name``, ``message``,
  ``requested_schema``), ``ElicitationResult`` (``mcp_server_name``,
  ``action``, ``content``);
* Codex, https://developers.openai.com/codex/hooks -- ``PermissionRequest``
  (``tool_name``, ``tool_input.command``).

The hooks run as real ``loopwatch hook`` subprocesses against a real hub and
socket server; timers use the hub's injected clock, never a sleep.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.config import ConfigError, build_config
from monitor.detect.analysis.waits import waited
from monitor.detect.engine import Engine
from monitor.events import Event, Kind, Level
from monitor.hooks import parse_hook_input
from monitor.updates import WaitingNotice
from tests.socketkit import running_monitor
from tests.test_hooks import PRE_TOOL, run_hook_async

SESSION = "sess-wait"
BASE = {"session_id": SESSION, "transcript_path": "/t/sess-wait.jsonl", "cwd": "/w"}
PERMISSION_REQUEST = {
    **BASE,
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build/", "description": "clean"},
    "permission_suggestions": [{"type": "addRules", "behavior": "allow", "destination": "localSettings"}],
}
NOTIFICATION_PERMISSION = {
    **BASE,
    "hook_event_name": "Notification",
    "notification_type": "permission_prompt",
    "message": "Claude needs your permission to use Bash",
    "title": "Permission needed",
}
NOTIFICATION_IDLE = {
    **BASE,
    "hook_event_name": "Notification",
    "notification_type": "idle_prompt",
    "message": "Claude is waiting for your input",
}
ELICITATION = {
    **BASE,
    "hook_event_name": "Elicitation",
    "mcp_server_name": "github",
    "message": "Which repository should I open the issue in?",
    "requested_schema": {"type": "object", "properties": {"repo": {"type": "string"}}},
}
ELICITATION_RESULT = {
    **BASE,
    "hook_event_name": "ElicitationResult",
    "mcp_server_name": "github",
    "action": "accept",
    "content": {"repo": "acme/api"},
}
PERMISSION_DENIED = {
    **BASE,
    "hook_event_name": "PermissionDenied",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build/"},
    "tool_use_id": "toolu_rm",
    "reason": "Auto mode classifier: destructive command",
}
CALL = dict(PRE_TOOL, **BASE, tool_use_id="toolu_rm", tool_input={"command": "rm -rf build/"})
RESULT = dict(CALL, hook_event_name="PostToolUse", tool_response={"stdout": "", "stderr": ""})


def _parse(payload: dict, agent: str = "claude-code", now: float = 100.0) -> list[dict]:
    return parse_hook_input(json.dumps(payload).encode(), agent, pid=1, now=now).events


def test_the_hook_events_that_mean_waiting_become_waiting_records():
    """Each documented way of saying "the agent waits for you" is one ``waiting`` record,
    with why and what it asks; auth_success and the like are nothing."""
    assert _parse(PERMISSION_REQUEST) == [
        {
            "type": "waiting",
            "session": SESSION,
            "ts": 100.0,
            "status": "permission",
            "content": "Bash: rm -rf build/",
        }
    ]
    assert _parse(NOTIFICATION_PERMISSION)[0]["status"] == "permission"
    assert _parse(NOTIFICATION_IDLE)[0]["status"] == "idle"
    (elicit,) = _parse(ELICITATION)
    assert elicit["status"] == "elicitation"
    assert elicit["content"] == "github: Which repository should I open the issue in?"
    assert _parse(ELICITATION_RESULT)[0]["status"] == "resolved"
    assert _parse({**NOTIFICATION_IDLE, "notification_type": "auth_success", "message": "ok"}) == []
    (denied,) = _parse(PERMISSION_DENIED)
    assert denied["type"] == "tool_result" and denied["is_error"] and denied["id"] == "toolu_rm"
    assert "destructive command" in denied["content"]
    # Codex's PermissionRequest has the same shape.
    codex = {**PERMISSION_REQUEST, "tool_name": "Bash", "tool_input": {"command": "cargo publish"}}
    assert _parse(codex, "codex")[0]["content"] == "Bash: cargo publish"


async def test_a_permission_prompt_through_real_hooks_is_waiting_until_the_result(tmp_path: Path):
    """PreToolUse, then the permission dialog (PermissionRequest and its Notification): the
    session waits for input, since the first of them, asking what the call runs.  The
    tool's result ends it."""
    async with running_monitor(tmp_path) as (hub, server):
        for payload in (CALL, PERMISSION_REQUEST, NOTIFICATION_PERMISSION):
            code, reply, err = await run_hook_async("claude", payload, server.unix_path)
            assert code == 0 and reply is None and "ignored" not in err
        await hub.join()
        info = hub.session(SESSION)
        assert info is not None and info.waiting and info.waiting_why == "permission"
        assert info.waiting_for == "Bash: rm -rf build/"
        first_wait = info.waiting_since
        assert first_wait > 0
        assert info.level == 0 and info.events == 3
        await run_hook_async("claude", RESULT, server.unix_path)
        await hub.join()
        info = hub.session(SESSION)
        assert not info.waiting and info.waiting_since == 0.0 and info.waiting_for == ""


async def test_an_elicitation_ends_with_its_result_and_a_denial_with_the_denied_call(tmp_path: Path):
    async with running_monitor(tmp_path) as (hub, server):
        await run_hook_async("claude", ELICITATION, server.unix_path)
        await hub.join()
        assert hub.session(SESSION).waiting_why == "elicitation"
        await run_hook_async("claude", ELICITATION_RESULT, server.unix_path)
        await hub.join()
        assert not hub.session(SESSION).waiting
        await run_hook_async("claude", CALL, server.unix_path)
        await run_hook_async("claude", PERMISSION_REQUEST, server.unix_path)
        await hub.join()
        assert hub.session(SESSION).waiting
        await run_hook_async("claude", PERMISSION_DENIED, server.unix_path)
        await hub.join()
        assert not hub.session(SESSION).waiting


async def test_a_long_wait_raises_one_notice(tmp_path: Path):
    """Past ``[sources] waiting_notice_seconds`` a waiting session raises one notice per
    wait (the hub's clock moved on; no sleep)."""
    config = build_config({"sources": {"waiting_notice_seconds": 120}})
    async with running_monitor(tmp_path, config) as (hub, server):
        seen: list[object] = []
        hub.subscribe(seen.append, (WaitingNotice,))
        await run_hook_async("claude", NOTIFICATION_IDLE, server.unix_path)
        await hub.join()
        since = hub.session(SESSION).waiting_since
        hub.clock = lambda: since + 60
        assert hub.notice_waits() == []
        hub.clock = lambda: since + 121
        (notice,) = hub.notice_waits()
        assert notice == WaitingNotice(SESSION, since, "idle", "Claude is waiting for your input")
        assert seen == [notice]
        assert hub.notice_waits() == []  # once per wait
        hub.clock = lambda: since + 10_000
        assert hub.notice_waits() == []


def test_waiting_notice_seconds_is_validated():
    assert build_config({}).sources.waiting_notice_seconds == 300.0
    assert build_config({"sources": {"waiting_notice_seconds": 0}}).sources.waiting_notice_seconds == 0.0
    for bad in (-1, "5m", 10**9):
        with pytest.raises(ConfigError, match="waiting_notice_seconds"):
            build_config({"sources": {"waiting_notice_seconds": bad}})


# -- never against a loop threshold ---------------------------------------------------------------


def _call(ts: float, n: int, command: str = "gh run view 42") -> Event:
    return Event(Kind.TOOL_CALL, "s", ts, call_id=f"c{n}", tool="Bash", args={"command": command})


def _result(ts: float, n: int) -> Event:
    return Event(Kind.TOOL_RESULT, "s", ts, call_id=f"c{n}", content="in_progress")


def _wait(ts: float, status: str = "permission") -> Event:
    return Event(Kind.WAITING, "s", ts, status=status, content="Bash: gh run view 42")


def test_time_spent_waiting_for_the_person_is_not_a_wait_of_the_agent():
    """The same call 5 minutes later is "waited" (polling) when the agent let the time pass,
    not when the person took it to answer a permission prompt."""
    alone = Engine(build_config({}))
    events = [_call(1000, 1), _result(1001, 1), _call(1301, 2)]
    alone.process_many(events)
    assert waited(events[2]) >= 300

    asked = Engine(build_config({}))
    events = [_call(1000, 1), _result(1001, 1), _wait(1002), _call(1301, 2)]
    asked.process_many(events)
    assert waited(events[3]) == 0
    assert asked.sessions["s"].view.input_wait is None


def test_a_wait_is_never_a_detection_nor_a_repeat():
    """Fifty idle notifications in a row: no detector sees them, nothing is flagged."""
    engine = Engine(build_config({}))
    found = engine.process_many([_wait(float(i), "idle") for i in range(50)])
    assert found == [] and engine.level("s") == 0
    assert engine.sessions["s"].view.input_wait.since == 0.0  # one wait, since the first


def test_a_question_tool_waits_until_its_answer_and_a_late_copy_does_not_end_a_wait():
    """AskUserQuestion (as a transcript records it) waits for the person until its result;
    an event from before the wait began (a transcript read late) does not end it."""
    engine = Engine(build_config({}))
    ask = Event(
        Kind.TOOL_CALL,
        "s",
        10.0,
        call_id="q1",
        tool="AskUserQuestion",
        args={"questions": [{"question": "Deploy to staging or production?", "options": []}]},
    )
    engine.process(ask)
    wait = engine.sessions["s"].view.input_wait
    assert wait is not None and wait.why == "question" and wait.asks == "Deploy to staging or production?"
    engine.process(Event(Kind.MESSAGE, "s", 5.0, role="assistant", content="earlier text, read late"))
    assert engine.sessions["s"].view.input_wait is not None
    engine.process(Event(Kind.TOOL_RESULT, "s", 90.0, call_id="q1", content="staging"))
    assert engine.sessions["s"].view.input_wait is None


# -- the dashboard ---------------------------------------------------------------------------------


async def test_the_dashboard_shows_waiting_as_its_own_status_counted_and_first_for_w(tmp_path: Path):
    """A waiting session: status "waiting" in its own theme colour, counted in the header,
    and the first session ``w`` visits (before those at warn); its answer clears it all."""
    from monitor.ui.app import LoopwatchApp
    from monitor.ui.widgets.dashboard.counts import CountsBar
    from tests.scripted import T0, frozen_clock, scripted_hub, settle

    config = build_config({})
    app = LoopwatchApp(
        config, clock=frozen_clock(), hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite")
    )
    asking = Event(Kind.WAITING, "claude-asks", T0 + 500, status="permission", content="Bash: rm -rf dist/")
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert any(i.level >= 2 for i in app.feed.sessions.values())  # the script has warnings
        await app.hub.submit([asking])
        await app.hub.join()
        app.hub.publisher.now()
        await settle(pilot)
        table = app.screen.query_one("SessionsTable")
        cell = table.get_cell("claude-asks", "status")
        assert cell.plain == "waiting"
        assert str(cell.style) == str(app.palette.fg("status-waiting"))
        assert "1 waiting for input" in app.screen.query_one(CountsBar)._renderable.plain
        queue = app.screen.attention_order()
        assert queue[0] == "claude-asks" and len(queue) > 1  # then the sessions at warn and above
        table.select_session(queue[-1])
        await pilot.press("w")  # from the last, round to the first: the waiting session
        await settle(pilot)
        assert table.selected_session == "claude-asks"
        answered = Event(Kind.TOOL_CALL, "claude-asks", T0 + 560, call_id="c1", tool="Bash", args={})
        await app.hub.submit([answered])
        await app.hub.join()
        app.hub.publisher.now()
        await settle(pilot)
        assert table.get_cell("claude-asks", "status").plain == "live"
        assert "waiting for input" not in app.screen.query_one(CountsBar)._renderable.plain


async def test_metrics_count_waiting_sessions_by_why(tmp_path: Path):
    """``loopwatch_sessions_waiting{why}``, from the real hub: an ended session waits for nobody."""
    from monitor.metrics import Metrics

    async with running_monitor(tmp_path) as (hub, _server):
        await hub.submit(
            [
                _wait(10.0),
                Event(Kind.WAITING, "t", 11.0, status="permission", content="Edit: a.py"),
                Event(Kind.WAITING, "u", 12.0, status="idle"),
                Event(Kind.SESSION_END, "u", 13.0, status="exit"),
            ]
        )
        await hub.join()
        text = Metrics(hub).render()
    assert 'loopwatch_sessions_waiting{why="permission"} 2' in text
    assert 'loopwatch_sessions_waiting{why="idle"} 0' in text


def test_the_headless_printer_prints_a_notice_literally():
    """``watch --headless``: a line on stderr (agent text shown literally); ``--json``: an object."""
    import io

    from monitor.commands.watch import HeadlessPrinter
    from monitor.events import Level

    notice = WaitingNotice(SESSION, 1000.0, "permission", "Bash: rm -rf build/ \x1b[31m")
    out, err = io.StringIO(), io.StringIO()
    printer = HeadlessPrinter(as_json=False, min_level=Level.NOTICE, out=out, err=err)
    assert WaitingNotice in printer.kinds
    printer(notice)
    assert err.getvalue().startswith(
        f"loopwatch: {SESSION} waits for input (permission): Bash: rm -rf build/"
    )
    assert "\x1b" not in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    HeadlessPrinter(as_json=True, min_level=Level.NOTICE, out=out, err=err)(notice)
    assert json.loads(out.getvalue()) == {
        "type": "waiting",
        "session": SESSION,
        "since": 1000.0,
        "why": "permission",
        "asks": "Bash: rm -rf build/ \x1b[31m",
    }


def test_the_filter_finds_a_waiting_session_by_what_it_asks():
    from monitor.ui.widgets.dashboard.sessions_table import matches, shown_status

    class Info:  # the fields the filter reads, as a SessionInfo has them
        id, agent, source, status, detector, reason = "s1", "claude-code", "/t/s1.jsonl", "idle", None, ""
        level, nudged, waiting_since, waiting_for = Level.NONE, 0.0, 5.0, "Bash: rm -rf build/"

    assert shown_status(Info) == "waiting"
    assert matches(Info, "rm -rf") and matches(Info, "waiting") and not matches(Info, "deploy")


def test_the_native_waiting_record():
    """``{"type": "waiting", …}`` in a log or over the socket: content and status checked."""
    from monitor.formats.base import RecordError
    from monitor.formats.native import NativeDecoder

    decoder = NativeDecoder("log.jsonl", "log")
    record = {"type": "waiting", "session": "s", "ts": 5, "status": "question", "content": "Which branch?"}
    (event,) = decoder.decode(record, 1, 0.0)
    assert (event.kind, event.status, event.content, event.ts) == (
        Kind.WAITING,
        "question",
        "Which branch?",
        5.0,
    )
    assert event.summary() == "waiting for input (question): Which branch?"
    (bare,) = decoder.decode({"type": "waiting", "session": "s"}, 2, 7.0)
    assert bare.content == "" and bare.status is None and bare.ts == 7.0
    with pytest.raises(RecordError, match="waiting.content"):
        decoder.decode({"type": "waiting", "session": "s", "content": ["not", "text"]}, 3, 0.0)
