"""Goose sessions: the SQLite ``sessions.db`` (``~/.local/share/goose/sessions/``).

Goose (block/goose, schema version 5 and later) keeps a table ``sessions``
(``id`` such as ``20251202_1``, ``name``, ``working_dir``, ``session_type``,
token totals) and a table ``messages`` (``id INTEGER PRIMARY KEY
AUTOINCREMENT``, ``session_id``, ``role`` user | assistant, ``content_json``:
the message's content list, ``created_timestamp``: epoch seconds,
``metadata_json``: ``{userVisible, agentVisible}``).  A message is inserted
whole once it is complete, so new rows are new steps.

| content ``type``                      | events                                   |
|---------------------------------------|------------------------------------------|
| ``text``                              | a message of the row's role (a user message the user does not see, ``userVisible: false``, is the harness's: a system message) |
| ``toolRequest`` / ``frontendToolRequest`` | a tool call: ``toolCall.value`` ``name``, ``arguments``; id ``id`` (a ``toolCall`` with ``status: error``: a call ``invalid_tool_call``, answered by Goose's failed response) |
| ``toolResponse``                      | the result of call ``id``: the ``text`` of ``toolResult.value`` (``{content, isError}``, or the older content list); ``status: error`` or ``isError`` → an error |

``thinking``, ``redactedThinking``, ``image``, ``toolConfirmationRequest``,
``actionRequired`` and ``systemNotification`` are skipped (counted).  The
"line" of an event is the message's ``id``; its time ``created_timestamp``.
When Goose rewrites a conversation (``replace_conversation``: its rows
deleted and inserted again under new ids), a message already read (same
session, role, time and content) is not read twice.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem
from monitor.formats.sqlite_db import load_rows

AGENT = "goose"
_SKIPPED = frozenset(
    {
        "thinking",
        "redactedThinking",
        "image",
        "toolConfirmationRequest",
        "actionRequired",
        "systemNotification",
    }
)
#: Messages remembered to skip a rewritten conversation's copies (bounded).
_MEMORY = 50_000
BATCH = 2000
_QUERY = "SELECT id, session_id, role, content_json, created_timestamp, metadata_json FROM messages "


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _texts(items: Any) -> str:
    if not isinstance(items, list):
        return ""
    return "\n".join(i["text"] for i in items if isinstance(i, dict) and isinstance(i.get("text"), str))


class MessageReader:
    """Turns Goose message rows into events, each message once."""

    def __init__(self, source: str):
        self.source = source
        self.seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.started: set[str] = set()
        self.sessions: dict[str, dict[str, Any]] = {}
        self.skipped: dict[str, int] = {}

    def read(self, row: tuple[Any, ...]) -> tuple[list[Event], list[Problem]]:
        line, session, role, content_json, created, metadata_json = row
        line, session = int(line), str(session)
        digest = hashlib.blake2b(
            f"{role}\0{created}\0{content_json}".encode(errors="replace"), digest_size=12
        )
        key = (session, digest.hexdigest())
        if key in self.seen:
            self.skip("rewritten message")
            return [], []
        self.seen[key] = None
        if len(self.seen) > _MEMORY:
            self.seen.popitem(last=False)
        try:
            content = orjson.loads(content_json)
        except (orjson.JSONDecodeError, TypeError) as exc:
            return [], [Problem(self.source, line, f"content_json is not JSON ({exc})")]
        if not isinstance(content, list):
            return [], [
                Problem(self.source, line, f"content_json: expected a list, got {type(content).__name__}")
            ]
        ts = float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else 0.0
        out: list[Event] = []
        if session not in self.started:
            self.started.add(session)
            out.append(self._start(session, ts))
        visible = _dict(_metadata(metadata_json)).get("userVisible", True) is not False

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=session, ts=ts, source=self.source, line=line, **fields)

        for item in content:
            out.extend(self._item(event, _dict(item), role, visible))
        return out, []

    def skip(self, what: str) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + 1

    def _start(self, session: str, ts: float) -> Event:
        info = self.sessions.get(session, {})
        meta = {
            name: info[key]
            for key, name in (("name", "title"), ("working_dir", "cwd"), ("session_type", "type"))
            if isinstance(info.get(key), str) and info[key]
        }
        return Event(
            kind=Kind.SESSION_START, session=session, ts=ts, source=self.source, agent=AGENT, meta=meta
        )

    def _item(
        self, event: Callable[..., Event], item: dict[str, Any], role: Any, visible: bool
    ) -> list[Event]:
        kind = item.get("type")
        if kind == "text":
            text = item.get("text")
            if not isinstance(text, str) or not text.strip():
                return []
            who = "assistant" if role == "assistant" else ("user" if visible else "system")
            return [event(Kind.MESSAGE, role=who, content=text)]
        if kind in ("toolRequest", "frontendToolRequest"):
            return _request(event, item)
        if kind == "toolResponse":
            return [_response(event, item)]
        self.skip(kind if isinstance(kind, str) and kind in _SKIPPED else "unknown content")
        return []


def _metadata(raw: Any) -> Any:
    try:
        return orjson.loads(raw) if isinstance(raw, (str, bytes)) else None
    except orjson.JSONDecodeError:
        return None


def _request(event: Callable[..., Event], item: dict[str, Any]) -> list[Event]:
    call = _dict(item.get("toolCall"))
    call_id = str(item.get("id") or "")
    value = _dict(call.get("value"))
    if call.get("status") == "error" or not isinstance(value.get("name"), str):
        # A call the model got wrong: Goose answers it with a failed toolResponse of this id.
        error = call.get("error") if isinstance(call.get("error"), str) else "invalid tool call"
        return [event(Kind.TOOL_CALL, tool="invalid_tool_call", args={"error": error}, call_id=call_id)]
    args = value.get("arguments") if isinstance(value.get("arguments"), dict) else {}
    return [event(Kind.TOOL_CALL, tool=value["name"], args=args, call_id=call_id)]


def _response(event: Callable[..., Event], item: dict[str, Any]) -> Event:
    result = _dict(item.get("toolResult"))
    call_id = str(item.get("id") or "")
    if result.get("status") == "error":
        error = result.get("error")
        return event(
            Kind.TOOL_RESULT, call_id=call_id, content=error if isinstance(error, str) else "", is_error=True
        )
    value = result.get("value")
    if isinstance(value, dict):  # a CallToolResult {content, isError}
        return event(
            Kind.TOOL_RESULT,
            call_id=call_id,
            content=_texts(value.get("content")),
            is_error=value.get("isError") is True,
        )
    return event(Kind.TOOL_RESULT, call_id=call_id, content=_texts(value))  # the older list of contents


def session_info(connection: sqlite3.Connection, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Name, folder and type of the sessions ``ids`` (the columns this database has)."""
    have = {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
    wanted = [c for c in ("id", "name", "working_dir", "session_type") if c in have]
    ids = list(ids)
    if "id" not in wanted or not ids:
        return {}
    marks = ",".join("?" * len(ids))
    query = f"SELECT {', '.join(wanted)} FROM sessions WHERE id IN ({marks})"  # noqa: S608 (names checked)
    return {str(r[0]): dict(zip(wanted, r, strict=True)) for r in connection.execute(query, ids)}


def read_after(
    connection: sqlite3.Connection, reader: MessageReader, after: int, limit: int = BATCH
) -> tuple[list[tuple[Any, ...]], int]:
    """The next message rows after id ``after``, and the last id read."""
    found = list(connection.execute(_QUERY + "WHERE id > ? ORDER BY id LIMIT ?", (after, limit)))
    new = {str(r[1]) for r in found} - set(reader.sessions)
    if new:
        reader.sessions.update(session_info(connection, new))
        for session in new:
            reader.sessions.setdefault(session, {})
    return found, max((int(r[0]) for r in found), default=after)


def load_db(path: Path) -> tuple[list[Event], list[Problem]]:
    """Every event of a Goose ``sessions.db``, in message id order."""
    reader = MessageReader(str(path))
    return load_rows(path, lambda connection, after: read_after(connection, reader, after), reader.read)


__all__ = ["AGENT", "MessageReader", "load_db", "read_after"]
