"""``loopwatch hook claude|codex``: one hook call, forwarded to the monitor and answered.

Claude Code and Codex run a hook command at fixed points of a session and
pass it the event as JSON on standard input.  This module:

1. translates that JSON into native events (``PreToolUse`` → ``tool_call``,
   ``PostToolUse`` → ``tool_result``, ``SessionStart`` → ``session_start``
   with the agent's pid, ``UserPromptSubmit`` → a user message, ``Stop`` →
   nothing);
2. sends them over the monitor's Unix socket, then ``{"type":"poll"}``, and
   reads the control messages the operator queued for the session until
   ``{"type":"poll_done"}``;
3. prints the agent's answer: a pending **kill** stops the agent
   (``{"continue": false, "stopReason": …}``, plus ``permissionDecision:
   "deny"`` on ``PreToolUse``); a pending **inject** becomes
   ``hookSpecificOutput.additionalContext`` (on ``Stop``: ``{"decision":
   "block", "reason": …}`` so the agent carries on with the message).
   Nothing pending: no output.

It always exits 0 and never slows the agent: a missing or slow monitor costs
at most ``timeout`` seconds (0.5 by default) in total, and bad input is
reported on stderr.  The module imports only the standard library so that a
hook call stays fast (see ``test_hook_import_is_light``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a hook call ~5 ms
    from typing import Any, BinaryIO, TextIO

AGENTS = {"claude": "claude-code", "codex": "codex"}
SOCKET_ENV = "LOOPWATCH_SOCKET"
TIMEOUT_ENV = "LOOPWATCH_HOOK_TIMEOUT"
DEFAULT_TIMEOUT = 0.5
#: Tool inputs and outputs are clipped (head and tail kept) to stay well under
#: the socket's line limit; detectors look at far less than this.
MAX_TEXT = 100_000
#: Hook events answered after a poll; others only forward their events, since
#: an answer there could not reach the agent and a drained message would be lost.
ANSWERABLE = frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                        "SubagentStop"})
#: Processes between the agent and this hook that are not the agent itself.
_WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "env", "timeout", "nice"})
DEFAULT_KILL_REASON = "Stopped by the loopwatch operator: the session was looping."


class HookInputError(ValueError):
    """The hook's standard input is not a hook event we can read."""


def socket_path() -> Path:
    """The monitor's socket: ``$LOOPWATCH_SOCKET``, else the default of
    :func:`monitor.config.default_socket_path` (repeated here so that a hook
    call does not import the configuration machinery; a test keeps them equal)."""
    configured = os.environ.get(SOCKET_ENV)
    if configured:
        return Path(configured).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "loopwatch.sock"
    return Path(f"/tmp/loopwatch-{os.getuid()}") / "loopwatch.sock"


def agent_pid(start: int | None = None) -> int:
    """The agent's pid: the hook's parent, skipping shells that only ran the command."""
    pid = os.getppid() if start is None else start
    for _ in range(4):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stream:
                stat = stream.read().decode("utf-8", "replace")
        except OSError:
            return pid
        # "pid (comm) state ppid …": comm may itself contain spaces or parentheses.
        comm = stat[stat.find("(") + 1: stat.rfind(")")]
        rest = stat[stat.rfind(")") + 2:].split()
        if comm not in _WRAPPERS or len(rest) < 2 or int(rest[1]) <= 1:
            return pid
        pid = int(rest[1])
    return pid


# -- translating the hook input -------------------------------------------------------------------

def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    half = MAX_TEXT // 2
    return f"{text[:half]}\n[… {len(text) - MAX_TEXT:,} characters cut by loopwatch …]\n{text[-half:]}"


def _clip_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _clip(value)
    if depth > 6:
        return value
    if isinstance(value, dict):
        return {k: _clip_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip_value(v, depth + 1) for v in value]
    return value


def response_text(response: Any) -> str:
    """The readable text of a tool response (a string, or one of the agents' objects)."""
    if response is None:
        return ""
    if isinstance(response, str):
        return _clip(response)
    if isinstance(response, list):
        parts = [item.get("text", "") if isinstance(item, dict) else str(item) for item in response]
        return _clip("\n".join(p for p in parts if p))
    if isinstance(response, dict):
        if "stdout" in response or "stderr" in response:
            out = str(response.get("stdout") or "")
            err = str(response.get("stderr") or "")
            return _clip(out + ("\n" + err if err and out else err))
        for key in ("output", "content", "result", "text", "message"):
            if isinstance(response.get(key), (str, list)):
                return response_text(response[key])
        file = response.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return _clip(file["content"])
    return _clip(json.dumps(response, sort_keys=True, ensure_ascii=False, default=str))


def _response_is_error(payload: dict[str, Any]) -> bool:
    if payload.get("hook_event_name") == "PostToolUseFailure":
        return True
    response = payload.get("tool_response")
    if isinstance(response, dict):
        if response.get("is_error") is True or response.get("success") is False:
            return True
        code = response.get("exit_code", response.get("exitCode"))
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return True
    return False


def _call_id(payload: dict[str, Any]) -> str:
    """The tool call's id; agents without one get a stable digest of the call,
    the same before and after the tool runs, so call and result still pair."""
    given = payload.get("tool_use_id")
    if isinstance(given, str) and given:
        return given
    import hashlib  # only agents that omit tool_use_id pay for it

    digest = hashlib.sha1(json.dumps([payload.get("tool_name"), payload.get("tool_input")],
                                     sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"hook-{digest}"


class HookCall:
    """One hook invocation, read and translated (a plain class: dataclasses
    cost a hook call more import time than all the rest)."""

    __slots__ = ("agent", "event", "session", "payload", "events")

    def __init__(self, agent: str, event: str, session: str, payload: dict[str, Any]):
        self.agent = agent        # "claude-code" or "codex"
        self.event = event        # hook_event_name
        self.session = session
        self.payload = payload
        self.events: list[dict[str, Any]] = []

    @property
    def answerable(self) -> bool:
        return self.event in ANSWERABLE


def parse_hook_input(raw: bytes, agent: str, *, pid: int | None = None,
                     now: float | None = None) -> HookCall:
    """Read the hook's JSON and translate it; raises :class:`HookInputError`."""
    if not raw.strip():
        raise HookInputError("no input on stdin (expected the hook's JSON object)")
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HookInputError(f"stdin is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"stdin: expected a JSON object, got {type(payload).__name__}")
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or not event:
        raise HookInputError("hook_event_name: missing (is this command configured as a hook?)")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise HookInputError(f"session_id: expected a non-empty string, got {session!r}")
    ts = time.time() if now is None else now
    call = HookCall(agent=agent, event=event, session=session, payload=payload)
    base = {"session": session, "ts": ts}
    if event == "SessionStart":
        meta = {"origin": "hook"}
        for key in ("source", "cwd", "transcript_path", "model", "permission_mode"):
            if isinstance(payload.get(key), str):
                meta[key] = payload[key]
        call.events.append({"type": "session_start", **base, "agent": agent,
                            "pid": agent_pid() if pid is None else pid, "meta": meta})
    elif event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            call.events.append({"type": "message", **base, "role": "user", "content": _clip(prompt)})
    elif event == "PreToolUse":
        name = payload.get("tool_name")
        if not isinstance(name, str) or not name:
            raise HookInputError(f"tool_name: expected a tool name, got {name!r}")
        args = payload.get("tool_input")
        args = args if isinstance(args, dict) else ({} if args is None else {"input": args})
        call.events.append({"type": "tool_call", **base, "id": _call_id(payload), "name": name,
                            "args": _clip_value(args)})
    elif event in ("PostToolUse", "PostToolUseFailure"):
        response = payload.get("tool_response", payload.get("error"))
        call.events.append({"type": "tool_result", **base, "id": _call_id(payload),
                            "content": response_text(response), "is_error": _response_is_error(payload)})
    # Stop, SubagentStop and anything else: no event, only the poll.
    return call


# -- talking to the monitor -------------------------------------------------------------------------

class _Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def connect_to_monitor(path: Path, timeout: float) -> socket.socket | None:
    """A connection to the monitor's socket, or None: no monitor listens there, or it
    may not be ours.  Before anything is sent: a socket directory inside a shared
    directory (``/tmp``) must be ours, private and not a link, and the listening
    process must run as our user (``SO_PEERCRED``), or a local user who took the
    path would read the agent's tool calls and answer in its place."""
    from monitor.localsock import listener_problem, socket_dir_problem

    problem = socket_dir_problem(path)
    sock = None
    if problem is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(timeout, 0.001))
            sock.connect(os.fspath(path))
        except OSError:
            sock.close()
            return None
        problem = listener_problem(sock)
    if problem is not None:
        if sock is not None:
            sock.close()
        print(f"loopwatch hook: not connecting to {path}: {problem}", file=sys.stderr)
        return None
    return sock


def exchange(call: HookCall, path: Path, timeout: float) -> list[dict[str, Any]]:
    """Send the call's events (and a poll) to the monitor; return the control
    messages for the session.  Any failure or timeout returns what was read so far."""
    deadline = _Deadline(timeout)
    messages: list[dict[str, Any]] = []
    sock = connect_to_monitor(path, deadline.left())
    if sock is None:
        return messages  # no monitor (or not ours): nothing to forward, nothing to answer
    try:
        lines = [{"type": "hello", "agent": call.agent, "origin": "hook", "session": call.session},
                 *call.events]
        if call.answerable:
            lines.append({"type": "poll", "session": call.session})
        data = b"".join(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n" for line in lines)
        sock.settimeout(max(deadline.left(), 0.001))
        sock.sendall(data)
        if not call.answerable:
            return messages
        buffer = b""
        while deadline.left() > 0:
            sock.settimeout(deadline.left())
            chunk = sock.recv(65536)
            if not chunk:
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                try:
                    message = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                kind = message.get("type")
                if kind == "poll_done":
                    return messages
                if kind == "error":
                    print(f"loopwatch hook: the monitor rejected a line: {message.get('reason')}",
                          file=sys.stderr)
                elif kind in ("inject", "kill") and message.get("session", call.session) == call.session:
                    messages.append(message)
    except OSError:  # timeouts included: the agent must never wait on us
        pass
    finally:
        sock.close()
    return messages


# -- answering the agent --------------------------------------------------------------------------------

def answer(call: HookCall, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The JSON the agent expects for what the operator decided, or ``None``."""
    kills = [m for m in messages if m.get("type") == "kill"]
    injects = [m.get("text") for m in messages if m.get("type") == "inject"]
    text = "\n\n".join(t for t in injects if isinstance(t, str) and t.strip())
    event = call.event
    if kills:
        reason = next((m.get("reason") or m.get("text") for m in kills
                       if isinstance(m.get("reason") or m.get("text"), str)), None) or DEFAULT_KILL_REASON
        if text:
            reason = f"{reason}\n\n{text}"
        if event == "PreToolUse":
            deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": reason}}
            if call.agent == "codex":
                return deny  # Codex rejects continue:false / stopReason on PreToolUse
            return {"continue": False, "stopReason": reason, **deny}
        return {"continue": False, "stopReason": reason}
    if not text:
        return None
    if event in ("Stop", "SubagentStop"):
        return {"decision": "block", "reason": text}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def hook_timeout(value: float | None = None) -> float:
    if value is not None:
        return max(value, 0.01)
    try:
        return max(float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT)), 0.01)
    except ValueError:
        return DEFAULT_TIMEOUT


def run_hook(agent_name: str, stdin: BinaryIO, stdout: TextIO, stderr: TextIO, *,
             path: Path | None = None, timeout: float | None = None) -> int:
    """The whole hook: read, forward, answer.  Always returns 0."""
    agent = AGENTS.get(agent_name, agent_name)
    try:
        raw = stdin.read()
        call = parse_hook_input(raw, agent)
    except HookInputError as exc:
        print(f"loopwatch hook {agent_name}: ignored: {exc}", file=stderr)
        return 0
    except Exception as exc:  # never let a hook failure reach the agent
        print(f"loopwatch hook {agent_name}: ignored: {type(exc).__name__}: {exc}", file=stderr)
        return 0
    try:
        messages = exchange(call, path or socket_path(), hook_timeout(timeout))
        reply = answer(call, messages)
    except Exception as exc:
        print(f"loopwatch hook {agent_name}: monitor exchange failed: {type(exc).__name__}: {exc}",
              file=stderr)
        return 0
    if reply is not None:
        stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        stdout.flush()
    return 0
