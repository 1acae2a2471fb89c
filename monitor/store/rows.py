"""Conversions between the event model and the store's event and detection
rows, and the SQL that inserts them (session rows: :mod:`monitor.store.sessions`).

Rows are built in the caller's thread (so the writer queue holds bounded
copies, never a 10 MB tool output) and turned back into :class:`Event` objects
for ``scan --db``.

The bounded copy of a long content keeps its head and its tail with a marker
in between: detectors look at the first and last 2,000 characters of a result
(:func:`monitor.text.clip`), so with the default 4,000 characters a re-scan of
stored events sees exactly what the live engine saw.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

from monitor.detect.base import Detection
from monitor.events import Event, Kind, Level

#: Column order of an event row (``seq`` is filled in by the writer thread).
EVENT_COLUMNS = (
    "session",
    "seq",
    "ts",
    "type",
    "role",
    "tool",
    "call_id",
    "args",
    "is_error",
    "content",
    "content_length",
    "content_hash",
    "file",
    "line",
    "agent",
    "status",
    "pid",
    "parent",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "meta",
)
SEQ = EVENT_COLUMNS.index("seq")

DETECTION_COLUMNS = (
    "session",
    "ts",
    "seq",
    "detector",
    "level",
    "level_rank",
    "score",
    "pattern",
    "count",
    "tool",
    "message",
    "nudge",
    "suppressed",
    "evidence",
    "cost",
    "file",
    "line",
)
DETECTION_SEQ = DETECTION_COLUMNS.index("seq")

#: Strings inside a detection's evidence references are clipped to this.
EVIDENCE_CHARS = 400
#: Strings inside args/meta are clipped to this many characters at least.
MIN_ARG_CHARS = 200
#: A whole args/meta JSON larger than this (or 8 × content_chars) is replaced.
MIN_JSON_CHARS = 16_000


def safe_text(text: str | None) -> str | None:
    """``text`` as valid UTF-8: lone surrogates (undecodable bytes that a
    decoder kept with ``surrogateescape``) would make SQLite reject the row."""
    if text is None:
        return None
    if text.isascii():
        return text  # the common case, without encoding a copy
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:  # the original bytes, each invalid one shown as U+FFFD
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:  # surrogates that never were bytes
            return text.encode("utf-8", "replace").decode("utf-8")


def content_hash(text: str) -> str:
    """blake2b-128 of the UTF-8 text, hex (stable across runs and machines)."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def bounded(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail
    (``limit`` characters in all) around a marker naming what was left out."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    head = limit // 2
    tail = limit - head
    omitted = len(text) - limit
    return f"{text[:head]}\n[… {omitted:,} characters omitted …]\n{text[-tail:]}"


def _clip_strings(value: Any, limit: int, depth: int = 0) -> Any:
    if isinstance(value, str):
        return safe_text(value if len(value) <= limit else value[:limit])
    if depth > 20:
        return "…"
    if isinstance(value, dict):
        return {str(k): _clip_strings(v, limit, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip_strings(v, limit, depth + 1) for v in value]
    return value


_SCALARS = (int, float, bool, type(None))


def _flat_and_short(value: dict, limit: int) -> bool:
    """A dict of string keys and scalar or short-string values, which
    :func:`_clip_strings` would leave exactly as it is."""
    for key, item in value.items():
        if key.__class__ is not str:
            return False
        if item.__class__ is str:
            if len(item) > limit:
                return False
        elif not isinstance(item, _SCALARS):
            return False
    return True


def bounded_json(value: Any, content_chars: int) -> str | None:
    """``value`` as JSON with long strings clipped and the whole bounded."""
    if value is None:
        return None
    limit = max(content_chars, MIN_ARG_CHARS)
    if value.__class__ is dict and _flat_and_short(value, limit):
        # Nothing to clip or convert: dump it as it is.  A text orjson
        # refuses (a lone surrogate) falls through to the careful path.
        try:
            text = orjson.dumps(value).decode()
        except TypeError:
            pass
        else:
            if len(text) <= max(8 * content_chars, MIN_JSON_CHARS):
                return text
    clipped = _clip_strings(value, limit)
    try:
        text = orjson.dumps(clipped, default=str).decode()
    except TypeError:
        text = json.dumps(clipped, default=str, ensure_ascii=True)
    limit = max(8 * content_chars, MIN_JSON_CHARS)
    if len(text) > limit:
        text = orjson.dumps({"…": f"too large to store: {len(text):,} characters of JSON"}).decode()
    return text


#: ``Kind.value`` is a Python-level property: a dict lookup is cheaper per row.
_KIND_VALUE = {kind: kind.value for kind in Kind}


#: The integers SQLite can store (``INTEGER`` is 64-bit signed).
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def sqlite_int(value: Any) -> Any:
    """``value`` in a form SQLite takes: an integer beyond 64 bits (which would
    make the whole batch fail with OverflowError) becomes a REAL, or its text."""
    if value is None or value.__class__ is not int or INT64_MIN <= value <= INT64_MAX:
        return value
    try:
        return float(value)
    except OverflowError:
        return str(value)


def event_row(event: Event, content_chars: int) -> list[Any]:
    """The row for one event, in :data:`EVENT_COLUMNS` order."""
    content = event.content or ""
    pid, tokens_in, tokens_out = event.pid, event.input_tokens, event.output_tokens
    if pid is not None or tokens_in is not None or tokens_out is not None:
        pid, tokens_in, tokens_out = sqlite_int(pid), sqlite_int(tokens_in), sqlite_int(tokens_out)
    return [
        safe_text(event.session),
        event.seq,
        event.ts,
        _KIND_VALUE[event.kind],
        event.role,
        safe_text(event.tool),
        safe_text(event.call_id),
        bounded_json(event.args, content_chars),
        1 if event.is_error else 0,
        safe_text(bounded(content, content_chars)),
        len(content),
        content_hash(content) if content else None,
        safe_text(event.source) or None,
        event.line,
        safe_text(event.agent),
        safe_text(event.status),
        pid,
        safe_text(event.parent),
        tokens_in,
        tokens_out,
        event.cost_usd,
        bounded_json(event.meta, content_chars) if event.meta else None,
    ]


def detection_row(detection: Detection) -> list[Any]:
    """The row for one detection, in :data:`DETECTION_COLUMNS` order."""
    evidence = [ref.to_dict() for ref in detection.evidence]
    return [
        safe_text(detection.session),
        detection.ts,
        detection.seq or None,
        detection.detector,
        detection.level.label,
        int(detection.level),
        float(detection.score),
        safe_text(detection.pattern),
        detection.count,
        safe_text(detection.tool),
        safe_text(detection.message),
        safe_text(detection.nudge),
        detection.suppressed,
        bounded_json(evidence, EVIDENCE_CHARS),
        orjson.dumps(detection.cost).decode() if detection.cost else None,
        safe_text(detection.source) or None,
        detection.line,
    ]


def _loads(text: Any) -> Any:
    """Decode a JSON column (a value already decoded passes through)."""
    return orjson.loads(text) if isinstance(text, str) else text


def event_dict(row: dict[str, Any]) -> dict[str, Any]:
    """A stored event row with its JSON columns decoded."""
    out = dict(row)
    out["args"] = _loads(row.get("args"))
    out["meta"] = _loads(row.get("meta")) or {}
    out["is_error"] = bool(row.get("is_error"))
    return out


def detection_dict(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    evidence = _loads(row.get("evidence"))
    out["evidence"] = evidence if isinstance(evidence, list) else []
    cost = _loads(row.get("cost"))
    out["cost"] = cost if isinstance(cost, dict) else None
    return out


def event_from_row(row: dict[str, Any]) -> Event:
    """Rebuild the :class:`Event` a stored row (raw or from :func:`event_dict`)
    came from; its content is the bounded copy."""
    return Event(
        kind=Kind(row["type"]),
        session=row["session"],
        ts=row["ts"],
        source=row.get("file") or "",
        line=row.get("line"),
        agent=row.get("agent"),
        role=row.get("role"),
        content=row.get("content") or "",
        call_id=row.get("call_id"),
        tool=row.get("tool"),
        args=_loads(row.get("args")),
        is_error=bool(row.get("is_error")),
        input_tokens=row.get("input_tokens"),
        output_tokens=row.get("output_tokens"),
        cost_usd=row.get("cost_usd"),
        status=row.get("status"),
        pid=row.get("pid"),
        parent=row.get("parent"),
        meta=_loads(row.get("meta")) or {},
        seq=row.get("seq") or 0,
    )


def level_rank(value: str | int | Level | None) -> int | None:
    """The numeric rank of a level label (``None`` stays ``None``)."""
    if value is None:
        return None
    return int(Level.parse(value))


EVENT_INSERT = (
    f"INSERT OR IGNORE INTO events ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EVENT_COLUMNS)})"
)
DETECTION_INSERT = (
    f"INSERT INTO detections ({', '.join(DETECTION_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in DETECTION_COLUMNS)})"
)
