"""The hook contract as documented today (issue 35 §3): the events added since the first hook.

Payloads are built from the field names of the references (no agent runs here):

* Claude Code, https://code.claude.com/docs/en/hooks -- ``Stop`` /
  ``SubagentStop`` (``last_assistant_message``, ``stop_hook_active``,
  ``background_tasks``; SubagentStop's ``agent_id``, ``agent_type``,
  ``agent_transcript_path``), ``PostToolUse`` (``duration_ms``),
  ``PostCompact`` (``trigger``, ``compact_summary``), ``SubagentStart``
  (``agent_id``, ``agent_type``; answered with ``hookSpecificOutput.additionalContext``);
* Codex, https://developers.openai.com/codex/hooks -- ``SubagentStop`` (a
  subagent fires it instead of ``Stop``), ``StopFailure``, ``SessionEnd`` (1 s
  by default, 3 s at most);
* Cursor, https://cursor.com/docs/agent/hooks -- its payloads carry
  ``conversation_id``, ``generation_id`` and ``cursor_version``; with
  third-party hooks on it runs the hooks of ``~/.claude/settings.json``.

Hooks run as real ``loopwatch hook`` subprocesses; the transcript is a real
:class:`~monitor.sources.files.FileSource` tailing a Claude Code transcript.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from monitor.config import build_config
from monitor.detect.engine import Engine
from monitor.events import Event, Kind
from monitor.hooks import parse_hook_input
from monitor.sources.files import FileSource
from tests.socketkit import running_monitor, short_socket_path
from tests.test_hooks import ScriptedMonitor, _inject, run_hook, run_hook_async

SESSION = "4b1d6a52-0c1e-4f7e-9a57-2b0c4d1e9f00"
FINAL = "I could not find the build directory.\n\nRun `make` first, then ask me again."
STOP = {
    "session_id": SESSION,
    "transcript_path": f"/t/{SESSION}.jsonl",
    "cwd": "/w",
    "hook_event_name": "Stop",
    "stop_hook_active": False,
    "last_assistant_message": FINAL,
}


def _parse(payload: dict, agent: str = "claude-code") -> tuple[str, list[dict]]:
    call = parse_hook_input(json.dumps(payload).encode(), agent, pid=1, now=100.0)
    return call.agent, call.events


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _transcript(session: str, now: float, text: str) -> list[dict]:
    """A prompt and the assistant's answer, stamped a moment before ``now``."""
    return [
        {
            "type": "user",
            "sessionId": session,
            "uuid": "u0",
            "timestamp": _iso(now - 5),
            "message": {"role": "user", "content": "build it"},
        },
        {
            "type": "assistant",
            "sessionId": session,
            "uuid": "a0",
            "timestamp": _iso(now - 1),
            "message": {"id": "msg_01", "role": "assistant", "content": [{"type": "text", "text": text}]},
        },
    ]


def test_stop_carries_the_last_assistant_message():
    agent, events = _parse({**STOP, "background_tasks": [{"id": "bash_1", "command": "npm run dev"}]})
    assert agent == "claude-code"
    (message,) = events
    assert message["type"] == "message" and message["role"] == "assistant" and message["content"] == FINAL
    assert message["via"] == "hook" and message["background_tasks"] == 1
    # A subagent's last message goes to the subagent's session, before its end.
    sub = {**STOP, "hook_event_name": "SubagentStop", "agent_id": "a1", "agent_type": "Explore"}
    _, events = _parse(sub)
    assert [e["type"] for e in events] == ["message", "session_end"]
    assert {e["session"] for e in events} == {f"{SESSION}:agent-a1"}
    assert _parse({**STOP, "last_assistant_message": "  "})[1] == []


async def test_the_last_message_over_hook_and_transcript_is_one_message(tmp_path: Path):
    """The user tails ~/.claude/projects and installed the hook: the turn's last text arrives
    from the transcript and from Stop.  Through the real hub it is one message, whichever
    comes first; a hook-only session still sees it."""
    now = time.time()
    transcript = tmp_path / "projects" / "-w" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    records = _transcript(SESSION, now, FINAL)
    other = "5c2e7b63-1d2f-4a8b-8b68-3c1d5e2fa011"
    later = tmp_path / "projects" / "-w" / f"{other}.jsonl"
    async with running_monitor(tmp_path) as (hub, server):
        async with FileSource([str(transcript.parent)], hub, fmt="claude") as source:
            # 1. The transcript first, then the hook's copy.
            transcript.write_text("".join(json.dumps(r) + "\n" for r in records))
            await source.sync()
            await hub.join()
            assert hub.engine.duplicates == 0
            await run_hook_async("claude", STOP, server.unix_path)
            await hub.join()
            assert hub.engine.duplicates == 1
            assert hub.session(SESSION).events == 3  # start, prompt, one assistant message
            # 2. The hook first, then the transcript (read late).
            await run_hook_async("claude", {**STOP, "session_id": other}, server.unix_path)
            await hub.join()
            later.write_text("".join(json.dumps(r) + "\n" for r in _transcript(other, now, FINAL)))
            await source.sync()
            await hub.join()
            assert hub.engine.duplicates == 2
            assert hub.session(other).events == 3  # the hook's message, the file's start and prompt
        # 3. Hook only: the message is there.
        await run_hook_async("claude", {**STOP, "session_id": "hook-only"}, server.unix_path)
        await hub.join()
        assert hub.session("hook-only").events == 1
        assert hub.engine.duplicates == 2


def test_the_same_words_twice_from_one_path_are_two_messages():
    """Only a copy from the other path is dropped: an agent saying the same thing twice
    (what chanting looks for) keeps both, and a third copy after a matched pair is new."""
    engine = Engine(build_config({}))

    def said(ts: float, via_hook: bool) -> Event:
        meta = {"via": "hook"} if via_hook else {}
        return Event(Kind.MESSAGE, "s", ts, role="assistant", content="Let me try that again.", meta=meta)

    for event in (said(1, False), said(2, False), said(3, True), said(4, True), said(5, True)):
        engine.process(event)
    assert engine.duplicates == 2  # the hook's first two matched the transcript's two
    assert engine.sessions["s"].events == 3
    far = said(5000, False)  # the same words much later: not a copy
    assert not engine.process(far).dropped


def test_post_compact_is_a_compaction_counted_once_with_the_transcript():
    agent, events = _parse(
        {**STOP, "hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": "…"}
    )
    assert events == [
        {"type": "compaction", "session": SESSION, "ts": 100.0, "via": "hook", "trigger": "auto"}
    ]
    engine = Engine(build_config({}))
    engine.process(Event(Kind.COMPACTION, "s", 100.0, meta={"via": "hook"}))
    assert engine.process(Event(Kind.COMPACTION, "s", 98.0)).dropped  # the transcript's compact_boundary
    assert not engine.process(Event(Kind.COMPACTION, "s", 900.0)).dropped  # a later one


def test_post_tool_use_keeps_duration_ms():
    post = {
        "session_id": SESSION,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": "toolu_9",
        "tool_input": {"command": "pytest -q"},
        "tool_response": {"stdout": "1 passed", "stderr": ""},
        "duration_ms": 1834,
    }
    (result,) = _parse(post)[1]
    assert result["type"] == "tool_result" and result["duration_ms"] == 1834
    assert "duration_ms" not in _parse({**post, "duration_ms": True})[1][0]


def test_cursor_payloads_are_labelled_cursor():
    """Cursor runs the Claude Code hooks with its own fields: the session is Cursor's."""
    cursor = {
        "conversation_id": "c0ffee-1",
        "generation_id": "gen-7",
        "cursor_version": "1.7.2",
        "hook_event_name": "PreToolUse",
        "tool_name": "Shell",
        "tool_input": {"command": "ls"},
        "workspace_roots": ["/w"],
    }
    call = parse_hook_input(json.dumps(cursor).encode(), "claude-code", pid=1, now=1.0)
    assert call.agent == "cursor" and call.session == "c0ffee-1"
    start = {**cursor, "hook_event_name": "SessionStart", "session_id": "c0ffee-1"}
    _, events = _parse(start)
    assert events[0]["agent"] == "cursor"
    assert _parse(STOP)[0] == "claude-code"


def test_subagent_start_gets_the_pending_nudge_as_context(tmp_path: Path):
    """A subagent resumed under its agent id gets the nudge queued for it while it was stopped."""
    sock = short_socket_path(tmp_path)
    start = {
        "session_id": SESSION,
        "hook_event_name": "SubagentStart",
        "agent_id": "a1",
        "agent_type": "Explore",
    }
    sub = f"{SESSION}:agent-a1"
    with ScriptedMonitor(sock, [_inject("You listed build/ 5 times.", session=sub)]) as monitor:
        result = run_hook("claude", start, sock)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "SubagentStart",
            "additionalContext": "You listed build/ 5 times.",
        }
    }
    assert [m["type"] for m in monitor.received] == ["hello", "session_start", "poll"]
    assert monitor.received[-1] == {"type": "poll", "session": sub}


def test_a_codex_subagent_is_nudged_and_stopped_at_its_subagent_stop(tmp_path: Path):
    """A Codex subagent fires SubagentStop, not Stop: that is where it is nudged (decision
    block) or stopped (continue false), and where its session ends."""
    sock = short_socket_path(tmp_path)
    stop = {
        "session_id": "thr-1",
        "hook_event_name": "SubagentStop",
        "agent_id": "thr-2",
        "stop_hook_active": False,
    }
    sub = "thr-1:agent-thr-2"
    with ScriptedMonitor(sock, [_inject("Stop re-reading the same file.", session=sub)]) as monitor:
        result = run_hook("codex", stop, sock)
    assert json.loads(result.stdout) == {"decision": "block", "reason": "Stop re-reading the same file."}
    assert [m["type"] for m in monitor.received] == ["hello", "session_end", "poll"]
    sock.unlink()
    with ScriptedMonitor(sock, [{"type": "kill", "session": sub, "ts": 1.0}]):
        result = run_hook("codex", stop, sock)
    assert json.loads(result.stdout)["continue"] is False


def test_codex_install_covers_subagents_failures_compaction_and_a_short_session_end(tmp_path: Path):
    from monitor.commands.install_hook import AGENT_EVENTS, _handler

    assert {"SubagentStart", "SubagentStop", "StopFailure", "PostCompact", "SessionEnd"} <= set(
        AGENT_EVENTS["codex"]
    )
    assert _handler("codex", "loopwatch hook codex", "SessionEnd")["timeout"] == 1  # 1 s default, 3 s cap
    assert _handler("codex", "loopwatch hook codex", "PreToolUse")["timeout"] == 10  # not Codex's 600 s
    claude = {e: _handler("claude", "x", e)["timeout"] for e in AGENT_EVENTS["claude"]}
    assert claude["SessionEnd"] == 2 and claude["PreToolUse"] == 10 and claude["Notification"] == 5


async def test_a_cursor_session_through_the_real_hook_is_labelled_cursor(tmp_path: Path):
    cursor = {
        "conversation_id": "c0ffee-2",
        "generation_id": "gen-1",
        "cursor_version": "1.7.2",
        "hook_event_name": "PreToolUse",
        "tool_name": "Shell",
        "tool_use_id": "t1",
        "tool_input": {"command": "ls"},
    }
    async with running_monitor(tmp_path) as (hub, server):
        for payload in ({**cursor, "hook_event_name": "SessionStart", "source": "startup"}, cursor):
            code, reply, err = await run_hook_async("claude", payload, server.unix_path)
            assert code == 0 and reply is None and "ignored" not in err
        await hub.join()
        info = hub.session("c0ffee-2")
        assert info is not None and info.agent == "cursor" and info.events == 2


def test_claude_installs_each_event_the_issue_names_with_its_timeout():
    """Issue 35 §3: Notification, PermissionRequest/PermissionDenied, PostCompact, Elicitation
    installed; SessionEnd's timeout short (Claude Code waits for the longest one at exit)."""
    from monitor.commands.install_hook import AGENT_EVENTS, _handler

    named = {"Notification", "PermissionRequest", "PermissionDenied", "PostCompact", "Elicitation"}
    assert named | {"Stop", "SubagentStart", "SubagentStop", "SessionEnd"} <= set(AGENT_EVENTS["claude"])
    timeouts = {e: _handler("claude", "x", e)["timeout"] for e in AGENT_EVENTS["claude"]}
    assert timeouts["SessionEnd"] == 2 and all(timeouts[e] == 5 for e in named)
