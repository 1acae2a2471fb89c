"""Codex CLI rollouts (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One ``{"timestamp", "type", "payload"}`` record a line.  What becomes an event:

| record                                        | event                        |
|-----------------------------------------------|------------------------------|
| ``session_meta`` (or the first record)         | ``session_start`` (agent ``codex``) |
| ``function_call`` (``arguments``: JSON text)   | ``tool_call``                |
| ``custom_tool_call`` (``input``: free text)    | ``tool_call`` (args ``{"input": …}``) |
| ``local_shell_call`` (``action``)              | ``tool_call`` (tool ``local_shell``) |
| ``web_search_call`` with a query               | ``tool_call`` (tool ``web_search``) |
| ``*_output`` with the call's ``call_id``       | ``tool_result``              |
| ``message`` with role ``assistant``            | ``message`` (assistant)      |
| ``event_msg`` ``user_message``                 | ``message`` (user)           |
| ``compacted``                                  | ``compaction``               |
| ``event_msg`` ``token_count``                  | ``usage`` (per API call)     |

Usage carries the model of the latest ``turn_context`` (``meta.model``) and
its cached input (``meta.cached_input_tokens``, part of ``input_tokens``):
what a loop costs is priced from them (``monitor/cost.py``).

A user turn resets the detectors' streaks.  Codex records what the person
typed as an ``event_msg`` ``user_message``; the ``response_item`` user
messages beside it also carry AGENTS.md instructions and the environment
context, so they are skipped (as are ``developer``/``system`` messages).
Rollouts from before the envelope format (bare response items after a
``{"id", "timestamp", "instructions"}`` header) have no ``user_message``
events; there, user messages that are not injected context count instead.

A subagent's rollout (``session_meta`` ``source.subagent.thread_spawn``
with ``parent_thread_id``) is the session ``<parent>:agent-<id>``, linked to
its parent (``Event.parent``): the name the Codex hook gives the same
subagent.  A subagent or fork (``forked_from_id``) rollout opens with its
parent's history copied in, every record stamped within a moment of the
fork; records within ``REPLAY_SECONDS`` of its ``session_meta`` are that
copy and skipped (counted), so the parent's calls are not counted twice.

A call carries the reply it came in (``meta["reply"]``): the response items
after an output or a user turn, up to the next one, are one model reply, so
the calls a reply made together (parallel calls, written before any of their
outputs) share it.

Arguments that are not valid JSON (Codex redacts or truncates some) are kept
as text under ``{"arguments": …}``.  A tool output that is JSON with
``metadata.exit_code`` (or text saying "Process exited with code N" / "Exit
code: N") with a nonzero code is an error result, and so is the code-mode
``exec`` tool's output that begins "Script failed".
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.compressed import plain_name
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format
from monitor.ide_context import typed_request

AGENT = "codex"
_ENVELOPE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
#: Response item types of the pre-envelope rollouts that may open a file.
_BARE_TYPES = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "reasoning",
    }
)
_ROLLOUT_ID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
_SCRIPT_FAILED = "Script failed"
#: User text Codex injects as context rather than a person typing it.
_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<user_shell_command>",
)
_PENDING_CALLS = 256
#: How long after a fork's or subagent's start its copy of the parent's history is stamped.
REPLAY_SECONDS = 1.0


def _spawned_by(payload: dict[str, Any]) -> str | None:
    """The parent thread of a subagent rollout (``source.subagent.thread_spawn``)."""
    source = payload.get("source")
    subagent = source.get("subagent") if isinstance(source, dict) else None
    spawn = subagent.get("thread_spawn") if isinstance(subagent, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    if not isinstance(parent, str) or not parent:
        parent = payload.get("parent_thread_id") if isinstance(subagent, dict) else None
    return parent if isinstance(parent, str) and parent else None


def rollout_session_id(path: str) -> str | None:
    """The session id in ``rollout-YYYY-MM-DDTHH-MM-SS-<uuid>.jsonl``."""
    stem = plain_name(Path(path).name)
    for suffix in (".jsonl", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    match = _ROLLOUT_ID.search(stem)
    return match.group(1) if match else None


def content_text(content: Any) -> str:
    """Text of a Codex content value: a string or ``input_text``/``output_text`` items."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict):
                if isinstance(item.get("text"), str):
                    parts.append(item["text"])
                elif item.get("type") in ("input_image", "image"):
                    parts.append("[image]")
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A function call's arguments as an object; text that is not a JSON object stays text."""
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"arguments": raw}
        return value if isinstance(value, dict) else {"arguments": value}
    return {"arguments": raw}


def parse_output(output: Any) -> tuple[str, bool, int | None]:
    """(text, is_error, exit code) of a tool output in any of Codex's shapes."""
    exit_code: int | None = None
    is_error = False
    if isinstance(output, dict):
        # {"content": …, "success": bool} (function output payload)
        text = content_text(output.get("content", output.get("output")))
        if output.get("success") is False:
            is_error = True
        return text, is_error, None
    if isinstance(output, list):
        # Content items; the code-mode ``exec`` tool's begin "Script completed" or
        # "Script failed" (a script that threw, or whose command failed).
        text = content_text(output)
        if text.startswith(_SCRIPT_FAILED):
            return text, True, _exit_code(text)
        exit_code = _exit_code(text)
        return text, exit_code not in (None, 0), exit_code
    if not isinstance(output, str):
        return ("" if output is None else str(output)), False, None
    text = output
    stripped = output.lstrip()
    if stripped.startswith("{"):
        try:
            value = json.loads(output)
        except ValueError:
            value = None
        if isinstance(value, dict) and "output" in value:
            text = value["output"] if isinstance(value["output"], str) else json.dumps(value["output"])
            metadata = value.get("metadata")
            if isinstance(metadata, dict) and isinstance(metadata.get("exit_code"), int):
                exit_code = metadata["exit_code"]
    if exit_code is None:
        exit_code = _exit_code(text)
    return text, exit_code not in (None, 0), exit_code


def _exit_code(text: str) -> int | None:
    """The exit code a tool output reports in its text ("Exit code: 1"), if any."""
    match = _EXIT_CODE.search(text[:2000])
    return int(match.group(1)) if match else None


@register_line_format
class CodexDecoder(RecordDecoder):
    """Decoder for one Codex rollout file."""

    name = "codex"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.session = rollout_session_id(source) or default_session
        self.started = False
        self.legacy = False  # pre-envelope rollout: user turns come from response items
        self.calls: OrderedDict[str, str] = OrderedDict()  # call_id -> tool name
        self._usage_total: int | None = None
        self.model: str | None = None  # from turn_context: what its usage is priced at
        self.parent: str | None = None  # a subagent's parent thread
        #: A fork or subagent rollout opens with its parent's history copied in, all stamped
        #: within a moment of the fork: records before this time are that copy.
        self.replayed_until: float | None = None
        #: The model reply being written (its number), and whether one is open: an
        #: output or a user turn closes it, the next response item opens the next.
        self.reply = 0
        self.in_reply = False

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        if not isinstance(record.get("type"), (str, type(None))):
            return False
        if record.get("type") in _ENVELOPE_TYPES and isinstance(record.get("payload"), dict):
            return True
        # Pre-envelope header line, or a bare response item of that format.
        if "type" not in record and "instructions" in record and "id" in record:
            return True
        return (
            record.get("type") in _BARE_TYPES
            and "call_id" in record
            or (record.get("type") == "reasoning" and "summary" in record)
        )

    def _event(self, kind: Kind, ts: float, line: int | None, **fields: Any) -> Event:
        return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

    def _start(self, ts: float, line: int | None, meta: dict[str, Any]) -> Event:
        self.started = True
        return self._event(Kind.SESSION_START, ts, line, agent=AGENT, meta=meta, parent=self.parent)

    # -- records --------------------------------------------------------------

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        kind = record.get("type")
        ts = parse_ts(record.get("timestamp"), now, "timestamp")
        if kind is None and "instructions" in record:
            self.legacy = True
            return self._session_meta(record, line, ts)
        if not isinstance(kind, str) or kind not in _ENVELOPE_TYPES:
            if "payload" not in record and isinstance(kind, str):
                # Pre-envelope rollouts hold bare response items.
                self.legacy = True
                return self._with_start(self._response_item(record, line, ts), line, ts)
            self.skip(str(kind))
            return []
        payload = record.get("payload")
        if not isinstance(payload, dict):
            raise RecordError(f"{kind}.payload: expected an object, got {type(payload).__name__}")
        if kind == "session_meta":
            return self._session_meta(payload, line, ts)
        if self.replayed_until is not None:
            if ts < self.replayed_until:
                self.skip("replayed from the parent")
                return []
            self.replayed_until = None  # the rollout's own records: never suppressed again
        if kind == "response_item":
            events = self._response_item(payload, line, ts)
        elif kind == "event_msg":
            events = self._event_msg(payload, line, ts)
        elif kind == "compacted":
            meta = {}
            if isinstance(payload.get("message"), str):
                meta["summary_chars"] = len(payload["message"])
            events = [self._event(Kind.COMPACTION, ts, line, meta=meta)]
        else:
            if kind == "turn_context" and isinstance(payload.get("model"), str) and payload["model"]:
                self.model = payload["model"]
            self.skip(kind)  # turn_context
            events = []
        return self._with_start(events, line, ts)

    def _with_start(self, events: list[Event], line: int | None, ts: float) -> list[Event]:
        """Prefix a session_start when the file began without a session_meta."""
        if self.started or not events:
            return events
        return [self._start(ts, line, {}), *events]

    def _session_meta(self, payload: dict[str, Any], line: int | None, ts: float) -> list[Event]:
        if self.started:
            self.skip("session_meta (again)")  # forks and resumes repeat it
            return []
        session_id = payload.get("id")
        if isinstance(session_id, str) and session_id:
            self.session = session_id
        parent = _spawned_by(payload)
        if parent is not None:
            # Named as the hook names a subagent, so both paths give one session.
            self.parent = parent
            self.session = f"{parent}:agent-{self.session}"
        if parent is not None or isinstance(payload.get("forked_from_id"), str):
            self.replayed_until = ts + REPLAY_SECONDS
        meta: dict[str, Any] = {}
        for key, name in (
            ("cli_version", "version"),
            ("cwd", "cwd"),
            ("originator", "originator"),
            ("model_provider", "model_provider"),
            ("source", "origin"),
        ):
            value = payload.get(key)
            if isinstance(value, str) and value:
                meta[name] = value
        return [self._start(ts, line, meta)]

    def _response_item(self, payload: dict[str, Any], line: int | None, ts: float) -> list[Event]:
        item = payload.get("type")
        if not isinstance(item, str):
            self.skip("response_item:<no type>")
            return []
        if item == "message":
            return self._message(payload, line, ts)
        if item.endswith("_output") and "call_id" in payload:
            self.in_reply = False
            return [self._result(payload, line, ts)]
        self._open_reply()
        if item in _CALL_TYPES:
            return self._call(item, payload, line, ts)
        self.skip(f"response_item:{item}")  # reasoning, unknown
        return []

    def _open_reply(self) -> None:
        """A model response item: the first after an output or a user turn begins a reply."""
        if not self.in_reply:
            self.reply += 1
            self.in_reply = True

    def _message(self, payload: dict[str, Any], line: int | None, ts: float) -> list[Event]:
        role = payload.get("role")
        text = content_text(payload.get("content")).strip()
        if role == "assistant":
            self._open_reply()
            if not text:
                return []
            return [self._event(Kind.MESSAGE, ts, line, role="assistant", content=text)]
        if role == "user" and self.legacy and text and not text.startswith(_INJECTED_PREFIXES):
            self.in_reply = False
            return self._user_message(text, ts, line)
        # developer/system instructions; user items duplicate event_msg user_message
        # or carry injected context.
        self.skip(f"message:{role}")
        return []

    def _call(self, item: str, payload: dict[str, Any], line: int | None, ts: float) -> list[Event]:
        call_id = payload.get("call_id") or payload.get("id")
        call_id = None if call_id is None else str(call_id)
        if item == "function_call":
            tool = payload.get("name")
            args = parse_arguments(payload.get("arguments"))
        elif item == "custom_tool_call":
            tool = payload.get("name")
            raw = payload.get("input")
            args = raw if isinstance(raw, dict) else {"input": raw}
        elif item == "local_shell_call":
            tool = "local_shell"
            action = payload.get("action")
            args = action if isinstance(action, dict) else {"action": action}
        else:  # web_search_call: without its query every search would look alike
            tool = "web_search"
            action = payload.get("action")
            if not isinstance(action, dict) or not (
                action.get("query") or action.get("queries") or action.get("url")
            ):
                self.skip("web_search_call (no query)")
                return []
            args = action
        if not isinstance(tool, str) or not tool:
            raise RecordError(f"{item}.name: expected a tool name, got {tool!r}")
        if call_id is not None:
            self.calls[call_id] = tool
            if len(self.calls) > _PENDING_CALLS:
                self.calls.popitem(last=False)
        meta = {"reply": f"reply-{self.reply}"}
        return [self._event(Kind.TOOL_CALL, ts, line, tool=tool, args=args, call_id=call_id, meta=meta)]

    def _result(self, payload: dict[str, Any], line: int | None, ts: float) -> Event:
        call_id = str(payload.get("call_id"))
        text, is_error, exit_code = parse_output(payload.get("output"))
        meta = {} if exit_code is None else {"exit_code": exit_code}
        return self._event(
            Kind.TOOL_RESULT,
            ts,
            line,
            call_id=call_id,
            content=text,
            is_error=is_error,
            tool=self.calls.pop(call_id, None),
            meta=meta,
        )

    def _event_msg(self, payload: dict[str, Any], line: int | None, ts: float) -> list[Event]:
        item = payload.get("type")
        if not isinstance(item, str):
            self.skip("event_msg:<no type>")
            return []
        if item == "user_message":
            text = payload.get("message")
            text = text if isinstance(text, str) else content_text(text)
            self.in_reply = False
            return self._user_message(text, ts, line)
        if item == "token_count":
            return self._usage(payload, line, ts)
        self.skip(f"event_msg:{item}")  # agent_message duplicates the response item, etc.
        return []

    def _user_message(self, text: str, ts: float, line: int | None) -> list[Event]:
        """What the person typed, without the IDE extension's context before it
        (nothing when that leaves no request)."""
        text, context = typed_request(text)
        if not text.strip():
            return []
        meta = {"ide_context": context} if context else {}
        return [self._event(Kind.MESSAGE, ts, line, role="user", content=text, meta=meta)]

    def _usage(self, payload: dict[str, Any], line: int | None, ts: float) -> list[Event]:
        """One usage event per API call: Codex repeats each token_count, so a
        count whose running total has not moved is the same call again."""
        info = payload.get("info")
        if not isinstance(info, dict):
            return []
        total = info.get("total_token_usage")
        last = info.get("last_token_usage")
        total_tokens = total.get("total_tokens") if isinstance(total, dict) else None
        if isinstance(total_tokens, int):
            if total_tokens == self._usage_total:
                return []
            self._usage_total = total_tokens
        if not isinstance(last, dict):
            return []

        def number(key: str) -> int | None:
            value = last.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        meta: dict[str, Any] = {
            k: v for k in ("cached_input_tokens", "reasoning_output_tokens") if (v := number(k)) is not None
        }
        if self.model:
            meta["model"] = self.model
        return [
            self._event(
                Kind.USAGE,
                ts,
                line,
                input_tokens=number("input_tokens"),
                output_tokens=number("output_tokens"),
                meta=meta,
            )
        ]
