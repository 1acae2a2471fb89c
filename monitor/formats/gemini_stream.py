"""Gemini CLI's ``--output-format stream-json``: one JSON event a line on its standard output.

``gemini -p … --output-format stream-json`` (``packages/core/src/output/types.ts``,
``stream-json-formatter.ts``) writes, one a line::

    {"type": "init", "timestamp", "session_id", "model"}
    {"type": "message", "timestamp", "role": "user" | "assistant", "content", "delta"?}
    {"type": "tool_use", "timestamp", "tool_name", "tool_id", "parameters"}
    {"type": "tool_result", "timestamp", "tool_id", "status": "success" | "error",
     "output"?, "error"?: {"type", "message"}}
    {"type": "error", "timestamp", "severity": "warning" | "error", "message"}
    {"type": "result", "timestamp", "status", "error"?, "stats"?: {"input_tokens", "output_tokens", "cached", …}}

| record                                  | events                                   |
|-----------------------------------------|------------------------------------------|
| ``init``                                | the session start (``session_id``, ``model`` in its meta) |
| ``message``                             | a user or assistant message; an assistant ``delta`` chunk right after another continues its response |
| ``tool_use``                            | a tool call                              |
| ``tool_result``                         | its result: ``output`` (or the error's message); an error when ``status`` is ``error`` |
| ``error``                               | a system message                         |
| ``result``                              | the run's usage (``stats``) and its end (``status``) |

The session is named after the file, like Gemini CLI's chats.  Its first line
may be a native ``message`` record (a harness that wrote the prompt first):
:class:`~monitor.formats.lines.LineDecoder` hands the file to this reader when
a later record shows it (``takes_over_native``), the message read the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.gemini import AGENT
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

_MakeEvent = Callable[..., Event]
_ROLES = ("user", "assistant")  # (a tuple: a role may be any JSON value, unhashable too)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value, default=str).decode()


class GeminiStreamDecoder(RecordDecoder):
    """Decoder of Gemini CLI's stream-json events."""

    name = "gemini-stream"
    #: A file first sniffed as native (a plain ``message`` first) is this format's
    #: when a later record says so (:class:`~monitor.formats.lines.LineDecoder`).
    takes_over_native = True

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.ts: float | None = None
        self.started = False
        self.streaming = False  # the last record was an assistant delta
        self.tools: dict[str, str] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        kind = record.get("type")
        if kind == "init":
            return "session_id" in record and "model" in record
        if kind == "tool_use":
            return "tool_name" in record and "tool_id" in record
        if kind == "tool_result":
            return "tool_id" in record and "status" in record
        return False

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        kind = record.get("type")
        when = record.get("timestamp", record.get("ts"))
        if when is not None:
            self.ts = parse_ts(when, now, "timestamp")
        ts = self.ts if self.ts is not None else now

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(
                kind=kind, session=self.default_session, ts=ts, source=self.source, line=line, **fields
            )

        streaming, self.streaming = self.streaming, False
        out: list[Event] = []
        if not self.started:
            self.started = True
            meta = {k: record[k] for k in ("session_id", "model") if isinstance(record.get(k), str)}
            out.append(event(Kind.SESSION_START, agent=AGENT, meta=meta))
            if kind == "init":
                return out
        if kind == "init":
            self.skip("init")
        elif kind == "message":
            out.extend(self._message(event, record, streaming))
        elif kind == "tool_use":
            out.append(self._call(event, record))
        elif kind == "tool_result":
            out.append(self._result(event, record))
        elif kind == "error":
            out.append(event(Kind.MESSAGE, role="system", content=_text(record.get("message"))))
        elif kind == "result":
            out.extend(self._end(event, record))
        else:
            raise RecordError(f"expected a stream-json event type (init, message, tool_use, …), got {kind!r}")
        return out

    def _message(self, event: _MakeEvent, record: dict[str, Any], streaming: bool) -> list[Event]:
        role = record.get("role")
        if role not in _ROLES:
            raise RecordError(f"message: expected a role of user or assistant, got {role!r}")
        text = _text(record.get("content"))
        delta = record.get("delta") is True and role == "assistant"
        self.streaming = delta
        if not text:
            return []
        meta = {"continues": True} if delta and streaming else {}
        return [event(Kind.MESSAGE, role=role, content=text, meta=meta)]

    def _call(self, event: _MakeEvent, record: dict[str, Any]) -> Event:
        tool, call_id = record.get("tool_name"), record.get("tool_id")
        if not isinstance(tool, str) or not tool or not isinstance(call_id, str) or not call_id:
            raise RecordError("tool_use: expected a tool_name and a tool_id")
        args = record.get("parameters")
        if len(self.tools) < 4096:
            self.tools[call_id] = tool
        return event(Kind.TOOL_CALL, tool=tool, args=args if isinstance(args, dict) else {}, call_id=call_id)

    def _result(self, event: _MakeEvent, record: dict[str, Any]) -> Event:
        call_id = record.get("tool_id")
        if not isinstance(call_id, str) or not call_id:
            raise RecordError("tool_result: expected a tool_id")
        error = record.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        content = _text(record.get("output")) or _text(message)
        return event(
            Kind.TOOL_RESULT,
            call_id=call_id,
            tool=self.tools.pop(call_id, None),
            content=content,
            is_error=record.get("status") == "error",
            meta={"status": record["status"]} if isinstance(record.get("status"), str) else {},
        )

    def _end(self, event: _MakeEvent, record: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        stats = record.get("stats")
        if isinstance(stats, dict) and (_int(stats.get("input_tokens")) or _int(stats.get("output_tokens"))):
            cached = _int(stats.get("cached"))
            out.append(
                event(
                    Kind.USAGE,
                    input_tokens=_int(stats.get("input_tokens")),
                    output_tokens=_int(stats.get("output_tokens")),
                    meta={"cached_input_tokens": cached} if cached else {},
                )
            )
        status = record.get("status")
        out.append(event(Kind.SESSION_END, status=status if isinstance(status, str) and status else "ended"))
        return out


register_line_format(GeminiStreamDecoder)
