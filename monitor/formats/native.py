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

Every record may carry ``ts`` (ISO 8601 or epoch seconds).  ``session`` may be
left out when a file holds one session (the file's stem is used).  Unknown
fields go to ``meta``; unknown types are counted and skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from monitor.events import KINDS, Event, Kind
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
}


def parse_ts(value: Any, now: float, where: str = "ts") -> float:
    """Epoch seconds from ISO 8601 text or a number; ``now`` when absent."""
    if value is None:
        return now
    if isinstance(value, bool):
        raise RecordError(f"{where}: expected ISO 8601 text or epoch seconds, got {value!r}")
    if isinstance(value, (int, float)):
        # Epoch milliseconds are common too; nothing real is dated after 5138.
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            try:
                return parse_ts(float(value), now, where)
            except ValueError:
                raise RecordError(f"{where}: not an ISO 8601 timestamp: {value[:40]!r}") from None
        if parsed.tzinfo is None:
            from datetime import timezone

            parsed = parsed.replace(tzinfo=timezone.utc)
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
    return int(value) if integer else float(value)


class NativeDecoder(RecordDecoder):
    """Decoder for loopwatch's own JSONL events."""

    name = "native"

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        return record.get("type") in KINDS

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        kind_name = record.get("type")
        if not isinstance(kind_name, str):
            raise RecordError("missing 'type' (expected one of: " + ", ".join(sorted(KINDS)) + ")")
        if kind_name not in KINDS:
            self.skip(kind_name)
            return []
        kind = Kind(kind_name)
        session = record.get("session", self.default_session)
        if isinstance(session, (int, float)) and not isinstance(session, bool):
            session = str(session)
        if not isinstance(session, str) or not session:
            raise RecordError(f"{kind_name}.session: expected a non-empty string, got {session!r}")
        known = _FIELDS[kind_name]
        meta = {k: v for k, v in record.items() if k not in _COMMON and k not in known}
        event = Event(kind=kind, session=session, ts=parse_ts(record.get("ts"), now),
                      source=self.source, line=line, meta=meta)
        if kind is Kind.SESSION_START:
            agent = record.get("agent")
            if agent is not None and not isinstance(agent, str):
                raise RecordError(f"session_start.agent: expected a string, got {type(agent).__name__}")
            event.agent = agent
            event.pid = _opt_number(record, "pid", kind_name, integer=True)
            extra = record.get("meta")
            if extra is not None:
                if not isinstance(extra, dict):
                    raise RecordError(f"session_start.meta: expected an object, got {type(extra).__name__}")
                event.meta.update(extra)
            parent = record.get("parent")
            event.parent = str(parent) if parent is not None else None
        elif kind is Kind.MESSAGE:
            role = record.get("role")
            if role not in ROLES:
                raise RecordError(f"message.role: expected user, assistant or system, got {role!r}")
            event.role = role
            event.content = _text(record, "content", kind_name)
        elif kind is Kind.TOOL_CALL:
            name = record.get("name")
            if not isinstance(name, str) or not name:
                raise RecordError(f"tool_call.name: expected a non-empty string, got {name!r}")
            args = record.get("args")
            if args is None:
                args = {}
            if not isinstance(args, dict):
                raise RecordError(f"tool_call.args: expected an object, got {type(args).__name__}")
            event.tool = name
            event.args = args
            event.call_id = None if record.get("id") is None else str(record.get("id"))
        elif kind is Kind.TOOL_RESULT:
            event.call_id = None if record.get("id") is None else str(record.get("id"))
            event.content = _text(record, "content", kind_name)
            is_error = record.get("is_error", False)
            if not isinstance(is_error, bool):
                raise RecordError(f"tool_result.is_error: expected true or false, got {is_error!r}")
            event.is_error = is_error
        elif kind is Kind.USAGE:
            event.input_tokens = _opt_number(record, "input_tokens", kind_name, integer=True)
            event.output_tokens = _opt_number(record, "output_tokens", kind_name, integer=True)
            event.cost_usd = _opt_number(record, "cost_usd", kind_name, integer=False)
        elif kind is Kind.SESSION_END:
            status = record.get("status")
            event.status = None if status is None else str(status)
        return [event]
