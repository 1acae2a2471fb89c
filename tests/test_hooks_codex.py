"""Codex's hook contract, event by event (issue 35 §3): installed with the timeout each
needs, answered the way Codex reads it, through real ``loopwatch hook codex`` processes.

No Codex runs here; the payloads are built from the field names of Codex's source
(github.com/openai/codex, read through the stored index on 2026-12-02):

* ``codex-rs/hooks/src/events/compact.rs`` @ ef80fdfae6c19223826012780c135c2f1d003d00 --
  ``PreCompact`` (``trigger``, ``reason``, ``phase``) and ``PostCompact`` (the same plus
  ``status``, e.g. ``"failed"``, and ``error``); a ``PreCompact`` answer of
  ``continue: false`` is an error there ("unsupported continue:false");
* ``codex-rs/hooks/src/events/subagent_stop.rs`` @ c59b6dcb1a482cec1bb31ba66a6228d550bd8068 --
  ``SubagentStop`` (``agent_id``, ``agent_type``, ``stop_hook_active``,
  ``last_assistant_message``), answered through the ``Stop`` outcome (block / stop);
* ``codex-rs/hooks/schema/generated/stop-failure.command.input.schema.json`` @
  72cdcc98d917b716f5dcb83739e90af8da9363f9 -- ``StopFailure`` (``error`` one of
  ``rate_limit`` … ``unknown``, ``error_details``);
* ``codex-rs/hooks/src/engine/discovery.rs`` @ ac0800ed3657bed5f2b20fa2e1cb732f5f129b6a --
  a command hook without ``timeout`` gets 600 s;
* "Add subagent identity to hook inputs" (openai/codex#22882): a normal hook fired inside
  a subagent carries ``agent_id`` / ``agent_type``;
* ``codex-rs/hooks/schema/generated/post-tool-use.command.output.schema.json`` @
  0ea83813ef8631debc8ad777641fe532f0deffc2 -- PostToolUse takes ``continue`` and
  ``hookSpecificOutput.additionalContext`` (where a kill or a nudge reaches Codex);
* ``SessionEnd`` (openai/codex#33895, Codex 0.146): 1 s by default, capped at 3 s
  (``SESSION_END_MAX_TIMEOUT_SEC`` in ``codex-rs/hooks/src/events/session_end.rs``,
  as quoted in openai/codex-plugin-cc#619; Codex warns at every start when a hook asks for more).
"""

from __future__ import annotations

import json
from pathlib import Path

from monitor.commands.install_hook import AGENT_EVENTS, CLAUDE_TIMEOUT, _handler, install
from tests.socketkit import running_monitor, short_socket_path
from tests.test_hooks import ScriptedMonitor, _inject, run_hook, run_hook_async

THREAD = "019a4b1d-6a52-7c1e-8f7e-2b0c4d1e9f00"
COMMON = {
    "session_id": THREAD,
    "turn_id": "turn-7",
    "transcript_path": None,
    "cwd": "/w",
    "model": "gpt-5.5-codex",
    "permission_mode": "default",
}
PRE_COMPACT = {
    **COMMON,
    "hook_event_name": "PreCompact",
    "trigger": "auto",
    "reason": "context_limit",
    "phase": "auto",
    "implementation": "responses",
}
POST_COMPACT = {**PRE_COMPACT, "hook_event_name": "PostCompact", "status": "completed", "error": None}


def _kill(session: str = THREAD) -> dict:
    return {"type": "kill", "session": session, "ts": 1.0}


def test_codex_installs_every_event_with_the_timeout_it_needs():
    events = AGENT_EVENTS["codex"]
    assert set(events) == {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "SessionEnd",
    }
    timeouts = {event: _handler("codex", "loopwatch hook codex", event)["timeout"] for event in events}
    assert timeouts["SessionEnd"] == 1  # Codex's default; its cap is 3
    # Answered events: the Claude budget; reported ones: short (not Codex's 600 s default).
    assert {timeouts[e] for e in ("PreToolUse", "PostToolUse", "Stop", "SubagentStop")} == {CLAUDE_TIMEOUT}
    assert {timeouts[e] for e in ("PreCompact", "PostCompact", "StopFailure", "PermissionRequest")} == {5}
    assert max(timeouts.values()) <= CLAUDE_TIMEOUT


def test_an_older_codex_entry_keeps_its_exact_definition_and_gains_the_new_events():
    """Codex keys its trust to a hook's exact definition: an entry of ours already there is
    not rewritten (not even to add a timeout); the events it lacked are added."""
    command = "/usr/bin/loopwatch hook codex"
    old = {"type": "command", "command": command}
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [dict(old)]}]}}
    assert install(settings, "codex", command)
    assert settings["hooks"]["PreToolUse"] == [{"matcher": "*", "hooks": [old]}]
    assert settings["hooks"]["PreCompact"] == [{"hooks": [{**old, "timeout": 5}]}]
    assert not install(settings, "codex", command)  # again: nothing changes


def test_pre_compact_is_taken_and_answered_with_nothing_even_with_a_kill_queued(tmp_path: Path):
    """Codex rejects continue:false on PreCompact, and a compaction is counted once, at
    PostCompact: the hook forwards no event, does not poll (a queued kill stays queued for
    the next hook that can carry it) and prints nothing."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, [_kill()]) as monitor:
        result = run_hook("codex", PRE_COMPACT, sock)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b"", result.stderr
    assert [m["type"] for m in monitor.received] == ["hello"]
    assert monitor.replies == [_kill()]


def test_post_compact_is_a_compaction_a_failed_one_keeps_its_outcome(tmp_path: Path):
    sock = short_socket_path(tmp_path)
    failed = {**POST_COMPACT, "status": "failed", "error": "summary request failed"}
    with ScriptedMonitor(sock) as monitor:
        for payload in (POST_COMPACT, failed):
            result = run_hook("codex", payload, sock)
            assert result.returncode == 0 and result.stdout == b"", result.stderr
    compactions = [m for m in monitor.received if m["type"] == "compaction"]
    assert [(c["status"], c.get("error"), c["trigger"], c["via"]) for c in compactions] == [
        ("completed", None, "auto", "hook"),
        ("failed", "summary request failed", "auto", "hook"),
    ]
    assert "poll" not in [m["type"] for m in monitor.received]


def test_stop_failure_ends_the_session_with_the_error_kind(tmp_path: Path):
    sock = short_socket_path(tmp_path)
    payload = {
        **COMMON,
        "hook_event_name": "StopFailure",
        "error": "rate_limit",
        "error_details": "429 Too Many Requests",
        "last_assistant_message": None,
    }
    with ScriptedMonitor(sock, [_kill()]) as monitor:
        result = run_hook("codex", payload, sock)
    assert result.returncode == 0 and result.stdout == b""
    assert [m["type"] for m in monitor.received] == ["hello", "session_end"]
    assert monitor.received[1]["status"] == "api error: rate_limit"


def test_session_end_reports_its_reason(tmp_path: Path):
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock) as monitor:
        result = run_hook("codex", {**COMMON, "hook_event_name": "SessionEnd", "reason": "slash_exit"}, sock)
    assert result.returncode == 0 and result.stdout == b""
    assert [(m["type"], m.get("status")) for m in monitor.received] == [
        ("hello", None),
        ("session_end", "slash_exit"),
    ]


def test_a_codex_subagents_own_tool_call_is_its_sessions_and_a_kill_there_only_denies(tmp_path: Path):
    """openai/codex#22882: a subagent's PreToolUse carries agent_id; it belongs to the
    subagent's session, and a kill answers it as Codex accepts on PreToolUse (a denial,
    without continue:false)."""
    sock = short_socket_path(tmp_path)
    sub = f"{THREAD}:agent-thr-2"
    call = {
        **COMMON,
        "hook_event_name": "PreToolUse",
        "agent_id": "thr-2",
        "agent_type": "explorer",
        "tool_name": "Bash",
        "tool_use_id": "call_9",
        "tool_input": {"command": "ls build"},
    }
    with ScriptedMonitor(sock, [_kill(sub)]) as monitor:
        result = run_hook("codex", call, sock)
    answer = json.loads(result.stdout)
    assert "continue" not in answer and answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert [m.get("session") for m in monitor.received] == [sub, sub, sub]


def test_a_codex_subagent_stop_is_nudged_then_let_go(tmp_path: Path):
    """SubagentStop is where a Codex subagent is nudged; once it continues because of a
    stop hook (stop_hook_active), it is let go (one hold by default) without a poll."""
    sock = short_socket_path(tmp_path)
    sub = f"{THREAD}:agent-thr-2"
    stop = {
        **COMMON,
        "hook_event_name": "SubagentStop",
        "agent_id": "thr-2",
        "agent_type": "explorer",
        "agent_transcript_path": None,
        "stop_hook_active": False,
        "last_assistant_message": "build/ does not exist.",
    }
    with ScriptedMonitor(sock, [_inject("Stop listing build/.", session=sub)]) as monitor:
        held = run_hook("codex", stop, sock)
    assert json.loads(held.stdout) == {"decision": "block", "reason": "Stop listing build/."}
    assert [m["type"] for m in monitor.received] == ["hello", "message", "session_end", "poll"]
    sock.unlink()
    with ScriptedMonitor(sock, [_inject("again", session=sub)]) as monitor:
        let_go = run_hook("codex", {**stop, "stop_hook_active": True}, sock)
    assert let_go.stdout == b"" and "poll" not in [m["type"] for m in monitor.received]


async def test_codex_compactions_reach_the_engine_once_each(tmp_path: Path):
    """Through the real monitor: PreCompact adds nothing, each PostCompact is one
    event of the session: three in all with the SessionStart."""
    failed = {**POST_COMPACT, "status": "failed", "error": "summary request failed"}
    async with running_monitor(tmp_path) as (hub, server):
        start = {**COMMON, "hook_event_name": "SessionStart", "source": "startup"}
        for payload in (start, PRE_COMPACT, POST_COMPACT, PRE_COMPACT, failed):
            code, reply, err = await run_hook_async("codex", payload, server.unix_path)
            assert code == 0 and reply is None and "ignored" not in err, err
        await hub.join()
        info = hub.session(THREAD)
    assert info is not None and info.agent == "codex" and info.events == 3


def test_a_codex_permission_request_waits_for_the_person_and_is_not_answered(tmp_path: Path):
    """PermissionRequest: the session waits for input; the hook answers nothing (no decision:
    Codex shows its own prompt), even with a message queued."""
    sock = short_socket_path(tmp_path)
    ask = {
        **COMMON,
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": "cargo publish"},
    }
    with ScriptedMonitor(sock, [_inject("not now")]) as monitor:
        result = run_hook("codex", ask, sock)
    assert result.returncode == 0 and result.stdout == b""
    assert [(m["type"], m.get("status"), m.get("content")) for m in monitor.received] == [
        ("hello", None, None),
        ("waiting", "permission", "Bash: cargo publish"),
    ]


def test_a_codex_subagent_start_opens_its_session_and_takes_a_pending_nudge(tmp_path: Path):
    """SubagentStart (agent_id, agent_type; its output's hookSpecificOutput.additionalContext,
    codex-rs/hooks/schema/generated/subagent-start.command.output.schema.json @ 6fff509b)."""
    sock = short_socket_path(tmp_path)
    sub = f"{THREAD}:agent-thr-3"
    start = {**COMMON, "hook_event_name": "SubagentStart", "agent_id": "thr-3", "agent_type": "worker"}
    with ScriptedMonitor(sock, [_inject("You listed build/ 5 times.", session=sub)]) as monitor:
        result = run_hook("codex", start, sock)
    assert json.loads(result.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "SubagentStart",
            "additionalContext": "You listed build/ 5 times.",
        }
    }
    opened = monitor.received[1]
    assert (opened["type"], opened["session"], opened["parent"], opened["meta"]["agent_type"]) == (
        "session_start",
        sub,
        THREAD,
        "worker",
    )


def test_a_prompt_from_the_ide_extension_is_what_the_person_typed():
    """The IDE extension puts the editor's state before each request: the hook's user
    message is the request alone, as the rollout reader makes it."""
    from monitor.hooks import parse_hook_input

    prompt = (
        "# Context from my IDE setup:\n\n## Active file: a.py\n\n## My request for Codex:\nfix the test\n"
    )
    payload = {**COMMON, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    call = parse_hook_input(json.dumps(payload).encode(), "codex", pid=1234, now=5.0)
    messages = [e for e in call.events if e["type"] == "message"]
    assert [m["content"] for m in messages] == ["fix the test"]
