"""Loop episodes: a loop is one episode, not one detection per repeat.

A detector reports a loop again at every repeat; an :class:`Episode` is the
loop itself.  It opens at the loop's first detection, every later detection
of the same loop *joins* it (its count, last event and level move on), and
it *closes* when the loop stops.  Per session an :class:`EpisodeBook` keeps
the open episodes (at most :data:`MAX_OPEN`) and the latest closed ones (at
most :data:`RECENT_EPISODES`): bounded, pure, no I/O.  Every change is an
:class:`EpisodeChange` (``opened`` / ``updated`` / ``escalated`` /
``closed``); the engine returns them beside its detections.

**Joining.**  A detection joins an open episode of its session when it comes
within ``gap`` events of the episode's latest detection and either

* it is about a pattern the episode holds (the same detector and pattern), or
* its evidence overlaps the episode's events (cites an event between the
  episode's earliest cited event and its latest detection): several
  detectors that see one loop join one episode.

Otherwise it opens a new episode.  ``gap`` is the detection window in events
(:func:`episode_gap`: twice the widest detector window, a call and its result
per step; 20 by default).

**Closing.**  An episode closes as

* ``stopped``: no detection joined it for ``gap`` events, or the session went
  back to watching (recovered after a nudge);
* ``acknowledged`` or ``false positive``: the operator said so;
* ``session ended``: the session ended (or was closed idle).

**Its fields.**  The *leading* detection is the one at the highest level, and
at that level the one that counts most: the episode's detector, pattern,
message, reason, tool and ``count`` are its latest detection's (what its
detector counts: repeats, failures…; the same number its message says).
``detections`` is how many detections joined.  ``level`` is the level of
its latest detections, ``peak`` the highest it reached; an ``escalated``
change is one that raised the peak (a new rung).  ``escalation`` is the
number of the session's escalation episode it opened in
(:attr:`~monitor.detect.escalation.SessionEscalation.episode`): an escalation
episode lasts until the session is back to watching, so it may hold several
loop episodes one after another, and a loop episode never spans two.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from monitor.detect.base import Detection
from monitor.detect.escalation import FALSE_POSITIVE as SUPPRESSED_FALSE_POSITIVE
from monitor.events import Level

OPENED = "opened"
UPDATED = "updated"
ESCALATED = "escalated"
CLOSED = "closed"

STOPPED = "stopped"
ACKNOWLEDGED = "acknowledged"
FALSE_POSITIVE = "false positive"
ENDED = "session ended"

#: Episodes open at once per session (a new one beyond closes the oldest, as stopped).
MAX_OPEN = 4
#: Closed episodes a session's book remembers (the store keeps them all).
RECENT_EPISODES = 8
#: (detector, pattern) pairs an episode remembers (for joining and false positives).
MAX_PAIRS = 16
#: The gap without a joining detection that ends an episode when no detector has a window.
DEFAULT_GAP = 20

#: Which change says more, when one event changes an episode several ways.
_RANK = {UPDATED: 0, ESCALATED: 1, OPENED: 2, CLOSED: 3}


@dataclass(frozen=True, slots=True)
class Episode:
    """One loop in one session, as it stands (immutable: a change carries a snapshot)."""

    session: str
    #: 1, 2, 3… per session, in the order they opened.
    number: int
    detector: str
    pattern: str
    message: str
    reason: str
    tool: str | None
    count: int
    level: Level
    peak: Level
    first_seq: int
    first_ts: float
    last_seq: int
    last_ts: float
    #: The file and line of its first and latest detection's event.
    source: str = ""
    first_line: int | None = None
    last_line: int | None = None
    #: The detectors that joined, in the order they did.
    detectors: tuple[str, ...] = ()
    #: The (detector, pattern) pairs that joined, in order (at most MAX_PAIRS).
    pairs: tuple[tuple[str, str], ...] = ()
    detections: int = 1
    #: The earliest event its detections cite (for the overlap rule).
    start_seq: int = 0
    #: Why it closed (STOPPED, ACKNOWLEDGED, FALSE_POSITIVE, ENDED); None while open.
    closed: str | None = None
    #: The session's escalation episode it opened in (0: none).
    escalation: int = 0

    @property
    def open(self) -> bool:
        return self.closed is None

    def to_dict(self) -> dict[str, Any]:
        """For JSON output (scan, headless, exports): the documented fields."""
        return {
            "session": self.session,
            "episode": self.number,
            "detector": self.detector,
            "detectors": list(self.detectors),
            "pattern": self.pattern,
            "message": self.message,
            "reason": self.reason,
            "tool": self.tool,
            "count": self.count,
            "detections": self.detections,
            "level": self.level.label,
            "peak": self.peak.label,
            "file": self.source,
            "first_line": self.first_line,
            "last_line": self.last_line,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "state": "open" if self.closed is None else "closed",
            "closed": self.closed,
        }


@dataclass(frozen=True, slots=True)
class EpisodeChange:
    """What one event (or operator action) did to one episode: ``kind`` is
    OPENED, UPDATED, ESCALATED or CLOSED; ``episode`` the episode after it;
    ``detection`` the leading detection of the event that joined (None for a close)."""

    kind: str
    episode: Episode
    detection: Detection | None = None


def episode_gap(windows: Iterable[int]) -> int:
    """The detection window in events, from the detectors' windows (in calls
    or outputs): twice the widest, a step being a call and its result."""
    widest = max((w for w in windows if w > 0), default=0)
    return 2 * widest if widest else DEFAULT_GAP


def _cited(detection: Detection) -> Iterator[int]:
    return (ref.seq for ref in detection.evidence if ref.seq)


def _joins(episode: Episode, detection: Detection, gap: int) -> bool:
    if detection.seq - episode.last_seq > gap:
        return False
    if (detection.detector, detection.pattern) in episode.pairs:
        return True
    low, high = episode.start_seq, episode.last_seq
    return any(low <= seq <= high for seq in _cited(detection))


class EpisodeBook:
    """The episodes of one session: the open ones and the latest closed."""

    __slots__ = ("session", "gap", "open", "recent", "numbered", "deadline")

    def __init__(self, session: str, gap: int = DEFAULT_GAP):
        self.session = session
        self.gap = gap
        self.open: list[Episode] = []
        self.recent: deque[Episode] = deque(maxlen=RECENT_EPISODES)
        self.numbered = 0
        #: The seq past which the oldest-joined open episode has stopped.
        self.deadline = 0

    def tick(self, seq: int) -> list[EpisodeChange]:
        """The session reached event ``seq``: close what has stopped (cheap when nothing has)."""
        if not self.open or seq <= self.deadline:
            return []
        stopped = [e for e in self.open if seq - e.last_seq > self.gap]
        return self._close(stopped, STOPPED)

    def observe(self, detections: Iterable[Detection], escalation: int = 0) -> list[EpisodeChange]:
        """The detections of one event (after escalation): join or open episodes."""
        changes: dict[int, EpisodeChange] = {}
        for detection in detections:
            if detection.suppressed == SUPPRESSED_FALSE_POSITIVE:
                continue  # never shown, never stored: it joins nothing
            for change in self.tick(detection.seq):
                changes[change.episode.number] = change
            at = next((i for i, e in enumerate(self.open) if _joins(e, detection, self.gap)), None)
            if at is None:
                change = self._open(detection, escalation, changes)
            else:
                before = changes.get(self.open[at].number)
                fresh = (
                    before is not None and before.kind != CLOSED and before.episode.last_seq == detection.seq
                )
                change = self._join(at, detection, fresh)
                if before is not None and _RANK[before.kind] > _RANK[change.kind]:
                    change = EpisodeChange(before.kind, change.episode, before.detection)
            changes[change.episode.number] = change
        self._rearm()
        return list(changes.values())

    def _open(
        self, detection: Detection, escalation: int, changes: dict[int, EpisodeChange]
    ) -> EpisodeChange:
        if len(self.open) >= MAX_OPEN:
            for change in self._close([self.open[0]], STOPPED):
                changes[change.episode.number] = change
        self.numbered += 1
        d = detection
        cited = list(_cited(d))
        episode = Episode(
            session=self.session,
            number=self.numbered,
            detector=d.detector,
            pattern=d.pattern,
            message=d.message,
            reason=d.summary,
            tool=d.tool,
            count=d.count,
            level=d.level,
            peak=d.level,
            first_seq=d.seq,
            first_ts=d.ts,
            last_seq=d.seq,
            last_ts=d.ts,
            source=d.source,
            first_line=d.line,
            last_line=d.line,
            detectors=(d.detector,),
            pairs=((d.detector, d.pattern),),
            start_seq=min(cited, default=d.seq),
            escalation=escalation,
        )
        self.open.append(episode)
        return EpisodeChange(OPENED, episode, detection)

    def _join(self, at: int, detection: Detection, same_event: bool) -> EpisodeChange:
        """``detection`` joins the open episode at ``at``; ``same_event``: an
        earlier detection of the same event joined it already."""
        e, d = self.open[at], detection
        pair = (d.detector, d.pattern)
        level = max(e.level, d.level) if same_event else d.level
        fields: dict[str, Any] = {
            "level": level,
            "peak": max(e.peak, d.level),
            "last_seq": d.seq,
            "last_ts": d.ts,
            "last_line": d.line,
            "detections": e.detections + 1,
            "start_seq": min(e.start_seq, min(_cited(d), default=e.start_seq)),
        }
        if d.detector not in e.detectors:
            fields["detectors"] = (*e.detectors, d.detector)
        if pair not in e.pairs and len(e.pairs) < MAX_PAIRS:
            fields["pairs"] = (*e.pairs, pair)
        if pair == (e.detector, e.pattern):
            fields.update(message=d.message, reason=d.summary, count=d.count)
        elif d.level > e.peak or (d.level == e.peak and d.count > e.count):
            # A detection at a higher level leads it from now on, or at the
            # lead's level one that counts more (a window-bounded count
            # stops growing while another detector's goes on)
            fields.update(
                detector=d.detector, pattern=d.pattern, message=d.message, reason=d.summary,
                tool=d.tool, count=d.count,
            )  # fmt: skip
        episode = self.open[at] = replace(e, **fields)
        return EpisodeChange(ESCALATED if d.level > e.peak else UPDATED, episode, detection)

    def _close(self, episodes: list[Episode], why: str) -> list[EpisodeChange]:
        changes = []
        for episode in episodes:
            self.open.remove(episode)
            closed = replace(episode, closed=why)
            self.recent.append(closed)
            changes.append(EpisodeChange(CLOSED, closed))
        self._rearm()
        return changes

    def _rearm(self) -> None:
        self.deadline = min((e.last_seq for e in self.open), default=0) + self.gap

    def close_all(self, why: str) -> list[EpisodeChange]:
        """Close every open episode (acknowledged, back to watching, ended)."""
        return self._close(list(self.open), why)

    def holding(self, detector: str, pattern: str) -> Episode | None:
        """The open (else the latest closed) episode that holds that pattern."""
        pair = (detector, pattern)
        for episode in (*reversed(self.open), *reversed(self.recent)):
            if pair in episode.pairs:
                return episode
        return None

    def find(self, number: int) -> Episode | None:
        return next((e for e in (*self.open, *self.recent) if e.number == number), None)

    def close(self, number: int, why: str) -> list[EpisodeChange]:
        """Close episode ``number`` if it is open."""
        return self._close([e for e in self.open if e.number == number], why)


def group(detections: Iterable[Detection], gap: int = DEFAULT_GAP) -> list[Episode]:
    """The episodes of a finished list of detections (a scan's), in the order
    they opened: the same rule as the engine's books, applied afterwards (a
    scan has no operator).  Episodes still open at the end are left open."""
    books: dict[str, _FullBook] = {}
    batch: list[Detection] = []
    for detection in detections:
        if batch and (batch[0].session != detection.session or batch[0].seq != detection.seq):
            _feed(books, batch, gap)
            batch = []
        batch.append(detection)
    if batch:
        _feed(books, batch, gap)
    out: list[Episode] = []
    for book in books.values():
        out.extend(book.all())
    return out


def _feed(books: dict[str, _FullBook], batch: list[Detection], gap: int) -> None:
    session = batch[0].session
    book = books.get(session)
    if book is None:
        book = books[session] = _FullBook(session, gap)
    book.observe(batch)


class _FullBook(EpisodeBook):
    """A book that keeps every closed episode (a scan reports them all)."""

    __slots__ = ()

    def __init__(self, session: str, gap: int):
        super().__init__(session, gap)
        self.recent = deque()

    def all(self) -> list[Episode]:
        return sorted((*self.recent, *self.open), key=lambda e: e.number)
