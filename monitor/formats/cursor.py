"""Cursor agent transcripts (``~/.cursor/projects/<project>/agent-transcripts/<id>/<id>.jsonl``).

Cursor's agent (the IDE's and the ``cursor-agent`` CLI's) appends one JSON
record a line to a session's transcript, in the Anthropic message shape with
no envelope (Cursor is closed source; the shape is the one several
independent public readers of real transcripts describe)::

    {"role": "user" | "assistant",
     "message": {"content": "text" | [{"type": "text", "text"},
                                      {"type": "tool_use", "name", "input", "id"?},
                                      {"type": "tool_result", "tool_use_id", "content"}, …]}}
    {"type": "turn_ended", "status": "success" | "error" | "aborted", "error"?}

| record                                  | events                                   |
|-----------------------------------------|------------------------------------------|
| ``user`` text                           | a user message, Cursor's ``<user_query>`` wrapper removed |
| ``assistant`` text                      | an assistant message (``thinking`` / ``redacted`` blocks and ``"[REDACTED]"`` text blocks are skipped) |
| ``tool_use``                            | a tool call                              |
| ``tool_result`` (when Cursor kept one)  | the result of ``tool_use_id``; an error when ``is_error`` |
| ``turn_ended`` with ``status: error`` or ``aborted`` | a system message (``error``, e.g. "User aborted/interrupted manually.") |

There are no times and no token counts: every record takes the time it is
read (``now``), and each assistant record is one response.  The session is
named after the file; the ``line`` is the file's line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.registry import register_line_format

AGENT = "cursor"
_ROLES = ("user", "assistant")  # (a tuple: a role may be any JSON value, unhashable too)
#: What Cursor wraps a person's text in: ``<user_query>…</user_query>`` (and a ``<timestamp>`` before it).
_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)

_MakeEvent = Callable[..., Event]
#: The text block Cursor writes in place of what it does not keep (the agent's reasoning).
_REDACTED = "[REDACTED]"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return orjson.dumps(value, default=str).decode()


class CursorDecoder(RecordDecoder):
    """Decoder of Cursor agent transcript records."""

    name = "cursor"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.started = False
        self.calls = 0

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        if "type" in record:
            return record.get("type") == "turn_ended" and "status" in record and len(record) <= 3
        message = record.get("message")
        return (
            record.get("role") in _ROLES
            and isinstance(message, dict)
            and "content" in message
            and not {"kind", "raw", "uuid", "sessionId"} & record.keys()
        )

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        def event(kind: Kind, **fields: Any) -> Event:
            return Event(
                kind=kind, session=self.default_session, ts=now, source=self.source, line=line, **fields
            )

        out: list[Event] = []
        if not self.started:
            self.started = True
            out.append(event(Kind.SESSION_START, agent=AGENT))
        if "type" in record:
            if record.get("type") != "turn_ended":
                raise RecordError(f"expected a message or turn_ended record, got type {record.get('type')!r}")
            status = record.get("status")
            if status in ("error", "aborted"):
                out.append(
                    event(Kind.MESSAGE, role="system", content=_text(record.get("error")) or f"turn {status}")
                )
            else:
                self.skip("turn_ended")
            return out
        role, message = record.get("role"), record.get("message")
        if role not in _ROLES or not isinstance(message, dict):
            raise RecordError("expected a role of user or assistant and a message object")
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": _text(content)}]
        meta = {"message_id": f"line-{line}"} if role == "assistant" else {}
        texts: list[str] = []
        acts: list[Event] = []
        for block in blocks:
            if isinstance(block, dict):
                acts.extend(self._block(event, block, texts, line))
        text = "\n".join(t for t in texts if t.strip())
        if role == "user":
            query = _QUERY.search(text)
            text = query.group(1) if query else text
        if text.strip():
            out.append(event(Kind.MESSAGE, role=role, content=text, meta=meta))
        return out + acts

    def _block(
        self, event: _MakeEvent, block: dict[str, Any], texts: list[str], line: int | None
    ) -> list[Event]:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if block["text"].strip() == _REDACTED:
                self.skip("redacted")  # (what Cursor keeps of the agent's reasoning: nothing to compare)
            else:
                texts.append(block["text"])
        elif kind == "tool_use" and isinstance(block.get("name"), str) and block["name"]:
            self.calls += 1
            call_id = (
                block.get("id")
                if isinstance(block.get("id"), str) and block["id"]
                else f"cursor-{line}-{self.calls}"
            )
            args = block.get("input")
            return [
                event(
                    Kind.TOOL_CALL,
                    tool=block["name"],
                    args=args if isinstance(args, dict) else {},
                    call_id=call_id,
                )
            ]
        elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
            failed = block.get("is_error") is True
            return [
                event(
                    Kind.TOOL_RESULT,
                    call_id=block["tool_use_id"],
                    content=_text(block.get("content")),
                    is_error=failed,
                )
            ]
        else:
            self.skip(f"block:{kind}" if isinstance(kind, str) else "block")
        return []


register_line_format(CursorDecoder)
