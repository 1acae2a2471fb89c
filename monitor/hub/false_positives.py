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
from monitor.detect.false_positive_marks import episode_pairs, mark_again

#: Patterns a session keeps as marked (bounded: an episode has at most 16 pairs).
MAX_MARKED = 64


def pairs_for(engine: Any, detection: Detection) -> tuple[tuple[str, str], ...]:
    """The pairs marking ``detection`` a false positive marks (its loop episode's)."""
    return episode_pairs(engine, detection)


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
    gives them), after ``Engine.seed``; how many."""
    marks = list(marks)
    pairs = [(str(mark["detector"]), str(mark["pattern"])) for mark in marks]
    for pair, mark in zip(pairs, marks):
        remember(state, [pair], float(mark.get("since") or 0.0))
    return mark_again(engine, state.id, pairs)


def marked(state: Any) -> tuple[tuple[str, str, float], ...]:
    """``(detector, pattern, since)`` of each pattern marked in the session, oldest first."""
    return tuple((d, p, since) for (d, p), since in state.false_positives.items())
