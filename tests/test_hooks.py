"""``loopwatch hook`` and ``loopwatch install-hook``, end to end with real processes and sockets.

The hook runs as ``python -m monitor hook claude|codex`` in a subprocess, fed
the JSON an agent would send.  The monitor is either the real hub + socket
server (tests/socketkit.py) or, for protocol corner cases, a small scripted
Unix socket server in a thread that speaks the poll protocol.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from monitor.commands.install_hook import AGENT_EVENTS, EVENTS, install, is_ours, uninstall
from monitor.hooks import answer, parse_hook_input, response_text, socket_path
from tests.socketkit import running_monitor, short_socket_path

ROOT = Path(__file__).resolve().parent.parent
#: Hang guard for subprocesses, not a performance assertion.
PROCESS_DEADLINE = 20.0

PRE_TOOL = {
    "session_id": "sess-1",
    "transcript_path": "/t/sess-1.jsonl",
    "cwd": "/w",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_use_id": "toolu_1",
    "tool_input": {"command": "ls build/", "description": "list"},
}
POST_TOOL = dict(
    PRE_TOOL,
    hook_event_name="PostToolUse",
    tool_response={"stdout": "", "stderr": "ls: build/: No such file", "interrupted": False},
)
STOP = {"session_id": "sess-1", "hook_event_name": "Stop", "stop_hook_active": False}
SESSION_START = {
    "session_id": "sess-1",
    "hook_event_name": "SessionStart",
    "source": "startup",
    "cwd": "/w",
    "transcript_path": "/t/sess-1.jsonl",
}


def _env(sock: Path | str, **extra: str) -> dict[str, str]:
    env = dict(os.environ, LOOPWATCH_SOCKET=str(sock), PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def run_hook(agent: str, payload: Any, sock: Path | str, *args: str) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    if isinstance(data, str):
        data = data.encode()
    return subprocess.run(
        [sys.executable, "-m", "monitor", "hook", agent, *args],
        input=data,
        capture_output=True,
        env=_env(sock),
        cwd=ROOT,
        timeout=PROCESS_DEADLINE,
    )


async def run_hook_async(agent: str, payload: Any, sock: Path) -> tuple[int, dict | None, str]:
    """The hook as a subprocess while this event loop keeps serving the real monitor."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "monitor",
        "hook",
        agent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(sock, LOOPWATCH_HOOK_TIMEOUT="5"),
        cwd=ROOT,
    )
    async with asyncio.timeout(PROCESS_DEADLINE):
        out, err = await process.communicate(json.dumps(payload).encode())
    text = out.decode().strip()
    return process.returncode, (json.loads(text) if text else None), err.decode()


class ScriptedMonitor:
    """A Unix socket server speaking the hook protocol: records what each hook
    sent and answers each poll with the messages queued in ``replies``
    (``stall=True``: accept, read, never answer)."""

    def __init__(self, path: Path, replies: list[dict] | None = None, stall: bool = False):
        self.path = path
        self.replies = list(replies or [])
        self.stall = stall
        self.received: list[dict] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.closing = threading.Event()

    def __enter__(self) -> ScriptedMonitor:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self.server.close()
        self.thread.join(timeout=PROCESS_DEADLINE)

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection:
                self._converse(connection)

    def _converse(self, connection: socket.socket) -> None:
        buffer = b""
        connection.settimeout(PROCESS_DEADLINE)
        gone = False
        while True:
            try:
                chunk = connection.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                message = json.loads(raw)
                self.received.append(message)
                if gone:
                    continue  # what the hook sent before it went is still recorded
                try:
                    self._reply(connection, message)
                except OSError:  # the hook has gone (it does not wait when there is no poll)
                    gone = True

    def _reply(self, connection: socket.socket, message: dict) -> None:
        if message["type"] == "hello":
            connection.sendall(b'{"type":"welcome","server":"loopwatch"}\n')
        if message["type"] == "poll" and not self.stall:  # stalled: the hook must give up alone
            out = [json.dumps(m).encode() + b"\n" for m in self.replies]
            out.append(json.dumps({"type": "poll_done", "session": message["session"]}).encode() + b"\n")
            connection.sendall(b"".join(out))
            self.replies.clear()


def _inject(text: str, session: str = "sess-1") -> dict:
    return {"type": "inject", "session": session, "text": text, "ts": 1.0}


def _kill(session: str = "sess-1") -> dict:
    return {"type": "kill", "session": session, "ts": 1.0}


# -- against a scripted monitor ------------------------------------------------------------------


def test_pre_tool_use_inject_becomes_additional_context(tmp_path: Path):
    """A pending inject is handed to Claude as additionalContext; the call went over as a tool_call."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, [_inject("You have listed build/ 4 times; it does not exist.")]) as monitor:
        result = run_hook("claude", PRE_TOOL, sock)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": "You have listed build/ 4 times; it does not exist.",
        }
    }
    kinds = [m["type"] for m in monitor.received]
    assert kinds == ["hello", "tool_call", "poll"]
    hello, call, poll = monitor.received
    assert hello == {"type": "hello", "agent": "claude-code", "origin": "hook", "session": "sess-1"}
    assert call["session"] == "sess-1" and call["id"] == "toolu_1" and call["name"] == "Bash"
    assert call["args"] == {"command": "ls build/", "description": "list"}
    assert poll == {"type": "poll", "session": "sess-1", "call_id": "toolu_1"}  # the guard's deny names it


def test_stop_inject_continues_the_turn(tmp_path: Path):
    """On Claude's Stop, an inject keeps the agent going through additionalContext (the
    documented non-error form); Codex's Stop takes decision block with the text as the reason."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(
        sock, [_inject("Check the test output before you stop."), _inject("And run it once more.")]
    ):
        result = run_hook("claude", STOP, sock)
    assert json.loads(result.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "Stop",
            "additionalContext": "Check the test output before you stop.\n\nAnd run it once more.",
        }
    }
    sock.unlink()
    with ScriptedMonitor(sock, [_inject("Check the test output before you stop.")]):
        result = run_hook("codex", STOP, sock)
    assert json.loads(result.stdout) == {
        "decision": "block",
        "reason": "Check the test output before you stop.",
    }


def test_kill_stops_claude_and_denies_the_tool(tmp_path: Path):
    """A kill answers continue:false with a stop reason, and on PreToolUse also denies the call."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, [_kill()]) as monitor:
        pre = run_hook("claude", PRE_TOOL, sock)
        monitor.replies.append(_kill())
        post = run_hook("claude", POST_TOOL, sock)
    reply = json.loads(pre.stdout)
    assert reply["continue"] is False and "loopwatch" in reply["stopReason"]
    assert reply["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert reply["hookSpecificOutput"]["permissionDecisionReason"] == reply["stopReason"]
    assert json.loads(post.stdout) == {"continue": False, "stopReason": reply["stopReason"]}
    result = next(m for m in monitor.received if m["type"] == "tool_result")
    assert result["id"] == "toolu_1" and "No such file" in result["content"]


def test_codex_kill_on_pre_tool_use_only_denies(tmp_path: Path):
    """Codex rejects continue:false on PreToolUse, so a kill there is a deny; inject works as for Claude."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, [_kill()]) as monitor:
        killed = run_hook("codex", dict(PRE_TOOL, turn_id="t1", model="gpt-5"), sock)
        monitor.replies.append(_inject("stop polling"))
        injected = run_hook("codex", dict(POST_TOOL, tool_response="exit 1"), sock)
    reply = json.loads(killed.stdout)
    assert "continue" not in reply and reply["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert json.loads(injected.stdout)["hookSpecificOutput"]["additionalContext"] == "stop polling"
    assert monitor.received[0]["agent"] == "codex"


def test_nothing_pending_prints_nothing(tmp_path: Path):
    """With nothing queued the hook exits 0 silently; SessionStart reports the agent's pid."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock) as monitor:
        result = run_hook("claude", SESSION_START, sock)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    start = next(m for m in monitor.received if m["type"] == "session_start")
    # The agent is the process that ran the hook: here, this test process.
    assert start["pid"] == os.getpid() and start["agent"] == "claude-code"
    assert start["meta"] == {
        "origin": "hook",
        "source": "startup",
        "cwd": "/w",
        "transcript_path": "/t/sess-1.jsonl",
    }


def test_slow_monitor_is_abandoned(tmp_path: Path):
    """A monitor that never answers the poll costs the agent only the hook's timeout: exit 0, no output."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, stall=True) as monitor:
        result = run_hook("claude", PRE_TOOL, sock, "--timeout", "0.2")
    assert (result.returncode, result.stdout) == (0, b"")
    assert [m["type"] for m in monitor.received] == ["hello", "tool_call", "poll"]


def test_unanswerable_events_are_forwarded_without_a_poll(tmp_path: Path):
    """Events the hook cannot answer (e.g. Notification) are not polled, so no message is drained and lost."""
    sock = short_socket_path(tmp_path)
    with ScriptedMonitor(sock, [_inject("kept for later")]) as monitor:
        result = run_hook(
            "claude", {"session_id": "sess-1", "hook_event_name": "Notification", "message": "waiting"}, sock
        )
    assert (result.returncode, result.stdout) == (0, b"")
    assert [m["type"] for m in monitor.received] == ["hello"]
    assert monitor.replies == [_inject("kept for later")]


# -- no monitor, bad input ------------------------------------------------------------------------


def test_monitor_absent_exits_zero(tmp_path: Path):
    """No socket, or a stale socket file nobody listens on: exit 0, no output, nothing on stderr."""
    missing = run_hook("claude", PRE_TOOL, tmp_path / "none.sock")
    assert (missing.returncode, missing.stdout, missing.stderr) == (0, b"", b"")
    stale = short_socket_path(tmp_path)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()
    result = run_hook("codex", STOP, stale)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


@pytest.mark.parametrize(
    "stdin,why",
    [
        (b"\x00\xffnot json at all", "not JSON"),
        (b"", "no input"),
        (b"[1, 2, 3]", "expected a JSON object"),
        (b'{"session_id": "s"}', "hook_event_name"),
        (b'{"hook_event_name": "PreToolUse", "session_id": 7}', "session_id"),
        (b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": null}', "tool_name"),
    ],
)
def test_garbage_stdin_exits_zero_with_a_message(tmp_path: Path, stdin: bytes, why: str):
    """Unexpected input never crashes the hook or blocks the agent: exit 0, a reason on stderr."""
    result = run_hook("claude", stdin, tmp_path / "none.sock")
    assert result.returncode == 0 and result.stdout == b""
    assert why in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_bad_usage_still_exits_zero(tmp_path: Path):
    """A misconfigured hook command must not exit 2, which would block Claude's tool call."""
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "hook", "claud"],
        input=b"{}",
        capture_output=True,
        env=_env(tmp_path / "x.sock"),
        cwd=ROOT,
        timeout=PROCESS_DEADLINE,
    )
    assert result.returncode == 0 and b"invalid choice" in result.stderr


def test_hook_import_is_light():
    """The hook path imports neither Textual, sqlite-utils, rapidfuzz, orjson nor the config/detectors."""
    code = (
        "import io, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(b'{}'))\n"
        "from monitor.cli import main\n"
        "main(['hook', 'claude'])\n"
        "heavy = ('textual', 'sqlite_utils', 'rapidfuzz', 'orjson', 'monitor.config', 'monitor.detect',\n"
        "         'monitor.formats', 'asyncio')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        cwd=ROOT,
        env=_env("/nonexistent.sock"),
        timeout=PROCESS_DEADLINE,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip().splitlines()[-1] == "[]"


def test_socket_path_matches_the_monitors_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The hook finds the socket where the monitor listens by default, with or without a runtime dir."""
    from monitor.config import default_socket_path

    monkeypatch.delenv("LOOPWATCH_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert socket_path() == default_socket_path() == tmp_path / "loopwatch.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert socket_path() == default_socket_path()
    monkeypatch.setenv("LOOPWATCH_SOCKET", "~/x.sock")
    assert socket_path() == Path("~/x.sock").expanduser()


def test_translation_and_answers():
    """The hook input maps to native events, and every decision maps to the agent's JSON."""
    pre = parse_hook_input(
        json.dumps(dict(PRE_TOOL, tool_use_id=None, tool_input="raw")).encode(), "claude-code", now=5.0
    )
    post = parse_hook_input(
        json.dumps(dict(POST_TOOL, tool_use_id=None, tool_input="raw")).encode(), "claude-code", now=6.0
    )
    assert pre.events[0]["args"] == {"input": "raw"} and pre.events[0]["ts"] == 5.0
    assert pre.events[0]["id"] == post.events[0]["id"]  # paired without a tool_use_id
    failure = parse_hook_input(
        json.dumps(
            {"session_id": "s", "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "error": "boom"}
        ).encode(),
        "claude-code",
    )
    assert failure.events[0]["is_error"] is True and failure.events[0]["content"] == "boom"
    prompt = parse_hook_input(
        json.dumps(
            {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "try again"}
        ).encode(),
        "codex",
    )
    assert prompt.events[0] == {
        "type": "message",
        "session": "s",
        "ts": prompt.events[0]["ts"],
        "role": "user",
        "content": "try again",
    }
    assert answer(pre, []) is None
    assert answer(prompt, [_inject("x")]) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "x"}
    }
    stop = parse_hook_input(json.dumps(STOP).encode(), "codex")
    assert stop.events == [] and answer(stop, [_kill()])["continue"] is False
    assert response_text({"type": "text", "file": {"filePath": "a", "content": "body"}}) == "body"
    assert response_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert len(response_text("x" * 300_000)) < 101_000


# -- against the real monitor --------------------------------------------------------------------


async def test_real_monitor_inject_and_kill(tmp_path: Path):
    """With the real hub and socket server: the operator's inject reaches Claude as
    additionalContext on the next hook call, and a kill as continue:false."""
    async with running_monitor(tmp_path) as (hub, server):
        sock = server.unix_path
        code, reply, err = await run_hook_async("claude", PRE_TOOL, sock)
        assert (code, reply) == (0, None), err
        await hub.join()
        session = hub.session("sess-1")
        assert session is not None and session.events == 1 and session.channel == "hook"
        action = await hub.act("inject", "sess-1", text="You keep listing build/; it is not there.")
        assert action.outcome == "delivered"
        code, reply, err = await run_hook_async("claude", POST_TOOL, sock)
        assert reply == {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": "You keep listing build/; it is not there.",
            }
        }
        code, reply, err = await run_hook_async("claude", STOP, sock)
        assert reply is None  # delivered once, not again
        kill = await hub.act("kill", "sess-1")
        assert kill.outcome == "delivered", kill.detail
        code, reply, err = await run_hook_async("claude", dict(PRE_TOOL, tool_use_id="toolu_2"), sock)
        assert code == 0 and reply["continue"] is False
        assert reply["hookSpecificOutput"]["permissionDecision"] == "deny"
        await hub.join()
        assert hub.session("sess-1").events == 3


async def test_real_monitor_sees_a_loop_through_hooks(tmp_path: Path):
    """Tool calls forwarded by the hook go through detection: a repeated failing call warns."""
    from monitor.events import Level

    async with running_monitor(tmp_path) as (hub, server):
        for i in range(4):
            call = dict(PRE_TOOL, tool_use_id=f"toolu_{i}")
            await run_hook_async("claude", call, server.unix_path)
            await run_hook_async("claude", dict(POST_TOOL, tool_use_id=f"toolu_{i}"), server.unix_path)
        await hub.join()
        assert hub.session("sess-1").level >= Level.WARN


# -- install-hook ---------------------------------------------------------------------------------

EXISTING = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 3}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def install_hook(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "install-hook", *args],
        capture_output=True,
        env=env or _env("/nonexistent.sock"),
        cwd=ROOT,
        timeout=PROCESS_DEADLINE,
        text=True,
    )


def _ours(settings: dict, agent: str) -> dict[str, list]:
    return {
        event: [h for g in groups for h in g["hooks"] if is_ours(h, agent)]
        for event, groups in settings.get("hooks", {}).items()
    }


def test_install_hook_project_keeps_other_hooks_and_is_idempotent(tmp_path: Path):
    """install-hook adds one entry per event next to existing hooks; again: no change; --uninstall restores."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(EXISTING, indent=4))
    first = install_hook("claude", "--project", str(tmp_path), "--command", "loopwatch hook claude")
    assert first.returncode == 0, first.stderr
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == EXISTING["permissions"]
    assert data["hooks"]["PreToolUse"][0] == EXISTING["hooks"]["PreToolUse"][0]
    assert data["hooks"]["Stop"][0] == EXISTING["hooks"]["Stop"][0]
    ours = _ours(data, "claude")
    assert {event: len(handlers) for event, handlers in ours.items() if handlers} == {e: 1 for e in EVENTS}
    assert ours["PreToolUse"][0] == {"type": "command", "command": "loopwatch hook claude", "timeout": 10}
    assert data["hooks"]["PreToolUse"][1]["matcher"] == "*"
    before = settings.read_bytes()
    again = install_hook("claude", "--project", str(tmp_path), "--command", "loopwatch hook claude")
    assert again.returncode == 0 and "already installed" in again.stdout
    assert settings.read_bytes() == before
    removed = install_hook("claude", "--project", str(tmp_path), "--uninstall")
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert json.loads(settings.read_text()) == EXISTING
    assert not list(settings.parent.glob(".settings.json.*"))  # no temporary files left


def test_install_hook_user_default_command_and_update(tmp_path: Path):
    """--user writes $CLAUDE_CONFIG_DIR/settings.json; an entry of ours with an old path is updated, not doubled."""
    home = tmp_path / "claude-home"
    env = dict(_env("/nonexistent.sock"), CLAUDE_CONFIG_DIR=str(home))
    result = install_hook("claude", "--user", env=env)
    assert result.returncode == 0, result.stderr
    path = home / "settings.json"
    data = json.loads(path.read_text())
    command = _ours(data, "claude")["Stop"][0]["command"]
    assert command.endswith("hook claude")
    # Simulate loopwatch having moved: the old entry is replaced in place.
    for groups in data["hooks"].values():
        groups[0]["hooks"][0]["command"] = "/old/venv/bin/loopwatch hook claude"
    path.write_text(json.dumps(data))
    assert install_hook("claude", env=env).returncode == 0
    data = json.loads(path.read_text())
    assert all(
        len(handlers) == 1 and handlers[0]["command"] == command
        for handlers in _ours(data, "claude").values()
    )
    # The installed command really works as a hook.
    hook = subprocess.run(
        command + " --timeout 0.2",
        shell=True,
        input=json.dumps(STOP).encode(),
        capture_output=True,
        env=_env(tmp_path / "none.sock"),
        timeout=PROCESS_DEADLINE,
    )
    assert (hook.returncode, hook.stdout) == (0, b"")


def test_install_hook_codex(tmp_path: Path):
    """Codex gets the same entries in $CODEX_HOME/hooks.json, each with its timeout, and a note on support."""
    from monitor.commands.install_hook import CODEX_EVENT_TIMEOUTS

    env = dict(_env("/nonexistent.sock"), CODEX_HOME=str(tmp_path / "codex"))
    result = install_hook("codex", env=env)
    assert result.returncode == 0 and "/hooks" in result.stdout and "trust" in result.stdout
    data = json.loads((tmp_path / "codex" / "hooks.json").read_text())
    ours = _ours(data, "codex")
    assert set(ours) == set(AGENT_EVENTS["codex"])
    # Every timeout written out (Codex's own default is 600 s); SessionEnd 1 s (its default; 3 s is the cap).
    assert all(len(ours[e]) == 1 for e in AGENT_EVENTS["codex"])
    assert {e: ours[e][0]["timeout"] for e in AGENT_EVENTS["codex"]} == {
        e: CODEX_EVENT_TIMEOUTS.get(e, 10) for e in AGENT_EVENTS["codex"]
    }
    assert ours["SessionEnd"][0]["timeout"] == 1
    removed = install_hook("codex", "--uninstall", env=env)
    assert removed.returncode == 0 and "held nothing else" in removed.stdout
    # install-hook created the file; uninstalling leaves no `{}` behind
    assert not (tmp_path / "codex" / "hooks.json").exists()


def test_install_hook_refuses_a_broken_settings_file(tmp_path: Path):
    """A settings file that is not JSON is reported and left exactly as it was."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": {,}')
    result = install_hook("claude", "--project", str(tmp_path))
    assert result.returncode == 2 and "not valid JSON" in result.stderr
    assert settings.read_text() == '{"hooks": {,}'
    missing = install_hook("claude", "--project", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def test_uninstall_removes_only_our_handlers_from_shared_groups():
    """A group holding our handler and someone else's keeps theirs; the other agent's entries stay."""
    settings = {
        "hooks": {
            "Stop": [
                {
                    "hooks": [
                        {"type": "command", "command": "'/opt/my tools/loopwatch' hook claude"},
                        {"type": "command", "command": "notify-send done"},
                        {"type": "command", "command": "python3 -m monitor hook codex"},
                    ]
                }
            ]
        }
    }
    assert uninstall(settings, "claude")
    assert settings == {
        "hooks": {
            "Stop": [
                {
                    "hooks": [
                        {"type": "command", "command": "notify-send done"},
                        {"type": "command", "command": "python3 -m monitor hook codex"},
                    ]
                }
            ]
        }
    }
    assert not uninstall(settings, "claude")
    with pytest.raises(ValueError):
        install({"hooks": []}, "claude", "loopwatch hook claude")


async def test_a_bad_inject_never_costs_the_messages_after_it(tmp_path):
    """Issue 32, item 12: an inject with a lone surrogate, an inject, then a kill request,
    all queued for a hook session: the next real hook call gets all three (the bad text
    with U+FFFD in place of the surrogate), and nothing is removed before it was sent."""
    async with running_monitor(tmp_path) as (hub, server):
        code, _reply, _err = await run_hook_async(
            "claude", dict(PRE_TOOL, tool_use_id="t0"), server.unix_path
        )
        assert code == 0
        await hub.join()
        first = await hub.act("inject", "sess-1", text="bad \ud800 text")
        second = await hub.act("inject", "sess-1", text="second nudge")
        kill = await hub.act("kill", "sess-1")  # no pid known: a kill request to the agent
        assert "asked the agent to stop" in kill.detail
        assert first.outcome == second.outcome == "delivered"
        code, reply, err = await run_hook_async("claude", PRE_TOOL, server.unix_path)
        assert code == 0, err
        assert reply["continue"] is False
        reason = reply["hookSpecificOutput"]["permissionDecisionReason"]
        assert "bad \ufffd text" in reason and "second nudge" in reason
        assert len(server.mailboxes["sess-1"]) == 0  # taken only now that they were sent
        code, reply, _err = await run_hook_async("claude", PRE_TOOL, server.unix_path)
        assert reply is None  # each message once


async def test_mailbox_messages_stay_until_the_hook_got_them():
    from monitor.control import HookMailbox

    mailbox = HookMailbox("s")
    for text in ("a", "b"):
        await mailbox.send({"type": "inject", "text": text})
    seen = mailbox.pending()
    assert len(mailbox) == 2  # looking takes nothing
    await mailbox.send({"type": "kill"})
    mailbox.taken(seen)
    assert mailbox.pending() == [{"type": "kill"}]  # what came meanwhile stays


def test_install_hook_local_and_the_session_end_timeout(tmp_path: Path):
    """--local writes the project's settings.local.json; SessionEnd gets a short timeout (Claude Code waits
    for the longest SessionEnd hook on exit), the others 10 s; an old install's 10 s SessionEnd is updated."""
    result = install_hook("claude", "--local", str(tmp_path), "--command", "loopwatch hook claude")
    assert result.returncode == 0, result.stderr
    local = tmp_path / ".claude" / "settings.local.json"
    ours = _ours(json.loads(local.read_text()), "claude")
    assert ours["SessionEnd"][0]["timeout"] == 2 and ours["PreToolUse"][0]["timeout"] == 10
    assert not (tmp_path / ".claude" / "settings.json").exists()
    data = json.loads(local.read_text())
    data["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = 10  # as older loopwatch wrote it
    local.write_text(json.dumps(data))
    assert (
        install_hook("claude", "--local", str(tmp_path), "--command", "loopwatch hook claude").returncode == 0
    )
    assert _ours(json.loads(local.read_text()), "claude")["SessionEnd"][0]["timeout"] == 2
    codex = install_hook("codex", "--local", str(tmp_path))
    assert codex.returncode == 2 and "only Claude Code" in codex.stderr


def test_the_default_hook_command_never_runs_a_projects_own_monitor_package(tmp_path: Path):
    """Claude Code runs hooks in the project's directory: a project with its own `monitor/` must not
    get its code run by our hook, whether the command is the console script or `python -P -m monitor`."""
    from monitor.commands.install_hook import default_command

    project = tmp_path / "project"
    (project / "monitor").mkdir(parents=True)
    (project / "monitor" / "__init__.py").write_text("")
    (project / "monitor" / "__main__.py").write_text("print('ROGUE'); raise SystemExit(7)\n")
    env = {k: v for k, v in _env(str(tmp_path / "nowhere.sock")).items() if k != "PYTHONPATH"}
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(project)})
    plain = f"{shlex.quote(sys.executable)} -m monitor hook claude"
    guarded = f"{shlex.quote(sys.executable)} -P -m monitor hook claude"
    runs = {}
    for name, command in (("plain", plain), ("guarded", guarded), ("default", default_command("claude"))):
        runs[name] = subprocess.run(
            command,
            shell=True,
            cwd=project,
            input=payload,
            capture_output=True,
            text=True,
            env=env,
            timeout=PROCESS_DEADLINE,
        )
    assert "ROGUE" in runs["plain"].stdout  # what the issue reproduced: the project's code ran
    for name in ("guarded", "default"):
        assert "ROGUE" not in runs[name].stdout and runs[name].returncode == 0, (name, runs[name])
    assert default_command("claude").split()[0].startswith("/")
