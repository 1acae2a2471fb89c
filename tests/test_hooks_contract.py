"""The full Claude Code / Codex hook contract: failed calls, session ends,
subagents, one session over two channels, bounded stop holds, the contact
record that ``loopwatch doctor`` reads.

Hooks run as real subprocesses against a real hub and socket server (or the
scripted monitor of ``test_hooks``); the transcript channel is a real
:class:`~monitor.sources.files.FileSource` tailing a Claude Code transcript.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from monitor.events import Level
from monitor.hooks import parse_hook_input, state_dir
from monitor.sources.files import FileSource
from tests.socketkit import running_monitor, short_socket_path
from tests.test_hooks import PRE_TOOL, STOP, ScriptedMonitor, _inject, run_hook, run_hook_async

FAILURE = {
    "session_id": "sess-1",
    "hook_event_name": "PostToolUseFailure",
    "tool_name": "Bash",
    "tool_use_id": "toolu_1",
    "tool_input": {"command": "pytest -q"},
    "error": "Exit code 1\nImportError: no module named 'parser'",
    "is_interrupt": False,
}


def _parse(payload: dict, agent: str = "claude-code"):
    return parse_hook_input(json.dumps(payload).encode(), agent, pid=1, now=100.0)


def test_post_tool_use_failure_is_an_error_result():
    """PostToolUseFailure carries no tool_response, only a top-level error: an error result."""
    call = _parse(FAILURE)
    assert call.answerable
    assert call.events == [
        {
            "type": "tool_result",
            "session": "sess-1",
            "ts": 100.0,
            "id": "toolu_1",
            "content": "Exit code 1\nImportError: no module named 'parser'",
            "is_error": True,
        }
    ]


def test_an_interrupted_call_is_not_the_tools_outcome():
    call = _parse(dict(FAILURE, error="", is_interrupt=True))
    assert call.events[0]["content"] == "Request interrupted by user" and call.events[0]["is_error"]


def test_older_claude_code_can_have_the_stop_block_form(monkeypatch):
    from monitor.hooks import answer

    call = _parse(STOP)
    message = [{"type": "inject", "text": "Check again."}]
    assert answer(call, message) == {
        "hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "Check again."}
    }
    monkeypatch.setenv("LOOPWATCH_STOP_FORM", "block")
    assert answer(call, message) == {"decision": "block", "reason": "Check again."}


def test_session_end_and_api_error_end_the_session():
    end = _parse({"session_id": "s", "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})
    assert end.events == [{"type": "session_end", "session": "s", "ts": 100.0, "status": "prompt_input_exit"}]
    assert not end.answerable
    failed = _parse({"session_id": "s", "hook_event_name": "StopFailure", "error": "rate_limit"})
    assert failed.events == [
        {"type": "session_end", "session": "s", "ts": 100.0, "status": "api error: rate_limit"}
    ]


def test_subagent_events_are_keyed_like_the_transcript_adapter():
    """A subagent's hook events carry the parent's session_id plus agent_id: they go to
    ``<session>:agent-<id>``, the name the transcript adapter gives the subagent's file."""
    start = _parse(
        {
            "session_id": "main",
            "hook_event_name": "SubagentStart",
            "agent_id": "a7f3",
            "agent_type": "Explore",
        }
    )
    assert start.session == "main:agent-a7f3"
    assert start.events[0]["type"] == "session_start" and start.events[0]["parent"] == "main"
    assert start.events[0]["meta"]["agent_type"] == "Explore"
    call = _parse(dict(PRE_TOOL, session_id="main", agent_id="a7f3", agent_type="Explore"))
    assert call.events[0]["session"] == "main:agent-a7f3" and call.events[0]["type"] == "tool_call"
    stop = _parse(
        {
            "session_id": "main",
            "hook_event_name": "SubagentStop",
            "agent_id": "a7f3",
            "stop_hook_active": False,
        }
    )
    assert stop.events[0] == {
        "type": "session_end",
        "session": "main:agent-a7f3",
        "ts": 100.0,
        "status": "subagent stopped",
    }
    assert _parse(PRE_TOOL).session == "sess-1"  # the main agent's own events stay in its session


def test_a_stop_is_held_at_most_the_configured_times_in_a_row(tmp_path: Path):
    """stop_hook_active says the agent already continues because of a stop hook: with the
    default limit (1) such a Stop does not even poll, so the message waits for the next hook
    call; with LOOPWATCH_STOP_BLOCKS=2 one more hold is allowed, then none."""
    sock = short_socket_path(tmp_path)
    active = dict(STOP, stop_hook_active=True)
    with ScriptedMonitor(sock, [_inject("Look again.")]) as monitor:
        result = run_hook("claude", active, sock)
        assert (result.returncode, result.stdout) == (0, b"")
        assert not [m for m in monitor.received if m["type"] == "poll"]
        assert monitor.replies  # not drained: still waiting for the agent
        # --stop-blocks 2 on the command line: one more hold is allowed.
        held = run_hook("claude", active, sock, "--stop-blocks", "2")
        assert json.loads(held.stdout)["hookSpecificOutput"]["additionalContext"] == "Look again."
    (tmp_path / "lw.sock").unlink()
    env = {"LOOPWATCH_STOP_BLOCKS": "2"}
    os.environ.update(env)
    try:
        with ScriptedMonitor(sock, [_inject("one")]) as monitor:
            first = run_hook("claude", STOP, sock)  # a fresh chain: held
            assert json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"] == "one"
            monitor.replies.append(_inject("two"))
            second = run_hook("claude", active, sock)  # held once so far: allowed
            assert json.loads(second.stdout)["hookSpecificOutput"]["additionalContext"] == "two"
            monitor.replies.append(_inject("three"))
            third = run_hook("claude", active, sock)  # held twice in a row: the agent may stop
            assert third.stdout == b"" and monitor.replies
    finally:
        for key in env:
            os.environ.pop(key, None)


def test_each_call_leaves_a_contact_record(tmp_path: Path):
    """The hook notes when it fired and whether it reached a monitor (for `loopwatch doctor`)."""
    sock = short_socket_path(tmp_path)
    record = state_dir() / "hook-codex.json"
    record.unlink(missing_ok=True)
    run_hook("codex", PRE_TOOL, tmp_path / "nobody.sock")
    first = json.loads(record.read_text())
    assert "fired" in first and "reached" not in first and first["event"] == "PreToolUse"
    with ScriptedMonitor(sock):
        run_hook("codex", PRE_TOOL, sock)
    second = json.loads(record.read_text())
    assert second["reached"] == second["fired"] >= first["fired"]


def _transcript_records(session: str, calls: int) -> list[dict]:
    """A Claude Code transcript: the same failing `ls build/` ``calls`` times."""
    records = [
        {
            "type": "user",
            "sessionId": session,
            "uuid": "u0",
            "timestamp": "2026-11-25T01:00:00Z",
            "message": {"role": "user", "content": "list the build output"},
        }
    ]
    for i in range(calls):
        records.append(
            {
                "type": "assistant",
                "sessionId": session,
                "uuid": f"a{i}",
                "timestamp": f"2026-11-25T01:00:{10 + 2 * i:02d}Z",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"toolu_{i}",
                            "name": "Bash",
                            "input": {"command": "ls build/", "description": "list"},
                        }
                    ],
                },
            }
        )
        records.append(
            {
                "type": "user",
                "sessionId": session,
                "uuid": f"r{i}",
                "timestamp": f"2026-11-25T01:00:{11 + 2 * i:02d}Z",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{i}",
                            "content": "ls: build/: No such file",
                            "is_error": True,
                        }
                    ],
                },
            }
        )
    return records


async def test_one_session_over_two_channels_counts_each_call_once(tmp_path: Path):
    """The user tails ~/.claude/projects and installed the hook: every call arrives twice,
    with the same tool_use_id.  Through the real hub, each is counted once: two calls stay
    two calls (no repeat to flag), the session's event count and stored events are not doubled."""
    session = "7f0c2a9e-sess"
    transcript = tmp_path / "projects" / "-w" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    records = _transcript_records(session, 2)
    transcript.write_text(json.dumps(records[0]) + "\n")  # the prompt, written when submitted
    post = {
        "hook_event_name": "PostToolUse",
        "tool_response": {"stdout": "", "stderr": "ls: build/: No such file", "interrupted": False},
    }
    async with running_monitor(tmp_path) as (hub, server):
        async with FileSource([str(transcript.parent)], hub, fmt="claude") as source:
            await source.sync()
            await hub.join()
            for i in range(2):  # the hook's copy of each call first, as it happens live
                call = dict(PRE_TOOL, session_id=session, tool_use_id=f"toolu_{i}")
                await run_hook_async("claude", call, server.unix_path)
                await run_hook_async("claude", {**call, **post}, server.unix_path)
            with transcript.open("a") as out:
                out.writelines(json.dumps(record) + "\n" for record in records[1:])
            await source.sync()
            await hub.join()
            info = hub.session(session)
            assert info is not None and info.channel == "hook"
            assert hub.engine.duplicates == 4  # the transcript's two calls and two results
            # 2 calls + 2 results from the hook; the session start and user prompt from the file.
            assert info.events == 6
            assert info.level < Level.WARN
            # A third call, seen only in the transcript, is the third repeat: flagged.
            with transcript.open("a") as out:
                for record in _transcript_records(session, 3)[-2:]:
                    out.write(json.dumps(record) + "\n")
            await source.sync()
            await hub.join()
            assert hub.session(session).level >= Level.WARN


async def test_a_subagent_over_two_channels_is_one_session_apart_from_its_parent(tmp_path: Path):
    """A subagent's transcript (``<session>/subagents/agent-<id>.jsonl``) and its hook events
    (the parent's session_id plus agent_id) land in the same session, ``<session>:agent-<id>``,
    linked to the parent, each call once; the parent's streaks see none of its calls."""
    parent = "9d1e7c55-parent"
    records = _transcript_records(parent, 2)[1:]  # the subagent's calls, no user prompt
    for record in records:
        record.update(isSidechain=True, agentId="a81f")
    transcript = tmp_path / "projects" / "-w" / parent / "subagents" / "agent-a81f.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("")
    post = {
        "hook_event_name": "PostToolUse",
        "tool_response": {"stdout": "", "stderr": "ls: build/: No such file"},
    }
    async with running_monitor(tmp_path) as (hub, server):
        async with FileSource([str(tmp_path / "projects")], hub, fmt="claude") as source:
            await run_hook_async(
                "claude",
                {
                    "session_id": parent,
                    "hook_event_name": "SubagentStart",
                    "agent_id": "a81f",
                    "agent_type": "Explore",
                },
                server.unix_path,
            )
            for i in range(2):
                call = dict(
                    PRE_TOOL,
                    session_id=parent,
                    agent_id="a81f",
                    agent_type="Explore",
                    tool_use_id=f"toolu_{i}",
                )
                await run_hook_async("claude", call, server.unix_path)
                await run_hook_async("claude", {**call, **post}, server.unix_path)
            transcript.write_text("".join(json.dumps(r) + "\n" for r in records))
            await source.sync()
            await hub.join()
            sub = hub.session(f"{parent}:agent-a81f")
            assert sub is not None and sub.parent == parent and sub.channel == "hook"
            assert hub.engine.duplicates == 4
            assert hub.session(parent) is None  # the parent's own session saw none of it


def test_install_hook_codex_never_rewrites_an_unchanged_entry(tmp_path: Path):
    """Codex keys trust to a hook's exact definition: an entry of ours whose command is
    unchanged stays byte for byte (even a field the user tuned), and the output says the
    trust still holds; a new install says how to trust it in /hooks."""
    from tests.test_hooks import _env, install_hook

    env = dict(_env("/nonexistent.sock"), CODEX_HOME=str(tmp_path / "codex"))
    first = install_hook("codex", "--command", "loopwatch hook codex", env=env)
    assert "open /hooks and trust the loopwatch entries (12 of them)" in first.stdout
    path = tmp_path / "codex" / "hooks.json"
    data = json.loads(path.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 30  # tuned by the user
    path.write_text(json.dumps(data, indent=4))
    before = path.read_bytes()
    again = install_hook("codex", "--command", "loopwatch hook codex", env=env)
    assert again.returncode == 0 and "already installed" in again.stdout
    assert "trust you gave it in Codex's /hooks still holds" in again.stdout
    assert path.read_bytes() == before
    moved = install_hook("codex", "--command", "/new/bin/loopwatch hook codex", env=env)
    assert "installed" in moved.stdout and "/hooks" in moved.stdout  # changed: trust it again


async def test_session_end_closes_the_session_in_the_real_hub(tmp_path: Path):
    """SessionEnd ends the session at once (not after the idle timeout); a StopFailure
    (the turn died on an API error) too, and a later call revives it."""
    async with running_monitor(tmp_path) as (hub, server):
        await run_hook_async("claude", PRE_TOOL, server.unix_path)
        await run_hook_async(
            "claude",
            {"session_id": "sess-1", "hook_event_name": "SessionEnd", "reason": "logout"},
            server.unix_path,
        )
        await hub.join()
        assert hub.session("sess-1").status == "ended"
        await run_hook_async("claude", dict(PRE_TOOL, tool_use_id="toolu_9"), server.unix_path)
        await hub.join()
        assert hub.session("sess-1").status == "live"
        await run_hook_async(
            "claude",
            {"session_id": "sess-1", "hook_event_name": "StopFailure", "error": "rate_limit"},
            server.unix_path,
        )
        await hub.join()
        assert hub.session("sess-1").status == "ended"
