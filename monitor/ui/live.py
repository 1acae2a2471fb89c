"""Between the hub and the widgets: collect updates, hand them over in batches.

The hub calls :meth:`LiveFeed.push` on the app's own asyncio loop for every
change (``SessionChanged``, ``DetectionRaised``, ``ActionFinished``, ``Stats``,
``ProblemReported``).  The feed only stores them — the latest snapshot per
session replaces older ones — and asks for one flush; the app flushes at most
``refresh_hz`` times a second, so 1,000 events/s cost ten widget updates, not
a thousand.  With a large fleet the flush rate drops (:func:`flush_interval`):
each flush redraws the rows in view whatever changed, so 1,000 busy sessions
are shown about four times a second rather than ten.  Nothing here imports
Textual: the feed is tested on its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from monitor.updates import (
    ActionFinished,
    DetectionRaised,
    ProblemReported,
    SessionChanged,
    Stats,
    WaitingNotice,
)

#: Detections and actions kept for the feeds (older ones are in the store).
FEED_LIMIT = 500
#: Sessions up to which the table is flushed at the full ``refresh_hz``;
#: above it the interval grows in proportion, up to :data:`SLOWEST_FLUSH`.
FLEET_SESSIONS = 250
#: The longest interval between flushes, in seconds, however large the fleet.
SLOWEST_FLUSH = 0.5


def flush_interval(refresh_hz: float, sessions: int) -> float:
    """Seconds between two flushes for a table of ``sessions`` rows.

    ``refresh_hz`` up to :data:`FLEET_SESSIONS` sessions; beyond, the interval
    grows with the fleet (1,000 sessions at 10 Hz: 0.25 s) so that the cost of
    redrawing and re-sorting stays about constant per second, but never slower
    than :data:`SLOWEST_FLUSH` (or than ``refresh_hz`` if that is slower).
    """
    if refresh_hz <= 0:
        return 0.0
    base = 1.0 / refresh_hz
    if sessions <= FLEET_SESSIONS:
        return base
    return max(base, min(SLOWEST_FLUSH, base * sessions / FLEET_SESSIONS))


@dataclass
class Batch:
    """Everything that changed since the previous flush."""

    sessions: dict[str, Any] = field(default_factory=dict)  # id -> latest SessionInfo
    detections: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    problems: int = 0
    #: The bad input reported (``Problem``: source, line, reason), for the log pane.
    bad: list[Any] = field(default_factory=list)
    stats: Any | None = None
    #: Sessions that have waited for the person too long (monitor/hub/waiting.py).
    notices: list[Any] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.sessions
            or self.detections
            or self.actions
            or self.problems
            or self.stats is not None
            or self.notices
        )

    def touches(self, session: str) -> bool:
        """Whether anything in the batch concerns ``session``."""
        return (
            session in self.sessions
            or any(getattr(d, "session", None) == session for d in self.detections)
            or any(getattr(a, "session", None) == session for a in self.actions)
        )


class LiveFeed:
    """Coalesces hub updates; also keeps the current picture for new screens."""

    def __init__(self, request_flush: Callable[[], None] | None = None):
        self.request_flush = request_flush or (lambda: None)
        self.pending = Batch()
        self.sessions: dict[str, Any] = {}
        self.detections: deque[Any] = deque(maxlen=FEED_LIMIT)
        self.actions: deque[Any] = deque(maxlen=FEED_LIMIT)
        self.stats: Any | None = None
        self.problems = 0
        #: The latest problems themselves (the count above is of all of them).
        self.bad: deque[Any] = deque(maxlen=FEED_LIMIT)
        self._action_ids: set[int] = set()

    def seed(self, sessions: Iterable[Any], detections: Iterable[Any] = ()) -> None:
        """Start from the hub's current sessions (and detections already raised)."""
        for info in sessions:
            self.sessions[info.id] = info
            self.pending.sessions[info.id] = info
        self.detections.extend(detections)
        self.request_flush()

    def push(self, update: object) -> None:
        """The hub's subscriber callback: store, never block, never raise."""
        pending = self.pending
        if isinstance(update, SessionChanged):
            info = update.info
            self.sessions[info.id] = info
            pending.sessions[info.id] = info
        elif isinstance(update, DetectionRaised):
            self.detections.append(update.detection)
            pending.detections.append(update.detection)
        elif isinstance(update, ActionFinished):
            action = update.action
            if action.id in self._action_ids:
                return
            self._action_ids.add(action.id)
            self.actions.append(action)
            pending.actions.append(action)
        elif isinstance(update, Stats):
            self.stats = update
            pending.stats = update
        elif isinstance(update, ProblemReported):
            self.problems += 1
            pending.problems += 1
            self.bad.append(update.problem)
            pending.bad.append(update.problem)
        elif isinstance(update, WaitingNotice):
            pending.notices.append(update)
        else:
            return
        self.request_flush()

    def drain(self) -> Batch:
        """Hand over what accumulated and start a new batch."""
        batch, self.pending = self.pending, Batch()
        return batch

    def actions_for(self, session: str) -> list[Any]:
        return [a for a in self.actions if a.session == session]

    def detections_for(self, session: str) -> list[Any]:
        return [d for d in self.detections if d.session == session]
