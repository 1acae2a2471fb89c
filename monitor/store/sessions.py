"""The ``sessions`` rows: how each is merged from the hub's updates and from
the event and detection rows the writer commits, the upsert that merges them
in SQL the same way, and the status a reader shows.

A session row names its ``owner``, the watcher process that last wrote it
(:func:`monitor.identity.owner_stamp`, schema v6): a session whose status is
not final while that watcher is gone (killed, even by SIGKILL) is shown
``stopped`` (:func:`shown_status`), as a watcher that stops cleanly records it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Kind, Level
from monitor.identity import owner_running
from monitor.store.rows import DETECTION_COLUMNS, EVENT_COLUMNS, SEQ, level_rank, safe_text

SESSION_COLUMNS = (
    "id",
    "agent",
    "source",
    "origin",
    "pid",
    "parent",
    "first_seen",
    "last_seen",
    "status",
    "level",
    "level_rank",
    "peak",
    "peak_rank",
    "detector",
    "reason",
    "events",
    "detections",
    "owner",
    "loop_tokens",
    "loop_usd",
    "loop_unpriced_tokens",
)
#: What loop episodes cost, summed from usage rows (``meta.loop``: monitor/cost.py, v7).
LOOP_COLUMNS = ("loop_tokens", "loop_usd", "loop_unpriced_tokens")
#: Counted by the store itself from what it committed (the engine's count
#: restarts with the monitor), so a hub's value for them is ignored.
STORE_COUNTED = frozenset({"events", "detections", *LOOP_COLUMNS})
#: Set by the writer (its own process), never taken from an update.
STORE_SET = STORE_COUNTED | {"owner"}
#: Keys the hub may use for the same columns (the contract's names).
SESSION_ALIASES = {"kind": "origin", "first_ts": "first_seen", "last_ts": "last_seen"}


def session_update(row: dict[str, Any]) -> dict[str, Any]:
    """A hub session row normalized to ``sessions`` columns."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        key = SESSION_ALIASES.get(key, key)
        if key not in SESSION_COLUMNS or value is None or key in STORE_SET:
            continue  # extra SessionInfo fields (similarity, window…) are not stored
        out[key] = value
    if "id" not in out or not isinstance(out["id"], str) or not out["id"]:
        raise ValueError(f"upsert_session: row needs a non-empty 'id', got {row.get('id')!r}")
    if "level" in out:
        level = Level.parse(out["level"])
        out["level"], out["level_rank"] = level.label, int(level)
        out.setdefault("peak", level.label)
        out.setdefault("peak_rank", int(level))
    if "peak" in out:
        out["peak_rank"] = level_rank(out["peak"])
        out["peak"] = Level(out["peak_rank"]).label
    if "status" in out and isinstance(out["status"], Level):
        out["status"] = out["status"].label
    for key in ("agent", "source", "origin", "parent", "status", "detector", "reason", "id"):
        if key in out:
            out[key] = safe_text(str(out[key]))
    return out


def merge_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Merge ``new`` into ``old`` the way the SQL upsert merges rows."""
    for key, value in new.items():
        if key == "first_seen" and old.get(key) is not None:
            old[key] = min(old[key], value)
        elif key in ("last_seen", "events") and old.get(key) is not None:
            old[key] = max(old[key], value)
        elif key == "detections" or key in LOOP_COLUMNS:
            old[key] = old.get(key, 0) + value
        elif key == "source":
            old.setdefault(key, value)  # the first source a session was seen in stays
        elif key == "peak_rank":
            if value >= old.get("peak_rank", -1):
                old["peak_rank"], old["peak"] = value, new.get("peak", Level(value).label)
        elif key != "peak":
            old[key] = value


def _session_upsert_sql() -> str:
    merge = {
        "first_seen": "MIN(COALESCE(excluded.first_seen, sessions.first_seen), "
        "COALESCE(sessions.first_seen, excluded.first_seen))",
        "last_seen": "MAX(COALESCE(excluded.last_seen, sessions.last_seen), "
        "COALESCE(sessions.last_seen, excluded.last_seen))",
        "events": "MAX(excluded.events, sessions.events)",
        "detections": "sessions.detections + excluded.detections",
        **{c: f"sessions.{c} + excluded.{c}" for c in LOOP_COLUMNS},
        # The first source a session was seen in stays its source.
        "source": "COALESCE(sessions.source, excluded.source)",
        "peak": "CASE WHEN COALESCE(excluded.peak_rank, -1) > COALESCE(sessions.peak_rank, -1) "
        "THEN excluded.peak ELSE sessions.peak END",
        "peak_rank": "CASE WHEN COALESCE(excluded.peak_rank, -1) > COALESCE(sessions.peak_rank, -1) "
        "THEN excluded.peak_rank ELSE sessions.peak_rank END",
    }
    columns = ", ".join(SESSION_COLUMNS)
    marks = ", ".join("?" for _ in SESSION_COLUMNS)
    sets = ", ".join(
        f"{c} = {merge.get(c, f'COALESCE(excluded.{c}, sessions.{c})')}" for c in SESSION_COLUMNS if c != "id"
    )
    return f"INSERT INTO sessions ({columns}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {sets}"


SESSION_UPSERT = _session_upsert_sql()

_START, _END = Kind.SESSION_START.value, Kind.SESSION_END.value
_TS, _TYPE, _FILE = EVENT_COLUMNS.index("ts"), EVENT_COLUMNS.index("type"), EVENT_COLUMNS.index("file")
_FROM_START = tuple((key, EVENT_COLUMNS.index(key)) for key in ("agent", "pid", "parent"))
_USAGE, _META = Kind.USAGE.value, EVENT_COLUMNS.index("meta")


def derive_from_event(info: dict[str, Any], row: list[Any]) -> None:
    """What an event row says about its session (merged into ``sessions``)."""
    ts = row[_TS]
    first = info.get("first_seen")
    if first is None:
        info["first_seen"] = info["last_seen"] = ts
        if row[_FILE]:
            info["source"] = row[_FILE]
    elif ts < first:
        info["first_seen"] = ts
    elif ts > info["last_seen"]:
        info["last_seen"] = ts
    info["events"] = row[SEQ]
    kind = row[_TYPE]
    if kind == _START:
        for key, index in _FROM_START:
            if row[index] is not None:
                info[key] = row[index]
    elif kind == _USAGE and row[_META] and '"loop"' in row[_META]:
        loop = orjson.loads(row[_META]).get("loop")  # spent inside a loop episode
        if isinstance(loop, dict):
            for column, key in zip(LOOP_COLUMNS, ("tokens", "usd", "unpriced_tokens")):
                value = loop.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    info[column] = info.get(column, 0) + value
    # Any event after a session_end means it is live again.
    info["status"] = "ended" if kind == _END else "live"


_D_DETECTOR, _D_LEVEL, _D_RANK, _D_MESSAGE, _D_SUPPRESSED = (
    DETECTION_COLUMNS.index(k) for k in ("detector", "level", "level_rank", "message", "suppressed")
)


def derive_from_detection(info: dict[str, Any], row: list[Any]) -> None:
    """What a detection row says about its session: its peak, and its level
    when the row raises it.

    A notice (proposed as one, or quieted by an acknowledgement) is not the
    session's level, nor a warning after a worse one: the hub's session
    updates say what it is, and a row must not overwrite that until the next
    one (history said "notice" while the dashboard said "terminate")."""
    rank = row[_D_RANK]
    info["detections"] = info.get("detections", 0) + 1
    if rank >= max(int(Level.WARN), info.get("level_rank", -1)) and not row[_D_SUPPRESSED]:
        info["level"], info["level_rank"] = row[_D_LEVEL], rank
        info["detector"], info["reason"] = row[_D_DETECTOR], row[_D_MESSAGE]
    if rank >= info.get("peak_rank", -1):
        info["peak"], info["peak_rank"] = row[_D_LEVEL], rank


_EVENTS, _DETECTIONS, _OWNER = (SESSION_COLUMNS.index(c) for c in ("events", "detections", "owner"))


def session_values(update: dict[str, Any], owner: str | None = None) -> list[Any]:
    """An update as SESSION_UPSERT parameters (absent columns are NULL: kept),
    written by the watcher ``owner``."""
    values = [update.get(column) for column in SESSION_COLUMNS]
    values[_EVENTS] = update.get("events") or 0
    values[_DETECTIONS] = update.get("detections") or 0
    for column in LOOP_COLUMNS:
        values[SESSION_COLUMNS.index(column)] = update.get(column) or 0
    values[_OWNER] = owner
    return values


#: Statuses that stay true after the watcher stops.
FINAL_STATUSES = ("ended", "stopped")


def shown_status(
    rows: list[dict[str, Any]], running: Callable[[str | None], bool] = owner_running
) -> list[dict[str, Any]]:
    """``rows`` (read from ``sessions``) with the status a reader must show:
    ``stopped`` for a session not ended whose watcher is gone."""
    alive: dict[str | None, bool] = {}
    for row in rows:
        status = row.get("status")
        if status is None or status in FINAL_STATUSES:
            continue
        owner = row.get("owner")
        if owner not in alive:
            alive[owner] = running(owner)
        if not alive[owner]:
            row["status"] = "stopped"
    return rows
