"""GitHub Copilot CLI session state (``~/.copilot/session-state/<id>/events.jsonl``).

Copilot CLI appends one typed event a line to each session's log (older
versions: ``session-state/<id>.jsonl``)::

    {"type": "session.start" | "user.message" | "assistant.message" |
             "tool.execution_start" | "tool.execution_complete" | …,
     "data": {…}, "id", "timestamp", "parentId"}

| record                                  | events                                   |
|-----------------------------------------|------------------------------------------|
| ``session.start`` / ``session.resume``  | the session start (``sessionId``, ``copilotVersion``, ``context.cwd`` in its meta) |
| ``user.message``                        | a user message (``content``: what the person typed, not ``transformedContent``) |
| ``assistant.message``                   | ``content`` an assistant message (its ``messageId`` the response's); each of ``toolRequests[]`` a tool call |
| ``tool.execution_start``                | a tool call, unless its ``toolRequests`` entry was one |
| ``tool.execution_complete``             | the result of ``toolCallId``: ``result.content`` (or ``error.message``); an error when ``success`` is false |
| ``assistant.usage``                     | usage (``inputTokens``, ``outputTokens``, ``cacheReadTokens``) |
| ``session.compaction_complete``         | a compaction                             |
| ``session.error``                       | a system message                         |
| ``session.shutdown``                    | the session's end; its ``modelMetrics`` usage when no ``assistant.usage`` came |

Everything else (``system.message``, ``session.model_change``, turn starts and
ends, streaming ``*_delta`` records, hooks, subagent bookkeeping) is skipped
(counted).  The session is the ``sessionId``; the ``line`` is the file's line,
the time each record's ``timestamp``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

AGENT = "copilot-cli"
_NAMESPACES = ("session.", "user.", "assistant.", "tool.", "system.", "subagent.", "hook.", "skill.", "abort")
#: Calls remembered to tell a ``tool.execution_start`` already announced (bounded).
_MEMORY = 4096

_MakeEvent = Callable[..., Event]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value, default=str).decode()


def _result_text(data: dict[str, Any]) -> str:
    result, error = data.get("result"), data.get("error")
    if isinstance(result, dict) and result.get("content") is not None:
        return _text(result["content"])
    if isinstance(error, dict) and error.get("message") is not None:
        return _text(error["message"])
    return _text(result if result is not None else error)


class CopilotDecoder(RecordDecoder):
    """Decoder of Copilot CLI session events."""

    name = "copilot"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.session = default_session
        self.ts: float | None = None
        self.calls: dict[str, str] = {}  # call id -> tool name, until answered
        self.usage_seen = False

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        kind = record.get("type")
        return (
            isinstance(kind, str)
            and kind.startswith(_NAMESPACES)
            and isinstance(record.get("data"), dict)
            and "timestamp" in record
        )

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        kind, data = record.get("type"), record.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict):
            raise RecordError("Copilot event: expected a type and a data object")
        if record.get("timestamp") is not None:
            self.ts = parse_ts(record["timestamp"], now, "timestamp")
        ts = self.ts if self.ts is not None else now

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

        handler = _HANDLERS.get(kind)
        if handler is None:
            self.skip(kind)
            return []
        return handler(self, event, data)

    def _start(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        if isinstance(data.get("sessionId"), str) and data["sessionId"]:
            self.session = data["sessionId"]
        meta: dict[str, Any] = {}
        if isinstance(data.get("copilotVersion"), str):
            meta["copilot_version"] = data["copilotVersion"]
        context = data.get("context")
        if isinstance(context, dict) and isinstance(context.get("cwd"), str):
            meta["cwd"] = context["cwd"]
        return [event(Kind.SESSION_START, agent=AGENT, meta=meta)]

    def _user(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        text = _text(data.get("content"))
        return [event(Kind.MESSAGE, role="user", content=text)] if text.strip() else []

    def _assistant(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        meta = {"message_id": data["messageId"]} if isinstance(data.get("messageId"), str) else {}
        text = _text(data.get("content"))
        if text.strip():
            out.append(event(Kind.MESSAGE, role="assistant", content=text, meta=meta))
        requests = data.get("toolRequests")
        for request in requests if isinstance(requests, list) else ():
            if isinstance(request, dict):
                found = self._call(
                    event, request.get("toolCallId"), request.get("name"), request.get("arguments")
                )
                out.extend(found)
        return out

    def _call(self, event: _MakeEvent, call_id: Any, tool: Any, args: Any) -> list[Event]:
        if not isinstance(call_id, str) or not call_id or not isinstance(tool, str) or not tool:
            raise RecordError("tool call: expected a toolCallId and a name")
        if call_id in self.calls:
            return []
        if len(self.calls) >= _MEMORY:
            self.calls.pop(next(iter(self.calls)))
        self.calls[call_id] = tool
        if isinstance(args, str):
            args = {"arguments": args}
        return [
            event(Kind.TOOL_CALL, tool=tool, args=args if isinstance(args, dict) else {}, call_id=call_id)
        ]

    def _started(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        return self._call(event, data.get("toolCallId"), data.get("toolName"), data.get("arguments"))

    def _complete(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        call_id = data.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise RecordError("tool.execution_complete: expected a toolCallId")
        return [
            event(
                Kind.TOOL_RESULT,
                call_id=call_id,
                tool=self.calls.get(call_id),
                content=_result_text(data),
                is_error=data.get("success") is False,
            )
        ]

    def _usage(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        self.usage_seen = True
        cached = _int(data.get("cacheReadTokens"))
        meta: dict[str, Any] = {"cached_input_tokens": cached} if cached else {}
        if isinstance(data.get("model"), str):
            meta["model"] = data["model"]
        spent = _int(data.get("inputTokens")), _int(data.get("outputTokens"))
        return [event(Kind.USAGE, input_tokens=spent[0], output_tokens=spent[1], meta=meta)]

    def _shutdown(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        metrics = data.get("modelMetrics")
        if not self.usage_seen and isinstance(metrics, dict):
            spent_in = spent_out = 0
            for model in metrics.values():
                usage = model.get("usage") if isinstance(model, dict) else None
                if isinstance(usage, dict):
                    spent_in += _int(usage.get("inputTokens")) or 0
                    spent_out += _int(usage.get("outputTokens")) or 0
            if spent_in or spent_out:
                out.append(event(Kind.USAGE, input_tokens=spent_in, output_tokens=spent_out))
        status = data.get("shutdownType")
        out.append(event(Kind.SESSION_END, status=status if isinstance(status, str) and status else "ended"))
        return out

    def _compaction(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        return [event(Kind.COMPACTION)]

    def _error(self, event: _MakeEvent, data: dict[str, Any]) -> list[Event]:
        return [event(Kind.MESSAGE, role="system", content=_text(data.get("message") or data))]


_HANDLERS: dict[str, Callable[[CopilotDecoder, _MakeEvent, dict[str, Any]], list[Event]]] = {
    "session.start": CopilotDecoder._start,
    "session.resume": CopilotDecoder._start,
    "user.message": CopilotDecoder._user,
    "assistant.message": CopilotDecoder._assistant,
    "tool.execution_start": CopilotDecoder._started,
    "tool.execution_complete": CopilotDecoder._complete,
    "assistant.usage": CopilotDecoder._usage,
    "session.shutdown": CopilotDecoder._shutdown,
    "session.compaction_complete": CopilotDecoder._compaction,
    "session.error": CopilotDecoder._error,
}

register_line_format(CopilotDecoder)
