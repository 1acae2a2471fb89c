"""The guard: a call that continues a loop at ``critical`` is denied before it runs.

Real parts only: the hub with a real store, the real socket server, and
``python -m monitor hook claude|codex`` as a subprocess per hook call (the
payloads use the field names of the Claude Code hooks reference: PreToolUse's
``tool_name``, ``tool_input``, ``tool_use_id``; the answer
``hookSpecificOutput.permissionDecision: "deny"`` with
``permissionDecisionReason``, which Codex's PreToolUse reads too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.config import ConfigError, build_config
from monitor.events import Level
from monitor.hub import Hub
from monitor.sources.sockets import SocketServer
from monitor.store import Store
from tests.socketkit import short_socket_path
from tests.test_hooks import POST_TOOL, PRE_TOOL, run_hook_async

#: Hook calls tried before giving up (a bound, not a timing).
MAX_ROUNDS = 12
OTHER = dict(PRE_TOOL, tool_input={"command": "make -C src", "description": "build"})


def _denied(reply: dict | None) -> str | None:
    if not reply:
        return None
    out = reply.get("hookSpecificOutput") or {}
    if out.get("permissionDecision") == "deny":
        return out.get("permissionDecisionReason")
    return None


class Monitor:
    """A hub with a store and the socket server, as ``watch`` assembles them."""

    def __init__(self, tmp_path: Path, control: dict):
        self.config = build_config({"preset": "aggressive", "control": control})
        self.store = Store(tmp_path / "lw.db", flush_ms=20)
        self.path = short_socket_path(tmp_path)

    async def __aenter__(self) -> Monitor:
        self.store.start()
        self.hub = Hub(self.config, self.store)
        await self.hub.start()
        self.server = SocketServer(self.hub, self.config, unix_path=self.path)
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()
        await self.hub.stop()
        self.store.close()


async def _loop_until_denied(
    sock: Path, agent: str = "claude", name: str = "toolu"
) -> tuple[int, str | None]:
    """The same failing call again and again, as a looping agent makes it; the round denied."""
    for i in range(MAX_ROUNDS):
        code, reply, err = await run_hook_async(agent, dict(PRE_TOOL, tool_use_id=f"{name}_{i}"), sock)
        assert code == 0, err
        reason = _denied(reply)
        if reason is not None:
            return i, reason
        await run_hook_async(agent, dict(POST_TOOL, tool_use_id=f"{name}_{i}"), sock)
    return MAX_ROUNDS, None


async def test_the_call_that_continues_a_critical_loop_is_denied_and_recorded(tmp_path: Path):
    async with Monitor(tmp_path, {"guard": True}) as monitor:
        hub, sock = monitor.hub, monitor.path
        rounds, reason = await _loop_until_denied(sock)
        assert reason is not None, "the guard never denied the looping call"
        assert rounds >= 2  # the loop had to be flagged first: the first calls ran
        assert reason.startswith("loopwatch denied this call")
        assert "[loopwatch]" in reason  # the loop's nudge is what the agent reads
        await hub.join()
        assert hub.session("sess-1").level >= Level.CRITICAL
        assert hub.session("sess-1").guard is True
        # Another call runs: only the flagged loop is denied.
        code, reply, err = await run_hook_async("claude", dict(OTHER, tool_use_id="toolu_other"), sock)
        assert (code, _denied(reply)) == (0, None), (reply, err)
        # The loop's call again: denied again.
        code, reply, err = await run_hook_async("claude", dict(PRE_TOOL, tool_use_id="toolu_again"), sock)
        assert _denied(reply) is not None
        await hub.join()
        actions = [a for a in monitor.store.actions("sess-1") if a["kind"] == "deny"]
        assert len(actions) == 2
        assert {a["outcome"] for a in actions} == {"delivered"}
        assert all(a["who"] == "loopwatch (guard)" for a in actions)
        assert "toolu_again" in actions[-1]["detail"]


async def test_without_the_guard_the_loop_runs_and_the_operator_turns_it_on(tmp_path: Path):
    async with Monitor(tmp_path, {}) as monitor:
        hub, sock = monitor.hub, monitor.path
        for i in range(4):
            code, reply, err = await run_hook_async("claude", dict(PRE_TOOL, tool_use_id=f"toolu_{i}"), sock)
            assert _denied(reply) is None, reply
            await run_hook_async("claude", dict(POST_TOOL, tool_use_id=f"toolu_{i}"), sock)
        await hub.join()
        assert hub.session("sess-1").level >= Level.CRITICAL and hub.session("sess-1").guard is False
        record = await hub.act("guard", "sess-1", text="on")
        assert record.outcome == "delivered" and "guard on" in record.detail, record.detail
        # Armed by the loop it is in: the next call that continues it is denied.
        rounds, reason = await _loop_until_denied(sock, name="later")
        assert reason is not None and rounds == 0
        off = await hub.act("guard", "sess-1", text="off")
        assert off.outcome == "delivered"
        code, reply, err = await run_hook_async("claude", dict(PRE_TOOL, tool_use_id="toolu_off"), sock)
        assert _denied(reply) is None
        kinds = [a["kind"] for a in monitor.store.actions("sess-1")]
        assert kinds.count("guard") == 2 and "deny" in kinds


async def test_codex_reads_the_same_denial(tmp_path: Path):
    async with Monitor(tmp_path, {"guard": True}) as monitor:
        rounds, reason = await _loop_until_denied(monitor.path, agent="codex")
        assert reason is not None and rounds >= 2


async def test_an_acknowledgement_disarms_the_guard(tmp_path: Path):
    async with Monitor(tmp_path, {"guard": True}) as monitor:
        hub, sock = monitor.hub, monitor.path
        rounds, reason = await _loop_until_denied(sock)
        assert reason is not None
        ack = await hub.act("ack", "sess-1")
        assert ack.outcome == "delivered"
        code, reply, err = await run_hook_async("claude", dict(PRE_TOOL, tool_use_id="toolu_acked"), sock)
        assert _denied(reply) is None


def test_guard_settings_are_validated():
    assert build_config({"control": {"guard": True, "guard_level": "terminate"}}).control.guard_level == (
        Level.TERMINATE
    )
    with pytest.raises(ConfigError, match="control.guard_level"):
        build_config({"control": {"guard_level": "notice"}})
    with pytest.raises(ConfigError, match="control.guard: expected true or false"):
        build_config({"control": {"guard": "yes"}})


async def test_a_denial_goes_only_to_the_poll_of_the_call_it_names():
    import time as _time

    from monitor.control import DENY_SECONDS, HookMailbox, control_message

    mailbox = HookMailbox("sess-1")
    await mailbox.send(control_message("deny", "sess-1", call_id="toolu_A", reason="loop"))
    await mailbox.send(control_message("inject", "sess-1", text="hello"))
    assert [m["type"] for m in mailbox.pending("toolu_B")] == ["inject"]  # another call: runs
    assert [m["type"] for m in mailbox.pending(None)] == ["inject"]  # a Stop or PostToolUse poll
    assert [m["type"] for m in mailbox.pending("toolu_A")] == ["deny", "inject"]
    stale = control_message("deny", "sess-1", call_id="toolu_C", reason="old")
    stale["ts"] = _time.time() - DENY_SECONDS - 1
    await mailbox.send(stale)
    assert [m.get("call_id") for m in mailbox.pending("toolu_C")] == [None]  # dropped, not delivered
    assert len(mailbox) == 2


def test_the_hook_answers_only_the_denied_call():
    from monitor.hooks import answer, parse_hook_input

    deny = {"type": "deny", "session": "sess-1", "call_id": "toolu_1", "reason": "loopwatch denied this call"}
    for agent in ("claude-code", "codex"):
        call = parse_hook_input(json.dumps(PRE_TOOL).encode(), agent, pid=1)
        assert answer(call, [deny]) == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "loopwatch denied this call",
            }
        }
        other = parse_hook_input(json.dumps(dict(PRE_TOOL, tool_use_id="toolu_9")).encode(), agent, pid=1)
        assert answer(other, [deny]) is None
        post = parse_hook_input(json.dumps(POST_TOOL).encode(), agent, pid=1)
        assert answer(post, [deny]) is None  # only a PreToolUse can refuse its call


def test_the_guard_and_pause_keys_can_be_rebound():
    from monitor.ui.app import check_keymap

    check_keymap({"pause": "P", "guard": "ctrl+g"})
    with pytest.raises(ConfigError, match="ui.keymap.guard"):
        check_keymap({"guard": "a"})  # ack's key on the same screen


async def test_a_call_the_transcript_reported_first_is_still_denied_to_its_hook(tmp_path: Path):
    """Tailing ~/.claude/projects and the hook: when the transcript's copy of the looping call
    is read before its PreToolUse fires, the denial queued for that call id waits for its hook."""
    from monitor.sources.files import FileSource
    from tests.test_hooks import SESSION_START
    from tests.test_hooks_contract import _transcript_records

    session = "7f0c2a9e-guard"
    transcript = tmp_path / "projects" / "-w" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    records = _transcript_records(session, 6)[:-1]  # the last call has not run: no result yet
    async with Monitor(tmp_path, {"guard": True}) as monitor:
        hub, sock = monitor.hub, monitor.path
        code, reply, err = await run_hook_async("claude", dict(SESSION_START, session_id=session), sock)
        assert code == 0, err
        transcript.write_text("".join(json.dumps(record) + "\n" for record in records))
        async with FileSource([str(transcript.parent)], hub, fmt="claude") as source:
            await source.sync()
            await hub.join()
            assert hub.session(session).level >= Level.CRITICAL
            last = dict(PRE_TOOL, session_id=session, tool_use_id="toolu_5")
            code, reply, err = await run_hook_async("claude", last, sock)
        assert _denied(reply) is not None, (reply, err)
        assert hub.engine.duplicates >= 1  # the hook's copy was the transcript's call
