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


_KIND_BY_NAME: dict[str, Kind] = {k.value: k for k in Kind}
#: Per type, the fields that are not ``meta``.
_ALLOWED: dict[str, frozenset[str]] = {name: frozenset(_COMMON | fields) for name, fields in _FIELDS.items()}


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
        """One record's event.  This runs for every line of every native log:
        each type builds its :class:`Event` in one positional call (setting
        fields one by one afterwards costs twice as much), with the checks of
        the common, valid case first."""
        get = record.get
        kind_name = get("type")
        if not isinstance(kind_name, str):
            raise RecordError("missing 'type' (expected one of: " + ", ".join(sorted(KINDS)) + ")")
        kind = _KIND_BY_NAME.get(kind_name)  # a dict lookup: Kind(name) is slow on the hot path
        if kind is None:
            self.skip(kind_name)
            return []
        session = get("session", self.default_session)
        if session.__class__ is not str or not session:
            session = _session(session, kind_name)
        ts = get("ts")
        if ts.__class__ is float and ts <= 1e11:
            pass  # epoch seconds, the common case: parse_ts would return it as is
        else:
            ts = parse_ts(ts, now)
        # Most records carry only known fields: test that at C speed before building meta.
        allowed = _ALLOWED[kind_name]
        meta = {} if record.keys() <= allowed else {k: v for k, v in record.items() if k not in allowed}
        source = self.source
        if kind is Kind.TOOL_CALL:
            name = get("name")
            if name.__class__ is not str or not name:
                if not isinstance(name, str) or not name:
                    raise RecordError(f"tool_call.name: expected a non-empty string, got {name!r}")
            args = get("args")
            if args is None:
                args = {}
            if not isinstance(args, dict):
                raise RecordError(f"tool_call.args: expected an object, got {type(args).__name__}")
            call_id = get("id")
            return [Event(kind, session, ts, source, line, None, None, "",
                          None if call_id is None else str(call_id), name, args, False,
                          None, None, None, None, None, None, meta)]
        if kind is Kind.TOOL_RESULT:
            call_id = get("id")
            content = _text(record, "content", kind_name)
            is_error = get("is_error", False)
            if not isinstance(is_error, bool):
                raise RecordError(f"tool_result.is_error: expected true or false, got {is_error!r}")
            return [Event(kind, session, ts, source, line, None, None, content,
                          None if call_id is None else str(call_id), None, None, is_error,
                          None, None, None, None, None, None, meta)]
        if kind is Kind.MESSAGE:
            role = get("role")
            if role not in ROLES:
                raise RecordError(f"message.role: expected user, assistant or system, got {role!r}")
            return [Event(kind, session, ts, source, line, None, role, _text(record, "content", kind_name),
                          None, None, None, False, None, None, None, None, None, None, meta)]
        event = Event(kind, session, ts, source, line, None, None, "", None, None, None, False,
                      None, None, None, None, None, None, meta)
        if kind is Kind.SESSION_START:
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
        elif kind is Kind.USAGE:
            event.input_tokens = _opt_number(record, "input_tokens", kind_name, integer=True)
            event.output_tokens = _opt_number(record, "output_tokens", kind_name, integer=True)
            event.cost_usd = _opt_number(record, "cost_usd", kind_name, integer=False)
        elif kind is Kind.SESSION_END:
            status = get("status")
            event.status = None if status is None else str(status)
        return [event]


def _session(session: Any, kind_name: str) -> str:
    """A record's ``session`` that is not a plain non-empty string: numbers
    become strings, anything else is an error."""
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        raise RecordError(f"{kind_name}.session: expected a non-empty string, got {session!r}")
    return session
