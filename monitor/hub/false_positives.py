"""False positives the hub keeps per session, and carries across a restart.

Marking a detection a false positive marks every (detector, pattern) pair of
its loop episode (``Engine.mark_false_positive``).  The action's row records
those pairs before it is carried out (monitor/store/false_positives.py);
``HubSession.false_positives`` keeps them with the time they were marked (what
the dashboard, the detail view and ``show`` say), and a restarted hub marks
them again in its engine from the store (:func:`restore`), so the same loop in
a still-tailed log is not flagged again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from monitor.detect.base import Detection
from monitor.events import Level

#: Patterns a session keeps as marked (bounded: an episode has at most 16 pairs).
MAX_MARKED = 64


def pairs_for(engine: Any, detection: Detection) -> tuple[tuple[str, str], ...]:
    """The pairs marking ``detection`` a false positive marks: its loop episode's
    (the rule of ``Engine.mark_false_positive``), else its own."""
    book = engine.books.get(detection.session)
    episode = book.holding(detection.detector, detection.pattern) if book is not None else None
    if episode is not None and episode.pairs:
        return tuple(episode.pairs)
    return ((detection.detector, detection.pattern),)


def remember(state: Any, pairs: Iterable[tuple[str, str]], since: float) -> None:
    """Keep the marked ``pairs`` on the hub's session (the first mark's time kept)."""
    marked: dict[tuple[str, str], float] = state.false_positives
    for pair in pairs:
        marked.setdefault((pair[0], pair[1]), since)
    while len(marked) > MAX_MARKED:
        del marked[next(iter(marked))]


def restore(engine: Any, state: Any, marks: Iterable[dict[str, Any]]) -> int:
    """Mark again in ``engine`` the patterns the store says were marked in the
    session (``{detector, pattern, since}``, as ``StoreReader.false_positives``
    gives them); how many.  After ``Engine.seed``: the seeded rungs of those
    patterns are dropped as the operator's mark dropped them."""
    policy = engine.policy
    counted = policy.false_positive_count  # marks made by an earlier run, not by this one
    restored = 0
    for mark in marks:
        detector, pattern = str(mark["detector"]), str(mark["pattern"])
        policy.mark_false_positive(Detection(detector, Level.NONE, 0.0, "", pattern, session=state.id))
        remember(state, [(detector, pattern)], float(mark.get("since") or 0.0))
        restored += 1
    policy.false_positive_count = counted
    return restored


def marked(state: Any) -> tuple[tuple[str, str, float], ...]:
    """``(detector, pattern, since)`` of each pattern marked in the session, oldest first."""
    return tuple((d, p, since) for (d, p), since in state.false_positives.items())
