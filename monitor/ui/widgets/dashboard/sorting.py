"""Orders of the sessions table: by attention (the default) or by any column,
and the order in which the sessions that need attention are visited.

Pure functions over :class:`~monitor.updates.SessionInfo`-like objects, so the
table and the tests share them.  A column sort keeps the attention order as
its tie-break, so equal values never shuffle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from monitor.detect.summary import Sparks
from monitor.events import Level
from monitor.ui.sparks import bars

STATUS_RANK = {"live": 0, "idle": 1, "ended": 2}


def attention_key(info: Any) -> tuple:
    """Sort key: what needs an operator first — running sessions before ended
    ones, then the highest level, live before idle; within that, stable by start
    time so that busy sessions do not make rows jump around under the cursor."""
    return (info.status == "ended", -int(info.level), STATUS_RANK.get(info.status, 3), info.first_ts, info.id)


def _peak(sparks: Sparks) -> float:
    return max(bars(sparks.tail(16)), default=0.0)


#: Column key -> sort key, "most interesting first" (highest level, most events,
#: latest activity, highest similarity; text columns A→Z).
COLUMN_KEYS: dict[str, Callable[[Any], Any]] = {
    "level": lambda i: (-int(i.level), -(i.last_ts or 0.0)),
    "agent": lambda i: (i.agent or "").lower(),
    "session": lambda i: i.id.lower(),
    "status": lambda i: STATUS_RANK.get(i.status, 3),
    "events": lambda i: -i.events,
    "last": lambda i: -(i.last_ts or 0.0),
    "detector": lambda i: (i.detector or "~").lower(),
    "similarity": lambda i: -_peak(i.similarity),
    "source": lambda i: (i.source or "").lower(),
    "reason": lambda i: (i.reason or "~").lower(),
}
COLUMN_TITLES = {
    "level": "level",
    "agent": "agent",
    "session": "session id",
    "status": "status",
    "events": "events",
    "last": "last activity",
    "detector": "detector",
    "similarity": "similarity",
    "source": "source",
    "reason": "reason",
}


def ordered(infos: Iterable[Any], column: str | None = None, reverse: bool = False) -> list[str]:
    """Session ids in table order: attention when ``column`` is None."""
    infos = list(infos)
    if column is None or column not in COLUMN_KEYS:
        ids = [i.id for i in sorted(infos, key=attention_key)]
    else:
        key = COLUMN_KEYS[column]
        ids = [i.id for i in sorted(infos, key=lambda i: (key(i), attention_key(i)))]
    return ids[::-1] if reverse else ids


def waiting_since(info: Any, detections: Iterable[Any], acks: Iterable[float]) -> float:
    """When ``info``'s warning began: its first detection at warn or above after the
    last acknowledgement (the newest detection, or last activity, if none is held)."""
    after = max(acks, default=float("-inf"))
    times = [d.ts for d in detections if d.level >= Level.WARN and d.ts >= after]
    if times:
        return min(times)
    last = getattr(info, "last_detection", None)
    return last.ts if last is not None else info.last_ts


def waiting_for_input(info: Any) -> bool:
    """Whether the session waits for the person (monitor/detect/input_wait.py), not ended."""
    return bool(getattr(info, "waiting_since", 0)) and info.status != "ended"


#: Statuses that need an operator whatever the level (a session waiting for its user's input).
ATTENTION_STATUSES = frozenset({"waiting"})


def needs_attention(info: Any) -> bool:
    """At warn or above, or waiting for input."""
    return (
        info.level >= Level.WARN
        or info.status in ATTENTION_STATUSES
        or bool(getattr(info, "waiting", False))  # SessionInfo.waiting
        or waiting_for_input(info)
    )


def attention_queue(infos: Iterable[Any], since: Callable[[Any], float]) -> list[str]:
    """Sessions waiting for the person (the longest waiting first), then those
    at warn or above, the one flagged longest first."""
    infos = list(infos)
    asking = sorted((i for i in infos if waiting_for_input(i)), key=lambda i: (i.waiting_since, i.id))
    flagged = [i for i in infos if needs_attention(i) and not waiting_for_input(i)]
    return [i.id for i in asking] + [i.id for i in sorted(flagged, key=lambda i: (since(i), i.id))]


def next_unvisited(queue: list[str], current: str | None, visited: set[str]) -> str | None:
    """The next session of ``queue`` not in ``visited`` (the sessions ``w`` showed this round),
    after ``current``; when every one was shown, a new round starts at the head of the queue.

    The queue's order moves as warnings come and go, so "the one after the current one" alone
    can bounce between a few sessions and never reach the others; ``visited`` is updated here."""
    if not queue:
        visited.clear()
        return None
    left = [sid for sid in queue if sid not in visited]
    if not left:
        visited.clear()
        left = list(queue)
    after = queue[queue.index(current) + 1 :] if current in queue else queue
    target = next((sid for sid in after if sid in left), left[0])
    visited.add(target)
    return target
