"""The sparklines' scale: a session's similarity history as bar heights.

The engine keeps the history raw (:class:`~monitor.detect.summary.Sparks`:
how much each step repeated earlier ones, and whether a detection at warn or
above flagged it); this is how it is drawn.
"""

from __future__ import annotations

from monitor.detect.summary import Sparks


def bar(similarity: float, flagged: bool) -> float:
    """The lower half is how much a step repeats earlier ones; the upper half
    is reserved for steps flagged at warn or above (after acknowledgements and
    false positives).  Honest work -- polling, similar narration -- stays in
    the lower half; a loop fills the row."""
    if flagged:
        return 0.5 + 0.5 * max(similarity, 0.5)
    return 0.5 * min(similarity, 1.0)


def bars(sparks: Sparks) -> tuple[float, ...]:
    """The bar height (0..1) of each step, the oldest first."""
    return tuple(map(bar, sparks.scores, sparks.flagged))
