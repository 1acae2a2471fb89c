"""Uniform rows for the detail screen, from live objects or store rows.

A live session hands the UI :class:`~monitor.detect.base.Detection` objects and
the hub's ``ActionRecord``; a stored one hands it dicts from
:class:`~monitor.store.Store`.  These adapters turn both into the same small
rows so one set of widgets shows a live session and a past one identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from monitor.cost import Spend
from monitor.events import Event, Kind, Level
from monitor.text import compact_args


@dataclass(frozen=True)
class EventRow:
    seq: int
    ts: float
    kind: str
    summary: str
    is_error: bool = False
    where: str = ""


@dataclass(frozen=True)
class DetectionRow:
    ts: float
    level: Level
    detector: str
    message: str
    count: int
    score: float
    seq: int
    evidence: tuple[int, ...]
    nudge: str = ""
    suppressed: str | None = None
    cost: Any = None  # its loop episode's cost so far (monitor/cost.py), if usage was reported
    #: A loop episode's row (0: a single detection): its number, the detectors that
    #: joined, when it began, how many reports joined, and why it closed (None: open).
    episode: int = 0
    detectors: tuple[str, ...] = ()
    first_ts: float = 0.0
    first_seq: int = 0
    reports: int = 0
    closed: str | None = None


@dataclass(frozen=True)
class ActionRow:
    id: int
    ts: float
    kind: str
    outcome: str
    detail: str
    text: str | None
    who: str


def _get(row: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        if isinstance(row, dict):
            if name in row and row[name] is not None:
                return row[name]
        elif getattr(row, name, None) is not None:
            return getattr(row, name)
    return default


def _json(value: Any) -> Any:
    if isinstance(value, (bytes, str)) and value[:1] in ("{", "[", b"{", b"["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def summarize(
    kind: str,
    *,
    tool: str | None,
    args: Any,
    content: str,
    role: str | None,
    is_error: bool,
    agent: str | None = None,
    status: str | None = None,
) -> str:
    if kind == Kind.TOOL_CALL:
        return f"{tool}({compact_args(args if isinstance(args, dict) else None)})"
    if kind == Kind.TOOL_RESULT:
        return f"{'error' if is_error else 'result'}: {content}"
    if kind == Kind.MESSAGE:
        return f"{role}: {content}"
    if kind == Kind.SESSION_START:
        return f"session start ({agent or 'agent'})"
    if kind == Kind.SESSION_END:
        return f"session end ({status or 'ended'})"
    if kind == Kind.WAITING:
        return f"waiting for input ({status or 'input'}): {content}"
    return content or str(kind)


def usage_summary(tokens_in: Any, tokens_out: Any, cost: Any, meta: Any) -> str:
    """``usage 20,000 in (15,000 cached) · 1,000 out · claude-sonnet-4-5``."""
    meta = meta if isinstance(meta, dict) else {}
    parts = []
    if isinstance(tokens_in, int):
        cached = sum(
            v
            for k in ("cache_read_input_tokens", "cached_input_tokens", "cache_creation_input_tokens")
            if isinstance(v := meta.get(k), int) and not isinstance(v, bool)
        )
        parts.append(f"{tokens_in:,} in" + (f" ({cached:,} cached)" if cached else ""))
    if isinstance(tokens_out, int):
        parts.append(f"{tokens_out:,} out")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        parts.append(f"${cost:,.4f} reported")
    if isinstance(meta.get("model"), str):
        parts.append(meta["model"])
    return "usage " + " · ".join(parts) if parts else "usage"


def event_row(row: Any) -> EventRow:
    """An :class:`EventRow` from an :class:`Event` or a store ``events()`` dict."""
    if isinstance(row, Event):
        summary = (
            usage_summary(row.input_tokens, row.output_tokens, row.cost_usd, row.meta)
            if row.kind is Kind.USAGE
            else row.summary(4000)
        )
        return EventRow(row.seq, row.ts, row.kind.value, summary, row.is_error, row.where)
    kind = str(_get(row, "type", "kind", default="?"))
    is_error = bool(_get(row, "is_error", default=False))
    summary = summarize(
        kind,
        tool=_get(row, "tool", "name"),
        args=_json(_get(row, "args")),
        content=str(_get(row, "content", default="")),
        role=_get(row, "role"),
        is_error=is_error,
        agent=_get(row, "agent"),
        status=_get(row, "status"),
    )
    if kind == Kind.USAGE:
        summary = usage_summary(
            _get(row, "input_tokens"),
            _get(row, "output_tokens"),
            _get(row, "cost_usd"),
            _json(_get(row, "meta")),
        )
    file, line = _get(row, "file", "source", default=""), _get(row, "line")
    return EventRow(
        int(_get(row, "seq", default=0)),
        float(_get(row, "ts", default=0.0)),
        kind,
        summary,
        is_error,
        f"{file}:{line}" if line is not None else str(file),
    )


def _evidence_seqs(value: Any) -> tuple[int, ...]:
    value = _json(value) or ()
    seqs = []
    for ref in value:
        seq = ref.get("seq") if isinstance(ref, dict) else getattr(ref, "seq", None)
        if isinstance(seq, int):
            seqs.append(seq)
    return tuple(seqs)


def detection_row(row: Any) -> DetectionRow:
    """A :class:`DetectionRow` from a ``Detection`` or a store ``detections()`` dict."""
    level = _get(row, "level", default=Level.NONE)
    return DetectionRow(
        ts=float(_get(row, "ts", default=0.0)),
        level=Level.parse(level) if not isinstance(level, Level) else level,
        detector=str(_get(row, "detector", default="")),
        message=str(_get(row, "message", default="")),
        count=int(_get(row, "count", default=0) or 0),
        score=float(_get(row, "score", default=0.0) or 0.0),
        seq=int(_get(row, "seq", default=0) or 0),
        evidence=_evidence_seqs(_get(row, "evidence", default=())),
        nudge=str(_get(row, "nudge", default="")),
        suppressed=_get(row, "suppressed"),
        cost=Spend.from_dict(_json(_get(row, "cost"))),
    )


def episode_row(change: Any) -> DetectionRow:
    """A loop episode's row from its latest ``EpisodeChange`` (the episode and the
    latest detection that joined it: its evidence and nudge)."""
    episode, detection = change.episode, change.detection
    return DetectionRow(
        ts=episode.last_ts,
        level=episode.level,
        detector=episode.detector,
        message=episode.message,
        count=episode.count,
        score=detection.score if detection is not None else 0.0,
        seq=episode.last_seq,
        evidence=_evidence_seqs(detection.evidence) if detection is not None else (),
        nudge=detection.nudge if detection is not None else "",
        suppressed=detection.suppressed if detection is not None else None,
        cost=Spend.from_dict(detection.cost) if detection is not None else None,
        episode=episode.number,
        detectors=tuple(episode.detectors),
        first_ts=episode.first_ts,
        first_seq=episode.first_seq,
        reports=episode.detections,
        closed=episode.closed,
    )


def stored_episode_row(row: dict[str, Any]) -> DetectionRow:
    """A loop episode's row from a store ``episodes()`` dict (no evidence kept: it
    jumps to the episode's first event)."""
    detectors = _json(row.get("detectors")) or ()
    level = row.get("level") or "watching"
    return DetectionRow(
        ts=float(row.get("last_ts") or 0.0),
        level=Level.parse(level) if not isinstance(level, Level) else level,
        detector=str(row.get("detector") or ""),
        message=str(row.get("message") or ""),
        count=int(row.get("count") or 0),
        score=0.0,
        seq=int(row.get("last_seq") or 0),
        evidence=(),
        episode=int(row.get("number") or 0),
        detectors=tuple(str(d) for d in detectors) if isinstance(detectors, (list, tuple)) else (),
        first_ts=float(row.get("first_ts") or 0.0),
        first_seq=int(row.get("first_seq") or 0),
        reports=int(row.get("detections") or 0),
        closed=(row.get("closed") or "closed") if row.get("state") == "closed" else None,
    )


def action_row(row: Any) -> ActionRow:
    """An :class:`ActionRow` from an ``ActionRecord`` or a store ``actions()`` dict."""
    return ActionRow(
        id=int(_get(row, "id", default=0) or 0),
        ts=float(_get(row, "ts", default=0.0) or 0.0),
        kind=str(_get(row, "kind", default="")),
        outcome=str(_get(row, "outcome", default="pending")),
        detail=str(_get(row, "detail", default="")),
        text=_get(row, "text"),
        who=str(_get(row, "who", default="")),
    )
