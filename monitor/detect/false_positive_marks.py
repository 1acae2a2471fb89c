"""What a false positive marks, and marking it again after a restart.

Outside detect/ the engine is read through its read API: these two are the
false-positive reads and writes the hub needs (monitor/hub/false_positives.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from monitor.detect.base import Detection
from monitor.events import Level

if TYPE_CHECKING:
    from monitor.detect.engine import Engine


def episode_pairs(engine: Engine, detection: Detection) -> tuple[tuple[str, str], ...]:
    """The pairs marking ``detection`` a false positive marks: its loop episode's
    (the rule of ``Engine.mark_false_positive``), else its own."""
    book = engine.books.get(detection.session)
    episode = book.holding(detection.detector, detection.pattern) if book is not None else None
    if episode is not None and episode.pairs:
        return tuple(episode.pairs)
    return ((detection.detector, detection.pattern),)


def mark_again(engine: Engine, session: str, pairs: Iterable[tuple[str, str]]) -> int:
    """Mark ``pairs`` false positives in ``session`` again (after ``Engine.seed``: the
    seeded rungs of those patterns are dropped as the operator's mark dropped them),
    not counted as new marks; how many."""
    policy = engine.policy
    counted = policy.false_positive_count  # marks made by an earlier run, not by this one
    marked = 0
    for detector, pattern in pairs:
        policy.mark_false_positive(Detection(detector, Level.NONE, 0.0, "", pattern, session=session))
        marked += 1
    policy.false_positive_count = counted
    return marked
