"""The native loopwatch format: one JSON event object per line.

| type            | fields                                                    |
|-----------------|-----------------------------------------------------------|
| ``session_start`` | ``session``, ``agent``, ``pid`` (opt.), ``meta`` (opt.)  |
| ``message``       | ``session``, ``role``, ``content``                       |
| ``tool_call``     | ``session``, ``id``, ``name``, ``args``                  |
| ``tool_result``   | ``session``, ``id``, ``content``, ``is_error``           |
| ``usage``         | ``session``, ``input_tokens``, ``output_tokens``, ``cost_usd`` |
| ``compaction``    | ``session``                                              |
| ``session_end``   | ``session``, ``status`` (opt.)                           |
| ``waiting``       | ``session``, ``content`` (what it asks), ``status`` (why; ``resolved`` ends it) |

Every record may carry ``ts`` (ISO 8601 or epoch seconds).  A log without
``ts`` has every record at the time it was read, so a ``message`` record
without one is its own model response (turn) unless it carries a response id
(``message_id``, ``response_id``, …) shared with the previous one, or
``"continues": true`` (it continues the previous message's response, as a
streamed chunk does).  ``session`` may be
left out when a file holds one session (the file's stem is used).  Unknown
fields go to ``meta``; unknown types are counted and skipped.

A ``usage`` record may name its ``model`` and the cached part of its
``input_tokens`` (``cache_read_input_tokens``, ``cache_creation_input_tokens``,
counted within ``input_tokens``): what a loop costs is priced from them, or
taken from ``cost_usd`` when the record reports it (``monitor/cost.py``).
A ``session_start`` may name the ``model`` in its ``meta``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from monitor.events import (
    KINDS,
    MESSAGE,
    SESSION_END,
    SESSION_START,
    TOOL_CALL,
    TOOL_RESULT,
    USAGE,
    WAITING,
    Event,
    Kind,
)
from monitor.formats.base import RecordDecoder, RecordError

ROLES = frozenset({"user", "assistant", "system"})
_COMMON = {"type", "session", "ts"}
_FIELDS: dict[str, set[str]] = {
    "session_start": {"agent", "pid", "meta", "parent"},
    "message": {"role", "content"},
    "tool_call": {"id", "name", "args"},
    "tool_result": {"id", "content", "is_error"},
    "usage": {"input_tokens", "output_tokens", "cost_usd"},
    "compaction": set(),
    "session_end": {"status"},
    "waiting": {"content", "status"},
}


#: The integers SQLite can store.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_KIND_BY_NAME: dict[str, Kind] = {k.value: k for k in Kind}
#: Per type, the fields that are not ``meta``.
_ALLOWED: dict[str, frozenset[str]] = {name: frozenset(_COMMON | fields) for name, fields in _FIELDS.items()}


#: Milliseconds of 3000-01-01 UTC: above it a number is no epoch time in any unit.
MAX_EPOCH_MS = 32_503_680_000_000


def parse_ts(value: Any, now: float, where: str = "ts") -> float:
    """Epoch seconds from ISO 8601 text or a number; ``now`` when absent."""
    if value is None:
        return now
    if isinstance(value, bool):
        raise RecordError(f"{where}: expected ISO 8601 text or epoch seconds, got {value!r}")
    if isinstance(value, (int, float)):
        # Epoch milliseconds are common too; nothing real is dated after 5138.
        # Beyond the milliseconds of year 3000 it is neither: kept as given, so
        # the out-of-range report quotes the record's own value (1e300, not 1e297).
        return float(value) / 1000.0 if 1e11 < value <= MAX_EPOCH_MS else float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            try:
                return parse_ts(float(value), now, where)
            except ValueError:
                raise RecordError(f"{where}: not an ISO 8601 timestamp: {value[:40]!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    raise RecordError(f"{where}: expected ISO 8601 text or epoch seconds, got {type(value).__name__}")


def _text(record: dict[str, Any], key: str, kind: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordError(f"{kind}.{key}: expected a string, got {type(value).__name__}")
    return value


def _opt_number(record: dict[str, Any], key: str, kind: str, integer: bool) -> Any:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"{kind}.{key}: expected a number, got {type(value).__name__}")
    if (integer and not INT64_MIN <= value <= INT64_MAX) or (
        value.__class__ is float and not math.isfinite(value)
    ):
        # SQLite stores integers in 64 bits: a larger one would be refused by the store.
        raise RecordError(f"{kind}.{key}: {value!r} is out of range (expected a finite number within ±2^63)")
    return int(value) if integer else float(value)


#: What :meth:`NativeDecoder.decode_event` reads from a plain record:
#: (kind, role, content, call id, tool, args, is_error).
_Plain = tuple[Kind, str | None, str, str | None, str | None, dict[str, Any] | None, bool]


def _plain_call(record: dict[str, Any]) -> _Plain | None:
    """A tool call with its five fields and nothing else, of the usual types; else None."""
    tool = record["name"]
    args = record["args"]
    call_id = record["id"]
    if (
        len(record) != 6
        or tool.__class__ is not str
        or not tool
        or args.__class__ is not dict
        or call_id.__class__ is not str
    ):
        return None
    return TOOL_CALL, None, "", call_id, tool, args, False


def _plain_result(record: dict[str, Any]) -> _Plain | None:
    """A tool result with its five fields and nothing else, of the usual types; else None."""
    call_id = record["id"]
    content = record["content"]
    is_error = record["is_error"]
    if (
        len(record) != 6
        or call_id.__class__ is not str
        or content.__class__ is not str
        or is_error.__class__ is not bool
    ):
        return None
    return TOOL_RESULT, None, content, call_id, None, None, is_error


def _plain_message(record: dict[str, Any]) -> _Plain | None:
    """A message with its four fields and nothing else, of the usual types; else None."""
    role = record["role"]
    content = record["content"]
    if len(record) != 5 or role.__class__ is not str or role not in ROLES or content.__class__ is not str:
        return None
    return MESSAGE, role, content, None, None, None, False


def _careful_call(get: Callable[..., Any]) -> tuple[str, dict[str, Any], str | None]:
    """A tool call's name, arguments (``{}`` if none) and id (made a string), checked."""
    tool = get("name")
    if tool.__class__ is not str or not tool:
        if not isinstance(tool, str) or not tool:
            raise RecordError(f"tool_call.name: expected a non-empty string, got {tool!r}")
    args = get("args")
    if args.__class__ is not dict:
        if args is None:
            args = {}
        elif not isinstance(args, dict):
            raise RecordError(f"tool_call.args: expected an object, got {type(args).__name__}")
    call_id = get("id")
    if call_id.__class__ is not str and call_id is not None:
        call_id = str(call_id)
    return tool, args, call_id


class NativeDecoder(RecordDecoder):
    """Decoder for loopwatch's own JSONL events."""

    name = "native"
    session_key = "session"

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        return record.get("type") in KINDS

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        event = self.decode_event(record, line, now)
        return [] if event is None else [event]

    def decode_event(self, record: dict[str, Any], line: int | None, now: float) -> Event | None:
        """The one event of a record (None for a type that is skipped).

        Runs for every line of every native log, so it is flat: a call, result
        or message with every field present, of the usual types, and nothing
        else is built here; anything else goes to :meth:`decode_carefully`,
        which gives the same event or error for these too.  (Subscripts and
        ``__class__ is`` cost a fraction of ``dict.get`` and ``isinstance``;
        the record's length proves it has no other field.)"""
        try:
            kind_name = record["type"]
            session = record["session"]
            ts = record["ts"]
            if session.__class__ is not str or not session or ts.__class__ is not float or ts > 1e11:
                return self.decode_carefully(record, line, now)
            if kind_name == "tool_call":
                fields = _plain_call(record)
            elif kind_name == "tool_result":
                fields = _plain_result(record)
            elif kind_name == "message":
                fields = _plain_message(record)
            else:
                fields = None
        except KeyError:
            fields = None
        if fields is None:
            return self.decode_carefully(record, line, now)
        kind, role, content, call_id, tool, args, is_error = fields
        return Event(kind, session, ts, self.source, line, None, role, content, call_id, tool, args, is_error)

    def decode_carefully(self, record: dict[str, Any], line: int | None, now: float) -> Event | None:
        """:meth:`decode_event` for any record: every check, conversion and
        error message, and unknown fields into ``meta``."""
        # A value of a JSON record is Any until checked below (not "Any | None").
        get: Callable[..., Any] = record.get
        kind_name = get("type")
        if not isinstance(kind_name, str):
            raise RecordError("missing 'type' (expected one of: " + ", ".join(sorted(KINDS)) + ")")
        kind = _KIND_BY_NAME.get(kind_name)  # a dict lookup: Kind(name) is slow
        if kind is None:
            self.skip(kind_name)
            return None
        session = get("session", self.default_session)
        if session.__class__ is not str or not session:
            session = _session(session, kind_name)
        ts = parse_ts(get("ts"), now)
        allowed = _ALLOWED[kind_name]
        meta = {} if record.keys() <= allowed else {k: v for k, v in record.items() if k not in allowed}
        tool: str | None
        args: dict[str, Any] | None
        if kind is TOOL_CALL:
            tool, args, call_id = _careful_call(get)
            role = None
            content = ""
            is_error = False
        elif kind is TOOL_RESULT:
            call_id, content, is_error = _careful_result(record, get, kind_name)
            role = tool = args = None
        elif kind is MESSAGE:
            role, content = _careful_message(record, get, kind_name)
            call_id = tool = args = None
            is_error = False
            if "ts" not in record and "continues" not in record:
                # Without times, records cannot be grouped by closeness: each
                # message is its own response unless it says otherwise.
                meta = {**meta, "untimed": True}
        else:
            return self._decode_other(record, kind, kind_name, session, ts, line, meta)
        return Event(
            kind,
            session,
            ts,
            self.source,
            line,
            role=role,
            content=content,
            call_id=call_id,
            tool=tool,
            args=args,
            is_error=is_error,
            meta=meta,
        )

    def _decode_other(
        self,
        record: dict[str, Any],
        kind: Kind,
        kind_name: str,
        session: str,
        ts: float,
        line: int | None,
        meta: dict[str, Any],
    ) -> Event:
        """Session start and end, usage and compaction: rare, so built plainly."""
        get = record.get
        source = self.source
        event = Event(kind, session, ts, source, line, meta=meta)
        if kind is SESSION_START:
            agent = get("agent")
            if agent is not None and not isinstance(agent, str):
                raise RecordError(f"session_start.agent: expected a string, got {type(agent).__name__}")
            event.agent = agent
            event.pid = _opt_number(record, "pid", kind_name, integer=True)
            extra = get("meta")
            if extra is not None:
                if not isinstance(extra, dict):
                    raise RecordError(f"session_start.meta: expected an object, got {type(extra).__name__}")
                event.meta.update(extra)
            parent = get("parent")
            event.parent = str(parent) if parent is not None else None
        elif kind is USAGE:
            event.input_tokens = _opt_number(record, "input_tokens", kind_name, integer=True)
            event.output_tokens = _opt_number(record, "output_tokens", kind_name, integer=True)
            event.cost_usd = _opt_number(record, "cost_usd", kind_name, integer=False)
        elif kind is SESSION_END:
            status = get("status")
            event.status = None if status is None else str(status)
        elif kind is WAITING:
            status = get("status")
            event.status = None if status is None else str(status)
            event.content = _text(record, "content", kind_name) if "content" in record else ""
        return event


def _careful_result(record: dict[str, Any], get: Callable[..., Any], kind_name: str) -> tuple[Any, str, bool]:
    """A ``tool_result``'s call id, content and error flag, each checked."""
    call_id = get("id")
    if call_id.__class__ is not str and call_id is not None:
        call_id = str(call_id)
    content = get("content")
    if content.__class__ is not str:
        content = _text(record, "content", kind_name)
    is_error = get("is_error", False)
    if is_error.__class__ is not bool:
        raise RecordError(f"tool_result.is_error: expected true or false, got {is_error!r}")
    return call_id, content, is_error


def _careful_message(record: dict[str, Any], get: Callable[..., Any], kind_name: str) -> tuple[Any, str]:
    """A ``message``'s role and content, each checked."""
    role = get("role")
    if role.__class__ is not str or role not in ROLES:  # (a list or an object: unhashable)
        raise RecordError(f"message.role: expected user, assistant or system, got {role!r}")
    content = get("content")
    if content.__class__ is not str:
        content = _text(record, "content", kind_name)
    return role, content


def _session(session: Any, kind_name: str) -> str:
    """A record's ``session`` that is not a plain non-empty string: numbers
    become strings, anything else is an error."""
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        raise RecordError(f"{kind_name}.session: expected a non-empty string, got {session!r}")
    return session
