"""Anthropic managed-agents session event logs, one event a line.

A managed-agents session's events (``session.*``, ``agent.*``, ``span.*``,
``user.*``), as exported one JSON object a line with the API event under
``raw``::

    {"role": "agent" | "system" | "user", "kind": "tool_use" | "tool_result" |
     "message" | "thinking" | "model_request_end" | …, "time", "tool"?,
     "content"?, "raw": {"id", "type", "name"?, "input"?, "tool_use_id"?,
                         "is_error"?, "model_usage"?, …}}

| record                                | events                                   |
|---------------------------------------|------------------------------------------|
| ``tool_use``                          | a tool call (``raw.name``, ``raw.input``, id ``raw.id``) |
| ``tool_result``                       | the result of ``raw.tool_use_id``; an error when ``raw.is_error`` |
| ``message`` (agent / user)            | an assistant / user message              |
| ``define_outcome`` (user)             | the task: a user message (``raw.description``) |
| ``model_request_end``                 | usage (``raw.model_usage``)              |
| ``error`` (system)                    | a system message (``raw.error.message``) |

Everything else (``thinking``, status changes, outcome evaluation spans, the
session's ``usage`` totals, ``interrupt``) is skipped (counted).  The ``line``
is the file's line; times are each record's ``time``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

AGENT = "anthropic-managed-agents"
_ROLES = frozenset({"agent", "system", "user"})


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _args(record: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    given = raw.get("input")
    if isinstance(given, dict):
        return given
    content = record.get("content")
    if isinstance(content, str):
        try:
            parsed = orjson.loads(content)
        except orjson.JSONDecodeError:
            return {"input": content}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {}


class ManagedAgentsDecoder(RecordDecoder):
    """Decoder of managed-agents session events, one a line."""

    name = "managed-agents"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.ts: float | None = None
        self.started = False
        self.tools: dict[str, str] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        return (
            "type" not in record
            and record.get("role") in _ROLES
            and isinstance(record.get("kind"), str)
            and isinstance(record.get("raw"), dict)
        )

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        kind, role, raw = record.get("kind"), record.get("role"), record.get("raw")
        if not isinstance(kind, str) or role not in _ROLES:
            raise RecordError("event: expected a kind and a role (agent, system, user)")
        raw = raw if isinstance(raw, dict) else {}
        if record.get("time") is not None:
            self.ts = parse_ts(record["time"], now, "time")
        ts = self.ts if self.ts is not None else now

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(
                kind=kind, session=self.default_session, ts=ts, source=self.source, line=line, **fields
            )

        out = [] if self.started else [event(Kind.SESSION_START, agent=AGENT)]
        self.started = True
        out.extend(self._events(kind, str(role), record, raw, event))
        return out

    def _events(
        self, kind: str, role: str, record: dict[str, Any], raw: dict[str, Any], event: Callable[..., Event]
    ) -> list[Event]:
        if kind == "tool_use":
            tool = raw.get("name") if isinstance(raw.get("name"), str) else record.get("tool")
            if not isinstance(tool, str) or not tool:
                raise RecordError("tool_use: expected a tool name")
            given = raw.get("id")
            ident = given if isinstance(given, str) and given else f"{tool}-{len(self.tools)}"
            if len(self.tools) < 100_000:
                self.tools[ident] = tool
            return [event(Kind.TOOL_CALL, tool=tool, args=_args(record, raw), call_id=ident)]
        if kind == "tool_result":
            call_id = raw.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise RecordError("tool_result: expected raw.tool_use_id")
            content = record.get("content")
            text = content if isinstance(content, str) else _text(raw.get("content"))
            failed = raw.get("is_error") is True
            return [
                event(
                    Kind.TOOL_RESULT,
                    tool=self.tools.get(call_id),
                    call_id=call_id,
                    content=text,
                    is_error=failed,
                )
            ]
        if kind == "model_request_end":
            usage = raw.get("model_usage")
            if isinstance(usage, dict):
                cached = _int(usage.get("cache_read_input_tokens"))
                return [
                    event(
                        Kind.USAGE,
                        input_tokens=_int(usage.get("input_tokens")),
                        output_tokens=_int(usage.get("output_tokens")),
                        meta={"cached_input_tokens": cached} if cached else {},
                    )
                ]
            return []
        text = _text(record.get("content")) or _text(raw.get("content"))
        if kind == "define_outcome":
            text = _text(raw.get("description"))
        elif kind == "error" and isinstance(raw.get("error"), dict):
            text = text or _text(raw["error"].get("message"))
        if kind in ("message", "define_outcome", "error") and text.strip():
            who = {"agent": "assistant", "user": "user"}.get(role, "system")
            return [event(Kind.MESSAGE, role="user" if kind == "define_outcome" else who, content=text)]
        self.skip(kind)
        return []


register_line_format(ManagedAgentsDecoder)
