"""What the engine tells about one session: :class:`SessionSummary`, a small
immutable value (:meth:`Engine.summary <monitor.detect.engine.Engine.summary>`),
and the per-step similarity history it carries (:class:`Sparks`, kept by
:class:`SparkHistory`).

The hub, its recorder and its actions read a session through the summary
only: never the engine's detector state, never its escalation policy.  The
history is kept raw -- how much each step repeated earlier ones, and whether a
detection at warn or above flagged it; how that is drawn (the sparklines'
scale) is the UI's business (:mod:`monitor.ui.sparks`).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from monitor.events import Level

if TYPE_CHECKING:
    from monitor.cost import LoopCosts, Spend
    from monitor.detect.base import Detection, Detector
    from monitor.detect.episodes import Episode, EpisodeBook
    from monitor.detect.escalation import SessionEscalation

#: Steps kept per similarity history (each session's, and each detector's in it).
SIMILARITY_HISTORY = 60


@dataclass(frozen=True, slots=True)
class Sparks:
    """A similarity history, the oldest step first: per step, how much it
    repeated earlier ones (0..1) and whether a detection at warn or above
    (after acknowledgements and false positives) flagged it."""

    scores: tuple[float, ...] = ()
    flagged: tuple[bool, ...] = ()

    def __len__(self) -> int:
        return len(self.scores)

    def tail(self, steps: int) -> Sparks:
        """The latest ``steps`` steps."""
        if steps >= len(self.scores):
            return self
        return Sparks(self.scores[-steps:], self.flagged[-steps:])


NO_SPARKS = Sparks()


class SparkHistory:
    """A bounded, growing :class:`Sparks` (flat arrays: a session keeps one
    per detector that reported, and a thousand sessions are live at once)."""

    __slots__ = ("scores", "flags")

    def __init__(self) -> None:
        #: Unrounded (even single precision would change the sparklines' colours).
        self.scores = array("d")
        self.flags: list[bool] = []

    def __len__(self) -> int:
        return len(self.scores)

    def append(self, score: float, flagged: bool) -> None:
        self.scores.append(score)
        self.flags.append(flagged)
        if len(self.scores) > SIMILARITY_HISTORY:
            del self.scores[0], self.flags[0]

    def sparks(self) -> Sparks:
        return Sparks(tuple(self.scores), tuple(self.flags))


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session as the engine knows it now.

    Escalation (``level`` … ``quiet_until``) and costs outlive the session's
    detector state (:meth:`Engine.close <monitor.detect.engine.Engine.close>`)
    until the session is forgotten; the rest is there while ``live``."""

    id: str
    #: The engine holds the session's detector state (not closed since its latest event).
    live: bool = False
    level: Level = Level.NONE
    #: The detector, message and nudge of the detection that set the level.
    detector: str | None = None
    reason: str = ""
    nudge: str = ""
    #: Event time an acknowledgement quiets its patterns until (0: none).
    quiet_until: float = 0.0
    #: The detection that set the level (kept without its evidence), then the
    #: session's latest detections, the latest last.
    detection: Detection | None = None
    recent: tuple[Detection, ...] = ()
    #: Events taken since its detector state was made (duplicates left out).
    events: int = 0
    muted: frozenset[str] = frozenset()
    similarity: Sparks = NO_SPARKS
    detector_similarity: Mapping[str, Sparks] = field(default_factory=dict)
    #: The window detector's records as they are now (made into events by
    #: :func:`monitor.detect.analysis.calls.events`); empty when it has none.
    window: tuple[Any, ...] = ()
    #: ``(since, Spend)`` of the loop episode it is in, and its loops' cost in
    #: all (None: no usage reported): monitor/cost.py.
    episode_cost: tuple[float, Spend] | None = None
    loop_cost: Spend | None = None
    #: Its loop episodes open now (the oldest first), and the latest closed
    #: ones (the latest last; the store keeps them all): monitor/detect/episodes.py.
    episodes: tuple[Episode, ...] = ()
    closed_episodes: tuple[Episode, ...] = ()


class HeldState(Protocol):
    """What :func:`summarize` reads of the engine's
    :class:`~monitor.detect.engine.SessionState` (declared here: the engine imports this module)."""

    # (Read-only properties: a protocol's plain attributes would have to match
    # the engine's types exactly, a deque of detections where Iterable is read.)
    @property
    def detectors(self) -> Sequence[Detector[Any]]: ...
    @property
    def detections(self) -> Iterable[Detection]: ...
    @property
    def events(self) -> int: ...
    @property
    def muted(self) -> Collection[str]: ...
    @property
    def similarity(self) -> SparkHistory: ...
    @property
    def detector_similarity(self) -> Mapping[str, SparkHistory]: ...


def summarize(
    session: str,
    state: HeldState | None,
    escalation: SessionEscalation | None,
    costs: LoopCosts,
    muted: Collection[str] = (),
    book: EpisodeBook | None = None,
) -> SessionSummary:
    """The summary of ``session`` from the engine's parts: its detector state
    (``None``: closed or never seen), its escalation, the engine's costs, and
    (when closed) the detectors muted in it, and its episodes."""
    mood: dict[str, Any] = {}
    if escalation is not None:
        mood = {
            "level": escalation.level,
            "detector": escalation.detector,
            "reason": escalation.reason,
            "nudge": escalation.nudge,
            "quiet_until": escalation.quiet_until,
            "detection": escalation.last,
        }
    episode_cost, loop_cost = costs.episode(session, escalation), costs.loops(session)
    if book is not None:
        mood["episodes"] = tuple(book.open)
        mood["closed_episodes"] = tuple(book.recent)
    if state is None:
        return SessionSummary(
            session, muted=frozenset(muted), episode_cost=episode_cost, loop_cost=loop_cost, **mood
        )
    provider = next((d for d in state.detectors if d.provides_window), None)
    return SessionSummary(
        session,
        live=True,
        recent=tuple(state.detections),
        events=state.events,
        muted=frozenset(state.muted),
        similarity=state.similarity.sparks(),
        detector_similarity={name: line.sparks() for name, line in state.detector_similarity.items()},
        window=provider.window_records() if provider is not None else (),
        episode_cost=episode_cost,
        loop_cost=loop_cost,
        **mood,
    )
