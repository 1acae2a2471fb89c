"""Gemini CLI chats (``~/.gemini/tmp/<project>/chats/session-*.json`` and ``.jsonl``).

Gemini CLI records a chat as one JSON document, rewritten on every update::

    {"sessionId", "projectHash", "startTime", "lastUpdated", "kind"?,
     "messages": [{"id", "timestamp", "type": "user" | "gemini" | "info" |
                   "error" | "warning", "content", "thoughts"?, "tokens"?,
                   "model"?, "toolCalls"?: [{"id", "name", "args", "result",
                   "status", "timestamp", "resultDisplay"?}]}]}

Newer versions append JSON lines instead: a header record with the same
top-level keys, then message records, ``{"$set": {...}}`` updates, and a
message appended again under the same ``id`` once its tool calls finished
(the last copy wins: only what the earlier copies lacked is new).

| record                                  | events                                   |
|-----------------------------------------|------------------------------------------|
| ``user``                                | a user message (``content`` text or ``[{text}]`` parts) |
| ``gemini`` ``content``                  | an assistant message                     |
| ``gemini`` ``toolCalls[]``              | a tool call each (``id``, ``name``, ``args``) |
| a tool call's ``result`` / final ``status`` | its result: the ``functionResponse.response`` ``output`` (or ``error``, or ``resultDisplay``); an error when ``status`` is ``error`` or ``cancelled`` or the response has an ``error`` |
| ``gemini`` ``tokens``                   | usage (``input``, ``output``, ``cached``) |
| ``error``                               | a system message                         |

``thoughts``, ``info`` and ``warning`` records are skipped (counted).  Times
are each record's ``timestamp`` (a result's: its call's).
"""

from __future__ import annotations

from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

AGENT = "gemini-cli"
_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_DONE = frozenset({"success", "error", "cancelled"})
#: Message ids remembered for re-appended copies (bounded: a chat can be endless).
_MEMORY = 4096


def is_chat(document: Any) -> bool:
    """True for a Gemini CLI chat document."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("messages"), list)
        and "projectHash" in document
        and "sessionId" in document
    )


def parts_text(value: Any) -> str:
    """The text of a ``PartListUnion``: a string, or parts with ``text``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    return ""


def _response(call: dict[str, Any]) -> tuple[str, bool]:
    """A tool call's output and whether its response says it failed."""
    result = call.get("result")
    parts = result if isinstance(result, list) else [result]
    texts: list[str] = []
    failed = False
    for part in parts:
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            if response.get("error"):
                failed = True
                texts.append(str(response["error"]))
            elif response.get("output") is not None:
                output = response["output"]
                texts.append(output if isinstance(output, str) else orjson.dumps(output).decode())
        elif isinstance(part, str):
            texts.append(part)
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(texts), failed


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class GeminiDecoder(RecordDecoder):
    """Decoder of Gemini CLI chat records (a document's messages, or JSON lines)."""

    name = "gemini"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.session = default_session
        self.ts: float | None = None
        self.started = False
        #: What was emitted per message id: its text, its calls, its answered calls.
        self._seen: dict[str, tuple[bool, set[str], set[str]]] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        if "projectHash" in record and "sessionId" in record:
            return True
        return record.get("type") in ("user", "gemini") and "id" in record and "timestamp" in record

    def header(self, record: dict[str, Any], line: int | None, now: float) -> Event:
        """The session start a chat's top-level keys give."""
        self.started = True
        meta: dict[str, Any] = {}
        for key, name in (("sessionId", "session_id"), ("projectHash", "project_hash"), ("kind", "kind")):
            if isinstance(record.get(key), str):
                meta[name] = record[key]
        when = record.get("startTime")
        ts = parse_ts(when, now, "startTime") if when is not None else now
        self.ts = self.ts if self.ts is not None else ts
        return Event(
            kind=Kind.SESSION_START,
            session=self.session,
            ts=ts,
            source=self.source,
            line=line,
            agent=AGENT,
            meta=meta,
        )

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        if "projectHash" in record and "sessionId" in record and "type" not in record:
            return [] if self.started else [self.header(record, line, now)]
        if "$set" in record:
            self.skip("$set")
            return []
        kind = record.get("type")
        if not isinstance(kind, str) or kind not in _TYPES:
            raise RecordError(f"message: expected a type ({', '.join(sorted(_TYPES))}), got {kind!r}")
        if record.get("timestamp") is not None:
            self.ts = parse_ts(record["timestamp"], now, "timestamp")
        ts = self.ts if self.ts is not None else now
        out: list[Event] = []
        if not self.started:
            out.append(self.header({}, None, ts))

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

        given = record.get("id")
        ident = given if isinstance(given, str) else f"line-{line}"
        texted, called, answered = self._seen.get(ident, (False, set(), set()))
        if len(self._seen) >= _MEMORY and ident not in self._seen:
            self._seen.pop(next(iter(self._seen)))
        text = parts_text(record.get("content"))
        if kind in ("info", "warning"):
            self.skip(kind)
        elif text.strip() and not texted:
            role = {"user": "user", "gemini": "assistant"}.get(kind, "system")
            out.append(event(Kind.MESSAGE, role=role, content=text))
            texted = True
        if kind == "gemini":
            out.extend(self._calls(event, record, called, answered))
        self._seen[ident] = (texted, called, answered)
        return out

    def _calls(self, event: Any, record: dict[str, Any], called: set[str], answered: set[str]) -> list[Event]:
        out: list[Event] = []
        tokens = record.get("tokens")
        if isinstance(tokens, dict) and not called and not answered and (_int(tokens.get("total")) or 0) > 0:
            cached = _int(tokens.get("cached"))
            meta: dict[str, Any] = {"cached_input_tokens": cached} if cached else {}
            if isinstance(record.get("model"), str):
                meta["model"] = record["model"]
            out.append(
                event(
                    Kind.USAGE,
                    input_tokens=_int(tokens.get("input")),
                    output_tokens=_int(tokens.get("output")),
                    meta=meta,
                )
            )
        calls = record.get("toolCalls")
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                continue
            call_id = str(call.get("id") or f"{call['name']}-{len(called)}")
            if call_id not in called:
                args = call.get("args") if isinstance(call.get("args"), dict) else {}
                out.append(event(Kind.TOOL_CALL, tool=call["name"], args=args, call_id=call_id))
                called.add(call_id)
            status = call.get("status")
            if call_id in answered or (call.get("result") is None and status not in _DONE):
                continue
            content, failed = _response(call)
            out.append(
                event(
                    Kind.TOOL_RESULT,
                    tool=call["name"],
                    call_id=call_id,
                    content=content,
                    is_error=failed or status in ("error", "cancelled"),
                    meta={"status": status} if isinstance(status, str) else {},
                )
            )
            answered.add(call_id)
        return out


register_line_format(GeminiDecoder)
