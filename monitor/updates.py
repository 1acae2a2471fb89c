"""What the hub tells its subscribers: one small immutable type per kind of
update, and :class:`SessionInfo`, the snapshot of a session they carry.

Sources, the metrics endpoint, the headless printer and the UI match on these
without importing the hub (which brings the engine and every detector); the
hub builds them (:mod:`monitor.hub.snapshots`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from monitor.events import Event, Level

if TYPE_CHECKING:
    from monitor.detect.base import Detection
    from monitor.detect.episodes import EpisodeChange
    from monitor.detect.summary import Sparks
    from monitor.formats.base import Problem


class WindowSource(Protocol):
    """A session's window as taken when its snapshot was, made into events when first read."""

    def get(self) -> tuple[Event, ...]: ...


@dataclass(frozen=True)
class SessionInfo:
    """An immutable snapshot of one session; the hub replaces it on every change."""

    id: str
    agent: str | None
    source: str
    origin: str  # "file" | "socket" | "hook" | "otlp"
    pid: int | None
    parent: str | None
    first_ts: float
    last_ts: float
    events: int
    status: str  # "live" | "idle" | "ended" | "stopped"
    level: Level
    detector: str | None
    reason: str
    nudge: str
    #: How much its latest steps repeated, overall and per detector (drawn by monitor/ui/sparks.py).
    similarity: Sparks
    detector_similarity: Mapping[str, Sparks]
    #: What :attr:`window` is read from (see :class:`monitor.hub.snapshots.LazyWindow`).
    window_source: WindowSource = field(repr=False, compare=False)
    last_detection: Detection | None
    muted: frozenset[str]
    channel: str  # "socket" | "inbox" | "hook" | "none"
    kill: str  # "" when it can be killed, else why not
    #: Event time of a delivered inject the session has not yet recovered from (0: none).
    nudged: float = 0.0
    #: Event time an acknowledgement quiets its patterns until (0: none).
    quiet_until: float = 0.0
    #: ``(since, Spend)`` of the loop episode it is in, its loops' cost in
    #: all (None: no usage reported): monitor/cost.py.
    episode_cost: Any = None
    loop_cost: Any = None
    #: Waiting for the person (monitor/detect/input_wait.py): since when (event
    #: time; 0: not waiting), why ("permission", "question", "elicitation",
    #: "idle", "input") and what it asks.
    waiting_since: float = 0.0
    waiting_why: str = ""
    waiting_for: str = ""

    @property
    def waiting(self) -> bool:
        """Waiting for the person, not ended."""
        return bool(self.waiting_since) and self.status != "ended"

    #: Wall-clock time its process was paused by the operator (0: running).
    paused: float = 0.0
    #: Whether the guard denies the calls that continue its loop.
    guard: bool = False
    #: ``(detector, pattern, since)`` of each pattern marked a false positive
    #: (since: wall clock), kept across a restart: monitor/hub/false_positives.py.
    false_positives: tuple[tuple[str, str, float], ...] = ()

    @property
    def window(self) -> tuple[Event, ...]:
        """The events the detectors were comparing (built when first read, then
        the same tuple on every read: widgets compare windows by identity)."""
        return self.window_source.get()


@dataclass(frozen=True)
class ActionRecord:
    """An operator or automatic action and how it ended."""

    id: int
    kind: str
    session: str
    text: str | None
    ts: float
    who: str
    outcome: str  # "delivered" | "failed" | "unsupported" | "refused"
    detail: str


@dataclass(frozen=True)
class SessionChanged:
    info: SessionInfo


@dataclass(frozen=True)
class DetectionRaised:
    detection: Detection


@dataclass(frozen=True)
class EpisodeChanged:
    """A loop episode opened, went on, escalated or closed (monitor/detect/episodes.py)."""

    change: EpisodeChange


@dataclass(frozen=True)
class ActionFinished:
    action: ActionRecord


@dataclass(frozen=True)
class ProblemReported:
    problem: Problem


@dataclass(frozen=True)
class WaitingNotice:
    """A session has waited for the person longer than ``[sources] waiting_notice_seconds``."""

    session: str
    since: float
    why: str
    asks: str


@dataclass(frozen=True)
class Stats:
    events_total: int
    events_per_sec: float
    sessions_live: int
    warnings_open: int
    #: What loop episodes cost today (a cost.Spend), measured so far.
    loop_cost_today: Any = None
    #: What is wrong with recording ("" when nothing): a full disk, rows lost.
    store: str = ""


__all__ = [
    "ActionFinished",
    "ActionRecord",
    "DetectionRaised",
    "EpisodeChanged",
    "ProblemReported",
    "SessionChanged",
    "SessionInfo",
    "Stats",
    "WindowSource",
]
