"""Hook limits (issue 32, item 11), with the real hook as a subprocess.

Standard input is read with a size and a time limit; a big PreToolUse is
clipped in total so that it still reaches detection as one line; a listener
of our own uid that floods injects cannot make a hook call big; the state
directory is checked like the socket directory and its temporary files are
never written through a planted link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from monitor.events import Kind
from tests.socketkit import running_monitor, short_socket_path
from tests.test_hooks import PRE_TOOL, PROCESS_DEADLINE, ROOT, ScriptedMonitor, _env, _inject, run_hook


def _spawn_hook(sock: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "monitor", "hook", "claude"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(sock, **env),
        cwd=ROOT,
    )


def test_stdin_left_open_after_the_event_does_not_keep_the_hook_running(tmp_path: Path):
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock) as monitor:
        hook = _spawn_hook(sock)
        hook.stdin.write(json.dumps(PRE_TOOL).encode())
        hook.stdin.flush()  # and never closed, as the agent did
        try:
            assert hook.wait(timeout=PROCESS_DEADLINE) == 0  # a hang guard: old code never returns
        finally:
            hook.kill()
            hook.stdin.close()
            hook.wait()
        assert any(m["type"] == "tool_call" for m in monitor.received)


def test_stdin_that_never_completes_is_given_up(tmp_path: Path):
    sock = short_socket_path(tmp_path)
    hook = _spawn_hook(sock)
    hook.stdin.write(b'{"hook_event_name": "PreToolUse", "session_id": ')  # then silence
    hook.stdin.flush()
    try:
        assert hook.wait(timeout=PROCESS_DEADLINE) == 0
        assert b"ignored" in hook.stderr.read()
    finally:
        hook.kill()
        hook.stdin.close()
        hook.wait()


def test_stdin_over_the_size_limit_is_refused_not_read_whole(tmp_path: Path):
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock) as monitor:
        big = dict(PRE_TOOL, tool_input={"content": "x" * (17 * 1024 * 1024)})
        result = run_hook("claude", big, sock)
        assert result.returncode == 0
        assert b"over 16,777,216 bytes" in result.stderr
        assert not monitor.received  # nothing forwarded


async def test_a_big_pre_tool_use_is_clipped_in_total_and_reaches_detection(tmp_path: Path):
    """Six 100k-character edits (1.2 MB of JSON): the monitor takes the call as one line."""
    from tests.test_hooks import run_hook_async

    edits = [{"old_string": f"{i}" + "a" * 100_000, "new_string": "b" * 100_000} for i in range(6)]
    payload = dict(PRE_TOOL, tool_name="MultiEdit", tool_input={"file_path": "/w/x.py", "edits": edits})
    assert len(json.dumps(payload)) > 1_200_000
    async with running_monitor(tmp_path) as (hub, server):
        code, _reply, err = await run_hook_async("claude", payload, server.unix_path)
        assert code == 0, err
        await hub.join()
        info = hub.session("sess-1")
        assert info is not None and info.events == 1 and hub.problems_total == 0  # the call, no refusal
        (call,) = [e for e in info.window if e.kind is Kind.TOOL_CALL]
        assert call.tool == "MultiEdit" and len(json.dumps(call.args)) < 200_000


def test_a_flooding_listener_cannot_make_the_hook_read_it_all(tmp_path: Path):
    """A listener of our own uid answering with 2,000 injects of 60 KB each: the hook
    reads a bounded amount and answers with a bounded text."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, replies=[_inject("z" * 60_000) for _ in range(2000)]):
        result = run_hook("claude", PRE_TOOL, sock, "--timeout", "10")  # time to send it all
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    context = reply["hookSpecificOutput"]["additionalContext"]
    assert 60_000 <= len(context) <= 100_200


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim, tmp_path / "state"


def test_a_state_dir_others_can_write_to_is_not_used(tmp_path: Path):
    victim, state = _planted(tmp_path)
    state.mkdir(mode=0o777)
    os.chmod(state, 0o1777)  # as a shared directory would be
    sock = short_socket_path(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "hook", "claude"],
        input=json.dumps(PRE_TOOL).encode(),
        capture_output=True,
        env=_env(sock, LOOPWATCH_STATE_DIR=str(state)),
        cwd=ROOT,
        timeout=PROCESS_DEADLINE,
    )
    assert result.returncode == 0
    assert b"writable by others" in result.stderr
    assert not (state / "hook-claude-code.json").exists()
    assert victim.read_text() == "precious\n"


def test_a_state_dir_of_another_user_is_not_used(tmp_path: Path):
    import pytest

    if os.getuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    victim, state = _planted(tmp_path)
    state.mkdir(mode=0o755)
    os.chown(state, 65534, 65534)
    result = run_hook_with_state(tmp_path, state)
    assert b"belongs to uid 65534" in result.stderr
    assert victim.read_text() == "precious\n"


def run_hook_with_state(tmp_path: Path, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "hook", "claude"],
        input=json.dumps(PRE_TOOL).encode(),
        capture_output=True,
        env=_env(short_socket_path(tmp_path), LOOPWATCH_STATE_DIR=str(state)),
        cwd=ROOT,
        timeout=PROCESS_DEADLINE,
    )


def test_a_planted_temporary_link_is_never_written_through(tmp_path: Path, monkeypatch):
    from monitor import hooks

    victim, state = _planted(tmp_path)
    state.mkdir(mode=0o700)
    monkeypatch.setenv("LOOPWATCH_STATE_DIR", str(state))
    target = state / "hook-claude-code.json"
    (state / f".{target.name}.{os.getpid()}.tmp").symlink_to(victim)
    assert hooks.write_state(target, b"{}") is False
    assert victim.read_text() == "precious\n"
    os.unlink(state / f".{target.name}.{os.getpid()}.tmp")
    assert hooks.write_state(target, b"{}") is True and target.read_bytes() == b"{}"
    assert oct(target.stat().st_mode & 0o777) == "0o600"
