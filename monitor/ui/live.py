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

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from monitor.detect.episodes import EpisodeChange
from monitor.updates import (
    ActionFinished,
    DetectionRaised,
    EpisodeChanged,
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
    #: (session, number) -> the latest EpisodeChange of each loop episode that changed.
    episodes: dict[tuple[str, int], Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.sessions
            or self.detections
            or self.actions
            or self.problems
            or self.stats is not None
            or self.notices
            or self.episodes
        )

    def touches(self, session: str) -> bool:
        """Whether anything in the batch concerns ``session``."""
        return (
            session in self.sessions
            or any(getattr(d, "session", None) == session for d in self.detections)
            or any(getattr(a, "session", None) == session for a in self.actions)
            or any(key[0] == session for key in self.episodes)
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
        #: The latest change of each loop episode, in the order they opened (bounded).
        self.episodes: OrderedDict[tuple[str, int], Any] = OrderedDict()

    def seed(
        self, sessions: Iterable[Any], detections: Iterable[Any] = (), episodes: Iterable[Any] = ()
    ) -> None:
        """Start from the hub's current sessions (and detections already raised,
        and the loop episodes open or lately closed: ``Episode`` objects)."""
        for info in sessions:
            self.sessions[info.id] = info
            self.pending.sessions[info.id] = info
        detections = list(detections)
        self.detections.extend(detections)
        latest = {(d.session, d.detector, d.pattern): d for d in detections}
        for episode in episodes:
            lead = latest.get((episode.session, episode.detector, episode.pattern))
            self._episode(EpisodeChange("seeded", episode, lead))
        self.request_flush()

    def _episode(self, change: Any) -> None:
        """Keep ``change`` as its episode's latest, with the latest detection of its
        leading pattern (its evidence and nudge are what the episode shows)."""
        episode = change.episode
        key = (episode.session, episode.number)
        before = self.episodes.get(key)
        kept = before.detection if before is not None else None
        detection = change.detection
        if not _leads(episode, detection) and (_leads(episode, kept) or detection is None):
            change = EpisodeChange(change.kind, episode, kept)
        self.episodes[key] = change
        self.pending.episodes[key] = change
        while len(self.episodes) > FEED_LIMIT:
            self.episodes.popitem(last=False)

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
        elif isinstance(update, EpisodeChanged):
            self._episode(update.change)
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

    def episodes_for(self, session: str) -> list[Any]:
        """The session's loop episodes the feed holds (their latest changes), by number."""
        return sorted(
            (c for (s, _), c in self.episodes.items() if s == session), key=lambda c: c.episode.number
        )


def _leads(episode: Any, detection: Any) -> bool:
    """``detection`` is of the pattern that leads ``episode``."""
    return detection is not None and (detection.detector, detection.pattern) == (
        episode.detector,
        episode.pattern,
    )
