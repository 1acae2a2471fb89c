"""What the engine tells the rest of loopwatch about a session: its one read API.

A mixin of :class:`~monitor.detect.engine.Engine`, kept apart so the engine's
module holds the pipeline and this one what may be read of it; nothing outside
``detect/`` reads the engine's attributes (tests/test_engine_reads.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from monitor.detect.summary import HeldState, SessionSummary, summarize
from monitor.events import Level

if TYPE_CHECKING:
    from monitor.cost import LoopCosts
    from monitor.detect.episodes import EpisodeBook
    from monitor.detect.escalation import EscalationPolicy


class Counts(NamedTuple):
    """The engine's totals (:meth:`Engine.counts`)."""

    #: Events processed, counted per session (duplicates left out).
    events: int
    #: Events dropped as duplicates (see :class:`SeenIds`).
    duplicates: int


class HeldSession(HeldState, Protocol):
    """What these reads take of the engine's ``SessionState`` (declared here: the
    engine imports this module)."""

    @property
    def agent(self) -> str | None: ...


class EngineReads:
    """The read methods over the engine's per-session state."""

    sessions: Mapping[str, HeldSession]
    policy: EscalationPolicy
    costs: LoopCosts
    _muted: dict[str, set[str]]
    books: dict[str, EpisodeBook]
    duplicates: int

    @property
    def events_processed(self) -> int:  # the engine's
        raise NotImplementedError

    def summary(self, session_id: str) -> SessionSummary:
        """What the engine knows of the session now (:mod:`~monitor.detect.summary`)."""
        return summarize(
            session_id,
            self.sessions.get(session_id),
            self.policy.sessions.get(session_id),
            self.costs,
            self._muted.get(session_id, ()),
            self.books.get(session_id),
        )

    def pattern_history(self, session_id: str, detector: str, pattern: str) -> tuple[int, float | None]:
        """How often ``detector`` flagged ``pattern`` in the session, and the
        event time an acknowledgement quiets it until (``None``: not acknowledged)."""
        escalation = self.policy.sessions.get(session_id)
        if escalation is None:
            return 0, None
        return escalation.count(detector, pattern), escalation.acknowledged_until(detector, pattern)

    def level(self, session_id: str) -> Level:
        """The session's escalation level."""
        escalation = self.policy.sessions.get(session_id)
        return escalation.level if escalation is not None else Level.NONE

    def reason(self, session_id: str) -> str:
        """The message of the session's latest detection at its highest level ("" for none)."""
        escalation = self.policy.sessions.get(session_id)
        return escalation.reason if escalation is not None else ""

    def agents(self) -> dict[str, str | None]:
        """Each session it holds detector state for, in order of first
        sight, and its agent (if known)."""
        return {session_id: state.agent for session_id, state in self.sessions.items()}

    def counts(self) -> Counts:
        """How many events it processed and dropped as duplicates."""
        return Counts(self.events_processed, self.duplicates)
