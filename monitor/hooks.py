"""``loopwatch hook claude|codex``: one hook call, forwarded to the monitor and answered.

Claude Code and Codex run a hook command at fixed points of a session and
pass it the event as JSON on standard input.  This module:

1. translates that JSON into native events (``PreToolUse`` → ``tool_call``,
   ``PostToolUse`` → ``tool_result``, ``PostToolUseFailure`` → an error
   ``tool_result`` carrying Claude's top-level ``error`` ("Exit code N …"),
   ``SessionStart`` → ``session_start`` with the agent's pid,
   ``UserPromptSubmit`` → a user message, ``SessionEnd`` and ``StopFailure``
   (a turn ended by an API error) → ``session_end``, ``SubagentStart`` /
   ``SubagentStop`` → the subagent's ``session_start`` / ``session_end``,
   ``Stop`` / ``SubagentStop``'s ``last_assistant_message`` → an assistant
   message marked ``via: "hook"`` (the engine drops the transcript's copy:
   :mod:`monitor.detect.echoes`), ``PermissionRequest``, ``Notification``
   and ``Elicitation`` → ``waiting`` (the agent waits for the person:
   :mod:`monitor.detect.input_wait`; ``ElicitationResult`` ends it),
   ``PermissionDenied`` → the denied call's error ``tool_result``,
   ``PostCompact`` → ``compaction``, its ``status`` and ``error`` kept;
   ``PreCompact`` → nothing: the compaction is counted once, at its end).  Payloads from Cursor, which runs the
   Claude Code hooks with third-party hooks on, are labelled ``cursor``.
   A subagent's events (Claude sends the parent's
   ``session_id`` plus ``agent_id``) go to the session
   ``<session>:agent-<id>``, as the transcript adapter names it, so that
   tailing ``~/.claude/projects`` and the hook together see one session per
   agent, each call once (the engine drops a call id it already has);
2. sends them over the monitor's Unix socket, then ``{"type":"poll"}``, and
   reads the control messages the operator queued for the session until
   ``{"type":"poll_done"}``;
3. prints the agent's answer: a pending **kill** stops the agent
   (``{"continue": false, "stopReason": …}``, plus ``permissionDecision:
   "deny"`` on ``PreToolUse``); a pending **inject** becomes
   ``hookSpecificOutput.additionalContext`` -- on Claude's ``Stop`` too,
   the documented way (Claude Code 2.1.163 and later) to keep the turn going
   without the hook being shown as an error; Codex's ``Stop`` takes
   ``{"decision": "block", "reason": …}`` (so does Claude's with
   ``LOOPWATCH_STOP_FORM=block``, for older versions); a **deny** from the
   guard (``monitor/hub/guard.py``) naming this ``PreToolUse``'s call id
   denies that call (``permissionDecision: "deny"``, the nudge as
   ``permissionDecisionReason``; the poll names the call).  Nothing pending: no output.
   A stop is held at most ``$LOOPWATCH_STOP_BLOCKS`` (default 1) times in a
   row: while ``stop_hook_active`` says the agent already continues because
   of a stop hook and that many were held, ``Stop`` does not poll, so the
   agent stops and the message waits for its next hook call.

Each call also leaves the time it fired (and whether it reached a monitor)
in ``$LOOPWATCH_STATE_DIR`` (default ``$XDG_STATE_HOME/loopwatch``), which
``loopwatch doctor`` reads.

It always exits 0 and never slows the agent: a missing or slow monitor costs
at most ``timeout`` seconds (0.5 by default) in total, and bad input is
reported on stderr.  The module imports only the standard library (and the
stdlib-only :mod:`monitor.paths`) so that a hook call stays fast (see
``test_hook_import_is_light``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from monitor.ide_context import typed_request
from monitor.paths import hook_state_dir as state_dir  # noqa: F401  (part of this module's API)
from monitor.paths import socket_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would slow every hook call (benchmarks/README.md)
    from typing import Any, BinaryIO, TextIO

AGENTS = {"claude": "claude-code", "codex": "codex"}
TIMEOUT_ENV = "LOOPWATCH_HOOK_TIMEOUT"
DEFAULT_TIMEOUT = 0.5
#: Tool inputs and outputs are clipped (head and tail kept) to stay well under
#: the socket's line limit; detectors look at far less than this.
MAX_TEXT = 100_000
#: All the strings of one call's arguments together: six 100k-character edits
#: must still make one line the monitor takes (1 MiB, ≤ 6 bytes a character).
MAX_ARGS_TEXT = 150_000
#: Standard input read at most (a bigger hook event is ignored, saying so) ...
MAX_STDIN = 16 * 1024 * 1024
#: ... and for at most this long (an agent that leaves stdin open).
STDIN_SECONDS = 2.0
#: What the hook reads back from the monitor for one call: a listener that
#: floods it cannot make the call slow or big.
MAX_REPLY_BYTES = 1024 * 1024
MAX_REPLY_MESSAGES = 32
#: Hook events answered after a poll; others only forward their events, since
#: an answer there could not reach the agent and a drained message would be lost.
ANSWERABLE = frozenset(
    {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SubagentStart",
        "SubagentStop",
    }
)
#: Hook events whose answer may carry ``hookSpecificOutput.additionalContext``
#: (Claude Code; Codex reads the same shape).  ``SubagentStart``: a subagent
#: resumed under its agent id gets the nudge queued for it while it was stopped.
_CONTEXT_EVENTS = frozenset(
    {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "SubagentStart"}
)
#: ``Notification.notification_type`` values that mean the agent waits for the person,
#: and the wait's reason (https://code.claude.com/docs/en/hooks#notification).
_WAITING_NOTIFICATIONS = {
    "permission_prompt": "permission",
    "idle_prompt": "idle",
    "elicitation_dialog": "elicitation",
}
#: What is kept of a wait's question (characters).
_ASKS = 300
#: The control messages a hook answers with (``deny``: the guard's, for one call).
_ANSWERS = frozenset({"inject", "kill", "deny"})
STOP_BLOCKS_ENV = "LOOPWATCH_STOP_BLOCKS"
#: "block": answer Claude's Stop with decision block (for Claude Code before 2.1.163).
STOP_FORM_ENV = "LOOPWATCH_STOP_FORM"
DEFAULT_STOP_BLOCKS = 1
#: Processes between the agent and this hook that are not the agent itself.
_WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "env", "timeout", "nice"})
DEFAULT_KILL_REASON = "Stopped by the loopwatch operator: the session was looping."
DEFAULT_DENY_REASON = "loopwatch denied this call: it continues a loop. Try something different."


class HookInputError(ValueError):
    """The hook's standard input is not a hook event we can read."""


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
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        rest = stat[stat.rfind(")") + 2 :].split()
        if comm not in _WRAPPERS or len(rest) < 2 or int(rest[1]) <= 1:
            return pid
        pid = int(rest[1])
    return pid


# -- translating the hook input -------------------------------------------------------------------


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters cut by loopwatch …]\n{text[-half:]}"


def _strings(value: Any, depth: int = 0) -> int:
    """How many strings ``value`` holds (to the depth :func:`_clip_value` keeps)."""
    if isinstance(value, str):
        return 1
    if depth > 6:
        return 1
    if isinstance(value, dict):
        return sum(_strings(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return sum(_strings(v, depth + 1) for v in value)
    return 0


def _clip_value(value: Any, depth: int = 0, limit: int = MAX_TEXT) -> Any:
    """``value`` with each string clipped to ``limit`` characters, and what lies
    deeper than 6 levels turned into one clipped text."""
    if isinstance(value, str):
        return _clip(value, limit)
    if depth > 6:
        return _clip(json.dumps(value, sort_keys=True, default=str), limit)
    if isinstance(value, dict):
        return {k: _clip_value(v, depth + 1, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip_value(v, depth + 1, limit) for v in value]
    return value


def _clip_args(args: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments clipped in total (:data:`MAX_ARGS_TEXT`), not only per
    string: the call still reaches detection as one line."""
    try:
        count = _strings(args)
    except RecursionError:
        return {"input": "[arguments nested too deep; cut by loopwatch]"}
    limit = max(200, min(MAX_TEXT, MAX_ARGS_TEXT // max(count, 1)))
    return _clip_value(args, 0, limit)


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

    digest = hashlib.sha1(
        json.dumps(
            [payload.get("tool_name"), payload.get("tool_input")], sort_keys=True, default=str
        ).encode()
    ).hexdigest()[:16]
    return f"hook-{digest}"


class HookCall:
    """One hook invocation, read and translated (a plain class: dataclasses
    cost a hook call more import time than all the rest)."""

    __slots__ = ("agent", "event", "session", "payload", "events", "quiet")

    def __init__(self, agent: str, event: str, session: str, payload: dict[str, Any]):
        self.agent = agent  # "claude-code" or "codex"
        self.event = event  # hook_event_name
        self.session = session  # ``<session>:agent-<id>`` for a subagent's events
        self.payload = payload
        self.events: list[dict[str, Any]] = []
        self.quiet = False  # a stop held often enough: forward, do not poll

    @property
    def answerable(self) -> bool:
        return self.event in ANSWERABLE and not self.quiet


def parse_hook_input(raw: bytes, agent: str, *, pid: int | None = None, now: float | None = None) -> HookCall:
    """Read the hook's JSON and translate it; raises :class:`HookInputError`."""
    payload = _payload(raw)
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or not event:
        raise HookInputError("hook_event_name: missing (is this command configured as a hook?)")
    session = payload.get("session_id")
    if not session and agent == "claude-code" and _from_cursor(payload):
        session = payload.get("conversation_id")  # Cursor's own id for the chat
    if not isinstance(session, str) or not session:
        raise HookInputError(f"session_id: expected a non-empty string, got {session!r}")
    ts = time.time() if now is None else now
    parent = None
    agent_id = payload.get("agent_id")
    if isinstance(agent_id, str) and agent_id:
        # A subagent's event: its own session, named as the transcript adapter names it.
        parent, session = session, f"{session}:agent-{agent_id}"
    if agent == "claude-code" and _from_cursor(payload):
        agent = "cursor"  # Cursor runs ~/.claude/settings.json hooks with third-party hooks on
    call = HookCall(agent=agent, event=event, session=session, payload=payload)
    base = {"session": session, "ts": ts}
    call.events.extend(_events(event, payload, base, agent, parent, pid))
    # A stop already continuing because of a stop hook: held a bounded number of times.
    if event in ("Stop", "SubagentStop") and payload.get("stop_hook_active") is True:
        call.quiet = not _may_hold_stop(session)
    return call


def _from_cursor(payload: dict[str, Any]) -> bool:
    """Whether a hook event in Claude Code's shape comes from Cursor: its payloads
    carry ``cursor_version`` and ``conversation_id`` / ``generation_id``
    (https://cursor.com/docs/agent/hooks), which Claude Code never sends."""
    return isinstance(payload.get("cursor_version"), str) or (
        isinstance(payload.get("conversation_id"), str) and isinstance(payload.get("generation_id"), str)
    )


def _payload(raw: bytes) -> dict[str, Any]:
    """The hook's JSON object; raises :class:`HookInputError` saying what is wrong."""
    if not raw.strip():
        raise HookInputError("no input on stdin (expected the hook's JSON object)")
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HookInputError(f"stdin is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"stdin: expected a JSON object, got {type(payload).__name__}")
    return payload


def _events(
    event: str, payload: dict[str, Any], base: dict[str, Any], agent: str, parent: str | None, pid: int | None
) -> list[dict[str, Any]]:
    """The native records one hook event stands for (none for Stop and the rest)."""
    events: list[dict[str, Any]] = []
    if event == "SubagentStart" and parent is not None:
        meta = {"origin": "hook"}
        if isinstance(payload.get("agent_type"), str):
            meta["agent_type"] = payload["agent_type"]
        events.append({"type": "session_start", **base, "agent": agent, "parent": parent, "meta": meta})
    elif event == "SubagentStop" and parent is not None:
        events.extend(_last_message(payload, base))
        events.append({"type": "session_end", **base, "status": "subagent stopped"})
    elif event == "Stop":
        events.extend(_last_message(payload, base))
    elif event == "SessionEnd":
        reason = payload.get("reason")
        events.append(
            {
                "type": "session_end",
                **base,
                "status": reason if isinstance(reason, str) and reason else "ended",
            }
        )
    elif event == "StopFailure":
        # The turn ended on an API error (rate limit, authentication, ...): the
        # agent is not working any more; a later prompt revives the session.
        # Its last_assistant_message is not taken: it may be the rendered API error
        # (not verified), which repeated would read as the agent repeating itself.
        error = payload.get("error")
        events.append(
            {
                "type": "session_end",
                **base,
                "status": f"api error: {error}" if isinstance(error, str) and error else "api error",
            }
        )
    elif event == "SessionStart":
        meta = {"origin": "hook"}
        for key in ("source", "cwd", "transcript_path", "model", "permission_mode"):
            if isinstance(payload.get(key), str):
                meta[key] = payload[key]
        events.append(
            {
                "type": "session_start",
                **base,
                "agent": agent,
                "pid": agent_pid() if pid is None else pid,
                "meta": meta,
            }
        )
    elif event in _WAIT_EVENTS:
        events.extend(_wait_events(event, payload, base))
    elif event == "PreCompact":
        # Codex (and Claude Code): a compaction begins.  PostCompact is the
        # compaction, failed ones included; recording both would count it twice.
        return events
    else:
        return _work_events(event, payload, base)
    return events


def _last_message(payload: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """``Stop`` / ``SubagentStop``'s ``last_assistant_message``: the turn's last
    assistant text, which a hook-only session sees nowhere else.  Marked ``via``
    the hook: the engine drops the transcript's copy of it (monitor/detect/echoes.py)."""
    text = payload.get("last_assistant_message")
    if not isinstance(text, str) or not text.strip():
        return []
    message: dict[str, Any] = {"type": "message", **base, "role": "assistant", "content": _clip(text)}
    message["via"] = "hook"
    tasks = payload.get("background_tasks")
    if isinstance(tasks, list):
        # Work still running when the turn ended: the agent is not done, it waits on it.
        message["background_tasks"] = len(tasks)
    return [message]


def _asked(payload: dict[str, Any]) -> str:
    """What a permission request asks to run, in one short line."""
    name = payload.get("tool_name")
    name = name if isinstance(name, str) and name else "a tool"
    args = payload.get("tool_input")
    detail = ""
    if isinstance(args, dict):
        for key in ("command", "file_path", "path", "url", "pattern", "description"):
            if isinstance(args.get(key), str) and args[key]:
                detail = args[key]
                break
    text = f"{name}: {detail}" if detail else name
    return " ".join(text.split())[:_ASKS]


#: Hook events about the person: waits (Notification, PermissionRequest,
#: Elicitation), their ends (ElicitationResult, PermissionDenied) and compaction.
_WAIT_EVENTS = frozenset(
    {
        "Notification",
        "PermissionRequest",
        "PermissionDenied",
        "Elicitation",
        "ElicitationResult",
        "PostCompact",
    }
)


def _wait_events(event: str, payload: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of the hook events that say the agent waits for the person
    (``waiting``), that the wait is over, or that its context was compacted."""
    if event == "Notification":
        why = _WAITING_NOTIFICATIONS.get(str(payload.get("notification_type") or ""))
        message = payload.get("message")
        if why is None and isinstance(message, str) and "waiting for your input" in message.lower():
            why = "idle"  # versions before notification_type said so in the message only
        if why is None:
            return []  # auth_success and the like: nobody is waited for
        text = message if isinstance(message, str) else ""
        return [{"type": "waiting", **base, "status": why, "content": " ".join(text.split())[:_ASKS]}]
    if event == "PermissionRequest":
        return [{"type": "waiting", **base, "status": "permission", "content": _asked(payload)}]
    if event == "Elicitation":
        server = payload.get("mcp_server_name")
        message = payload.get("message")
        text = " ".join(str(message if isinstance(message, str) else "").split())
        if isinstance(server, str) and server:
            text = f"{server}: {text}" if text else server
        return [{"type": "waiting", **base, "status": "elicitation", "content": text[:_ASKS]}]
    if event == "ElicitationResult":
        return [{"type": "waiting", **base, "status": "resolved", "content": ""}]
    if event == "PermissionDenied":
        # The call was refused (a rule, the auto-mode classifier or a hook): its outcome.
        reason = payload.get("reason")
        content = (
            f"Permission denied: {reason}" if isinstance(reason, str) and reason else "Permission denied"
        )
        return [
            {"type": "tool_result", **base, "id": _call_id(payload), "content": content, "is_error": True}
        ]
    # PostCompact: the context was compacted (the transcript's compact_boundary is the same one).
    # Codex sends it for a failed compaction too (``status: "failed"``, ``error``): still an
    # attempt, which is what the compaction detector counts; the outcome is kept.
    compaction: dict[str, Any] = {"type": "compaction", **base, "via": "hook"}
    for key in ("trigger", "reason", "status"):
        if isinstance(payload.get(key), str) and payload[key]:
            compaction[key] = payload[key][:_ASKS]
    if isinstance(payload.get("error"), str) and payload["error"]:
        compaction["error"] = _clip(payload["error"], _ASKS)
    return [compaction]


def _work_events(event: str, payload: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of a prompt, a tool call or a tool's result."""
    events: list[dict[str, Any]] = []
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if isinstance(prompt, str):
            prompt = typed_request(prompt)[0]  # without the IDE extension's editor state
        if isinstance(prompt, str) and prompt.strip():
            events.append({"type": "message", **base, "role": "user", "content": _clip(prompt)})
    elif event == "PreToolUse":
        name = payload.get("tool_name")
        if not isinstance(name, str) or not name:
            raise HookInputError(f"tool_name: expected a tool name, got {name!r}")
        args = payload.get("tool_input")
        args = args if isinstance(args, dict) else ({} if args is None else {"input": args})
        events.append(
            {"type": "tool_call", **base, "id": _call_id(payload), "name": name, "args": _clip_args(args)}
        )
    elif event in ("PostToolUse", "PostToolUseFailure"):
        response = payload.get("tool_response", payload.get("error"))
        content = response_text(response)
        if payload.get("is_interrupt") is True and "interrupted" not in content.lower():
            # The user stopped the call: not the tool's outcome (detectors skip these).
            content = f"Request interrupted by user: {content}" if content else "Request interrupted by user"
        result = {
            "type": "tool_result",
            **base,
            "id": _call_id(payload),
            "content": content,
            "is_error": _response_is_error(payload),
        }
        duration = payload.get("duration_ms")
        if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration >= 0:
            result["duration_ms"] = duration  # how long the tool ran (Claude Code 2.1.x)
        events.append(result)
    return events


# -- bounded stop holds and the contact record -------------------------------------------------------


def stop_blocks() -> int:
    try:
        return max(int(os.environ.get(STOP_BLOCKS_ENV, DEFAULT_STOP_BLOCKS)), 0)
    except ValueError:
        return DEFAULT_STOP_BLOCKS


def _stop_file(session: str) -> Path:
    import hashlib

    return state_dir() / "stops" / hashlib.sha1(session.encode("utf-8", "replace")).hexdigest()[:20]


def _may_hold_stop(session: str) -> bool:
    """Whether a stop that already continues because of a stop hook may be held
    again: at most :func:`stop_blocks` holds in a row (counted per session in
    a small file, reset by the first stop of a chain)."""
    limit = stop_blocks()
    if limit <= 1:
        return False
    try:
        held = int(_stop_file(session).read_text() or 0)
    except (OSError, ValueError):
        held = 1  # stop_hook_active: at least one hold happened
    return held < limit


def _count_hold(call: HookCall) -> None:
    """The answer holds this stop: remember how many holds in a row."""
    if stop_blocks() <= 1:
        return
    path = _stop_file(call.session)
    held = 0
    if call.payload.get("stop_hook_active") is True:
        try:
            held = int(path.read_text() or 0)
        except (OSError, ValueError):
            held = 1
    write_state(path, str(held + 1).encode())


def state_dir_problem(directory: Path) -> str | None:
    """None when ``directory`` is a real directory of ours that nobody else can
    write to (the socket directory's check, group and others may read)."""
    import stat

    try:
        info = os.lstat(directory)
    except OSError as exc:
        return f"cannot check {directory}: {exc.strerror or exc}"
    if stat.S_ISLNK(info.st_mode):
        return f"{directory} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.getuid():
        return f"{directory} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    if info.st_mode & 0o022:
        return f"{directory} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def write_state(path: Path, data: bytes) -> bool:
    """Replace ``path`` (in the state directory, or a directory below it) with
    ``data``, atomically, best effort.  Every directory from the state directory
    down must pass :func:`state_dir_problem`, and the temporary file is created
    ``O_EXCL | O_NOFOLLOW``: a link planted in its place is never written
    through.  False (and a line on stderr) when it was not written."""
    top = state_dir()
    directories = [path.parent, *[d for d in path.parent.parents if d == top or top in d.parents]]
    try:
        top.parent.mkdir(parents=True, exist_ok=True)  # ~/.local/state: the user's own
    except OSError:
        return False
    for directory in reversed(directories):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False  # a read-only home: nothing to record, nothing to say
        problem = state_dir_problem(directory)
        if problem is not None:
            print(f"loopwatch hook: not writing {path}: {problem}", file=sys.stderr)
            return False
    temp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temp, flags, 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.replace(temp, path)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass
        return False
    return True


def record_contact(call: HookCall, reached: bool, now: float | None = None) -> None:
    """Leave ``hook-<agent>.json`` in :func:`state_dir`: when this agent's hook
    last fired, and last reached a monitor (what ``loopwatch doctor`` shows).
    Best effort: a read-only home costs the agent nothing."""
    directory = state_dir()
    path = directory / f"hook-{call.agent}.json"
    ts = time.time() if now is None else now
    record: dict[str, Any] = {}
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict):
            record = {}
    except (OSError, ValueError):
        pass
    record.update({"fired": ts, "event": call.event})
    if reached:
        record["reached"] = ts
    write_state(path, json.dumps(record).encode())


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


def _poll(call: HookCall) -> dict[str, Any]:
    """The poll line; a PreToolUse's names its call, so a guard's denial of it comes back."""
    poll = {"type": "poll", "session": call.session}
    if call.event == "PreToolUse":
        poll["call_id"] = _call_id(call.payload)
    return poll


def exchange(
    call: HookCall, path: Path, timeout: float, reached: list[bool] | None = None
) -> list[dict[str, Any]]:
    """Send the call's events (and a poll) to the monitor; return the control
    messages for the session.  Any failure or timeout returns what was read so
    far.  ``reached`` (if given) gets True appended once the monitor took the
    call's events."""
    deadline = _Deadline(timeout)
    messages: list[dict[str, Any]] = []
    sock = connect_to_monitor(path, deadline.left())
    if sock is None:
        return messages  # no monitor (or not ours): nothing to forward, nothing to answer
    try:
        lines = [
            {"type": "hello", "agent": call.agent, "origin": "hook", "session": call.session},
            *call.events,
        ]
        if call.answerable:
            lines.append(_poll(call))
        data = b"".join(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n" for line in lines)
        sock.settimeout(max(deadline.left(), 0.001))
        sock.sendall(data)
        if reached is not None:
            reached.append(True)
        if not call.answerable:
            return messages
        buffer = b""
        received = 0
        while deadline.left() > 0 and received < MAX_REPLY_BYTES and len(messages) < MAX_REPLY_MESSAGES:
            sock.settimeout(deadline.left())
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += len(chunk)
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
                    print(
                        f"loopwatch hook: the monitor rejected a line: {message.get('reason')}",
                        file=sys.stderr,
                    )
                elif kind in _ANSWERS and message.get("session", call.session) == call.session:
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
    denial = _denial(call, messages)
    if denial is not None and not kills:
        reason = f"{denial}\n\n{text}" if text else denial
        # Claude Code and Codex read the same PreToolUse answer: the call does not run,
        # and the reason is what the model reads instead of the tool's output.
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": _clip(reason),
            }
        }
    if kills:
        reason = (
            next(
                (
                    m.get("reason") or m.get("text")
                    for m in kills
                    if isinstance(m.get("reason") or m.get("text"), str)
                ),
                None,
            )
            or DEFAULT_KILL_REASON
        )
        if text:
            reason = f"{reason}\n\n{text}"
        if event == "PreToolUse":
            deny = {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
            if call.agent == "codex":
                return deny  # Codex rejects continue:false / stopReason on PreToolUse
            return {"continue": False, "stopReason": reason, **deny}
        return {"continue": False, "stopReason": reason}
    if not text:
        return None
    text = _clip(text)
    if event in ("Stop", "SubagentStop"):
        if call.agent == "codex" or os.environ.get(STOP_FORM_ENV) == "block":
            # Codex's Stop takes no hookSpecificOutput; Claude Code before 2.1.163 neither.
            return {"decision": "block", "reason": text}
        # Claude Code 2.1.163+: continues the turn with the text, not shown as a hook error.
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    if event not in _CONTEXT_EVENTS:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _denial(call: HookCall, messages: list[dict[str, Any]]) -> str | None:
    """The guard's reason to deny this very call (a ``deny`` naming its id), or None."""
    if call.event != "PreToolUse":
        return None
    call_id = _call_id(call.payload)
    for message in messages:
        if message.get("type") == "deny" and message.get("call_id") == call_id:
            reason = message.get("reason")
            return reason if isinstance(reason, str) and reason.strip() else DEFAULT_DENY_REASON
    return None


def read_stdin(stdin: BinaryIO, limit: int = MAX_STDIN, seconds: float | None = None) -> bytes:
    """The hook's input: at most ``limit`` bytes (more: :class:`HookInputError`),
    read for at most ``seconds`` (:data:`STDIN_SECONDS`): an agent that leaves
    stdin open after its JSON costs that at most, and a complete JSON object
    already read is used without waiting for the end of the stream."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        data = stdin.read(limit + 1)  # an in-memory stream (tests, embedding)
        if len(data) > limit:
            raise HookInputError(f"stdin is over {limit:,} bytes; ignored") from None
        return data
    import select

    deadline = _Deadline(STDIN_SECONDS if seconds is None else seconds)
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline.left()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 1024 * 1024)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise HookInputError(f"stdin is over {limit:,} bytes; ignored")
        if chunk.rstrip().endswith(b"}") and not select.select([fd], [], [], 0.05)[0]:
            try:  # the whole object is here and nothing follows: do not wait for EOF
                json.loads(b"".join(chunks))
                break
            except ValueError:
                continue
    return b"".join(chunks)


def hook_timeout(value: float | None = None) -> float:
    if value is not None:
        return max(value, 0.01)
    try:
        return max(float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT)), 0.01)
    except ValueError:
        return DEFAULT_TIMEOUT


def run_hook(
    agent_name: str,
    stdin: BinaryIO,
    stdout: TextIO,
    stderr: TextIO,
    *,
    path: Path | None = None,
    timeout: float | None = None,
) -> int:
    """The whole hook: read, forward, answer.  Always returns 0."""
    agent = AGENTS.get(agent_name, agent_name)
    try:
        raw = read_stdin(stdin)
        call = parse_hook_input(raw, agent)
    except HookInputError as exc:
        print(f"loopwatch hook {agent_name}: ignored: {exc}", file=stderr)
        return 0
    except Exception as exc:  # never let a hook failure reach the agent
        print(f"loopwatch hook {agent_name}: ignored: {type(exc).__name__}: {exc}", file=stderr)
        return 0
    reached: list[bool] = []
    try:
        messages = exchange(call, path or socket_path(), hook_timeout(timeout), reached)
        reply = answer(call, messages)
    except Exception as exc:
        print(
            f"loopwatch hook {agent_name}: monitor exchange failed: {type(exc).__name__}: {exc}", file=stderr
        )
        return 0
    finally:
        record_contact(call, bool(reached))
    if reply is not None and call.event in ("Stop", "SubagentStop") and "continue" not in reply:
        _count_hold(call)
    if reply is not None:
        text = json.dumps(reply, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped, so the agent still gets the answer
            text = json.dumps(reply)
        stdout.write(text + "\n")
        stdout.flush()
    return 0
