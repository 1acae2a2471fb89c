"""Gemini CLI saved histories: the Gemini API's content list, as one JSON document.

Gemini CLI writes the conversation it sends to the model as a list of Gemini
API ``Content`` objects when a chat is saved or shared (``/chat save <tag>``:
``~/.gemini/tmp/<project>/checkpoint-<tag>.json``, ``{"history": [...],
"authType"?}``, older versions the bare list; ``/chat share file.json``: the
bare list; ``packages/core/src/core/logger.ts``)::

    [{"role": "user" | "model",
      "parts": [{"text", "thought"?}, {"functionCall": {"id", "name", "args"}},
                {"functionResponse": {"id", "name", "response": {"output" | "error"}}}]}]

| part                                    | events                                   |
|-----------------------------------------|------------------------------------------|
| ``user`` ``text``                        | a user message                           |
| ``user`` ``text`` ``<state_snapshot>…``  | a compaction (the chat was compressed into it) |
| ``model`` ``text``                       | an assistant message (``thought`` parts are skipped) |
| ``functionCall``                         | a tool call                              |
| ``functionResponse``                     | the result of the call with its ``id`` (else the oldest unanswered call of that name); an error when ``response.error`` is set |

Gemini CLI's own context (``<session_context>``) and its canned reply to it
are skipped (counted).  There are no times: a content is one second after the
one before, the last one as old as the file.  The ``line`` of an event is the
**1-based index of its content in the list**.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem, RecordError
from monitor.formats.gemini import AGENT

_ROLES = ("user", "model")  # (a tuple: a role may be any JSON value, unhashable too)
#: A content list's first bytes: ``[{"role": "user", "parts": [`` (or under ``history``).
_HEAD = re.compile(rb'\A\s*(?:\{\s*"history"\s*:\s*)?\[\s*\{\s*"(?:role|parts)"\s*:')
#: What Gemini CLI itself puts in the history (environment, its reply to it).
_CONTEXT = ("<session_context>",)
_CANNED = "Got it. Thanks for the additional context!"


def looks_like_history(head: bytes) -> bool:
    """True when a document's first bytes are a Gemini content list's."""
    return _HEAD.match(head) is not None and b'"parts"' in head and b'"role"' in head


def contents(document: Any) -> list[Any] | None:
    """The content list of a saved history (bare, or under ``history``), else None."""
    if isinstance(document, dict) and set(document) <= {"history", "authType", "clientHistory"}:
        document = document.get("history")
    if not isinstance(document, list) or not document:
        return None
    head = [c for c in document[:5] if isinstance(c, dict)]
    if not head or head[0].get("role") not in _ROLES or not isinstance(head[0].get("parts"), list):
        return None
    return document if all("parts" in c and "content" not in c for c in head) else None


class _History:
    """The calls of one history being read, to pair responses with them."""

    def __init__(self, source: str, session: str):
        self.source = source
        self.session = session
        self.ts = 0.0
        self.pending: dict[str, str] = {}  # call id -> tool name, in call order
        self.skipped: dict[str, int] = {}

    def event(self, kind: Kind, line: int, **fields: Any) -> Event:
        return Event(kind=kind, session=self.session, ts=self.ts, source=self.source, line=line, **fields)

    def skip(self, what: str) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + 1

    def content(self, item: dict[str, Any], line: int) -> list[Event]:
        role, parts = item.get("role"), item.get("parts")
        if role not in _ROLES:
            raise RecordError(f"content: expected a role of user or model, got {role!r}")
        if not isinstance(parts, list):
            raise RecordError(f"parts: expected a list, got {type(parts).__name__}")
        out: list[Event] = []
        for n, part in enumerate(parts):
            if isinstance(part, dict):
                out.extend(self._part(part, role, line, n))
        return out

    def _part(self, part: dict[str, Any], role: str, line: int, n: int) -> list[Event]:
        call, response = part.get("functionCall"), part.get("functionResponse")
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            call_id = str(call.get("id") or f"{call['name']}-{line}-{n}")
            self.pending[call_id] = call["name"]
            args = call.get("args") if isinstance(call.get("args"), dict) else {}
            return [self.event(Kind.TOOL_CALL, line, tool=call["name"], args=args, call_id=call_id)]
        if isinstance(response, dict):
            return self._response(response, line)
        text = part.get("text")
        if not isinstance(text, str) or not text.strip():
            return []
        if part.get("thought") is True:
            self.skip("thought")
            return []
        if role == "model":
            if text.strip() == _CANNED:
                self.skip("context reply")
                return []
            return [self.event(Kind.MESSAGE, line, role="assistant", content=text)]
        if text.lstrip().startswith(_CONTEXT):
            self.skip("session context")
            return []
        if text.lstrip().startswith("<state_snapshot>"):
            return [self.event(Kind.COMPACTION, line)]
        return [self.event(Kind.MESSAGE, line, role="user", content=text)]

    def _response(self, response: dict[str, Any], line: int) -> list[Event]:
        name = response.get("name")
        call_id = response.get("id")
        if not isinstance(call_id, str) or call_id not in self.pending:
            call_id = next((i for i, n in self.pending.items() if n == name), None)
        if call_id is None:
            self.skip("response without a call")
            return []
        tool = self.pending.pop(call_id)
        body = response.get("response")
        body = body if isinstance(body, dict) else {"output": body}
        failed = bool(body.get("error"))
        value = body.get("error") if failed else body.get("output", body)
        content = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        return [
            self.event(Kind.TOOL_RESULT, line, tool=tool, call_id=call_id, content=content, is_error=failed)
        ]


def load(document: Any, source: str, session: str, base: float) -> tuple[list[Event], list[Problem]]:
    """Every event of a saved Gemini CLI history, and what was wrong with it."""
    items = contents(document)
    if items is None:
        return [], [Problem(source, None, "not a Gemini content list (expected [{role, parts}, ...])")]
    history = _History(source, session)
    history.ts = base - len(items)
    events = [
        Event(kind=Kind.SESSION_START, session=session, ts=history.ts, source=source, line=None, agent=AGENT)
    ]
    problems: list[Problem] = []
    for index, item in enumerate(items, start=1):
        history.ts = base - len(items) + index
        if not isinstance(item, dict):
            problems.append(Problem(source, index, f"content: expected an object, got {type(item).__name__}"))
            continue
        try:
            events.extend(history.content(item, index))
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
    return events, problems
