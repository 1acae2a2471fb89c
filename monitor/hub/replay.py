"""A stored session replayed through the engine, for what the store does not
keep: its per-event similarity (the sparklines of a session seen in history).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.config import Config
from monitor.detect.engine import Engine
from monitor.detect.summary import Sparks
from monitor.store.rows import event_from_row

#: Events replayed (the session's last ones) and read from the store at a time.
REPLAY_EVENTS = 2000
REPLAY_PAGE = 500


def replay_similarity(
    config: Config,
    store: Any,
    session: str,
    *,
    last: int = REPLAY_EVENTS,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Sparks, dict[str, Sparks]] | None:
    """The overall and per-detector similarity histories of ``session`` after
    replaying its ``last`` stored events (``None``: nothing stored).
    ``progress(done, total)`` is called before the first page and after each."""
    engine = Engine(config, sparklines=True)
    total = store.count_events(session)
    offset = start = max(0, total - last)
    if progress is not None:
        progress(0, total - start)
    while offset < total:
        rows = store.events(session, offset=offset, limit=REPLAY_PAGE)
        if not rows:
            break
        engine.process_many(event_from_row(row) for row in rows)
        offset += len(rows)
        if progress is not None:
            progress(offset - start, total - start)
    summary = engine.summary(session)
    if not summary.live:
        return None
    return summary.similarity, dict(summary.detector_similarity)
