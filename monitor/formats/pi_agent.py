"""pi-agent session JSONL (the ``pi`` coding agent, and OpenClaw built on it).

pi-agent appends one JSON record a line to its session file; the first is the
session header, the rest form a tree by ``id`` / ``parentId``::

    {"type": "session", "version": 3, "id", "timestamp", "cwd"}
    {"type": "model_change" | "thinking_level_change" | "custom", …}
    {"type": "compaction", "id", "parentId", "timestamp", …}
    {"type": "message", "id", "parentId", "timestamp", "message": {
        "role": "user" | "assistant" | "toolResult",
        "content": [{"type": "text", "text"} | {"type": "thinking", …} |
                    {"type": "toolCall", "id", "name", "arguments"}],
        "usage"?: {"input", "output", "cacheRead", "cost": {"total"}},
        "toolCallId"?, "toolName"?, "isError"?, "details"?: {"exitCode"}}}

| record                          | events                                   |
|---------------------------------|------------------------------------------|
| ``session``                     | the session start (``id``, ``cwd`` in meta) |
| user ``text``                   | a user message                           |
| assistant ``text``              | an assistant message (``thinking`` skipped) |
| assistant ``toolCall``          | a tool call (``id``, ``name``, ``arguments``) |
| assistant ``usage``             | usage (``input``, ``output``, ``cacheRead``, ``cost.total``) |
| ``toolResult``                  | the result of ``toolCallId``; an error when ``isError`` or ``details.exitCode`` is not 0 |
| ``compaction``                  | a compaction                             |

Other record types are skipped (counted).  The ``line`` is the file's line;
times are each record's ``timestamp``.  A file is recognised by its header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

AGENT = "pi-agent"
_ROLES = frozenset({"user", "assistant", "toolResult"})


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _texts(content: Any, kind: str = "text") -> str:
    if isinstance(content, str):
        return content if kind == "text" else ""
    blocks = content if isinstance(content, list) else []
    return "\n".join(
        b["text"]
        for b in blocks
        if isinstance(b, dict) and b.get("type") == kind and isinstance(b.get("text"), str)
    )


class PiAgentDecoder(RecordDecoder):
    """Decoder of pi-agent session records, one a line."""

    name = "pi-agent"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.ts: float | None = None
        self.tools: dict[str, str] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        return record.get("type") == "session" and "version" in record and "cwd" in record and "id" in record

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        kind = record.get("type")
        if not isinstance(kind, str):
            raise RecordError(f"record: expected a type, got {type(kind).__name__}")
        if record.get("timestamp") is not None:
            self.ts = parse_ts(record["timestamp"], now, "timestamp")
        ts = self.ts if self.ts is not None else now

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(
                kind=kind, session=self.default_session, ts=ts, source=self.source, line=line, **fields
            )

        if kind == "session":
            meta = {k: record[k] for k in ("id", "cwd", "version") if isinstance(record.get(k), (str, int))}
            return [event(Kind.SESSION_START, agent=AGENT, meta=meta)]
        if kind == "compaction":
            return [event(Kind.COMPACTION)]
        if kind != "message":
            self.skip(kind)
            return []
        message = record.get("message")
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise RecordError("message: expected an object with a role (user, assistant, toolResult)")
        role = message["role"]
        if role == "toolResult":
            return [self._result(message, event)]
        text = _texts(message.get("content"))
        out = [event(Kind.MESSAGE, role=role, content=text)] if text.strip() else []
        if role == "assistant":
            out.extend(self._calls(message, event))
        return out

    def _calls(self, message: dict[str, Any], event: Callable[..., Event]) -> list[Event]:
        out: list[Event] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            name, ident = block.get("name"), block.get("id")
            if not isinstance(name, str) or not name:
                raise RecordError("toolCall: expected a name")
            args = block.get("arguments")
            args = args if isinstance(args, dict) else ({} if args is None else {"arguments": args})
            call_id = ident if isinstance(ident, str) and ident else f"{name}-{len(self.tools)}"
            if len(self.tools) < 100_000:
                self.tools[call_id] = name
            out.append(event(Kind.TOOL_CALL, tool=name, args=args, call_id=call_id))
        usage = message.get("usage")
        if isinstance(usage, dict) and (_number(usage.get("input")) or _number(usage.get("output"))):
            cost = usage.get("cost")
            total = _number(cost.get("total")) if isinstance(cost, dict) else None
            cached = _number(usage.get("cacheRead"))
            meta: dict[str, Any] = {"cached_input_tokens": int(cached)} if cached else {}
            if isinstance(message.get("model"), str):
                meta["model"] = message["model"]
            tokens_in, tokens_out = _number(usage.get("input")), _number(usage.get("output"))
            out.append(
                event(
                    Kind.USAGE,
                    input_tokens=None if tokens_in is None else int(tokens_in),
                    output_tokens=None if tokens_out is None else int(tokens_out),
                    cost_usd=total,
                    meta=meta,
                )
            )
        return out

    def _result(self, message: dict[str, Any], event: Callable[..., Event]) -> Event:
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise RecordError("toolResult: expected a toolCallId")
        tool = (
            message.get("toolName") if isinstance(message.get("toolName"), str) else self.tools.get(call_id)
        )
        details = message.get("details")
        code = details.get("exitCode") if isinstance(details, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        failed = message.get("isError") is True or (code is not None and code != 0)
        return event(
            Kind.TOOL_RESULT,
            tool=tool,
            call_id=call_id,
            content=_texts(message.get("content")),
            is_error=failed,
            meta={} if code is None else {"exit_code": code},
        )


register_line_format(PiAgentDecoder)
