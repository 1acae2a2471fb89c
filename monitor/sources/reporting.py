"""Handing a followed file's events to the sink with each of its problems said once.

A document or database is read again on every change, and its bad records with it: the operator hears
of each (line, reason) once, not at every re-read.
"""

from __future__ import annotations

from typing import Any

from monitor.events import Event
from monitor.formats.base import Problem
from monitor.sources import Sink

#: Problems remembered per file; past this the memory starts again (a file of garbage must not grow it).
REPORTED_MAX = 10_000


async def submit_new(
    sink: Sink,
    reported: set[tuple[int | None, str]],
    problems: list[Problem],
    events: list[Event] | None = None,
    where_read: dict[str, Any] | None = None,
) -> None:
    """Submit ``events`` and the ``problems`` not reported before (``reported`` is the file's memory),
    with the read position when there is one; nothing when there is nothing new to say."""
    new = [p for p in problems if (p.line, p.reason) not in reported]
    reported.update((p.line, p.reason) for p in new)
    if len(reported) > REPORTED_MAX:
        reported.clear()
    if not events and not new and where_read is None:
        return
    if where_read is not None:
        await sink.submit(events or [], new, position=where_read)  # type: ignore[call-arg]
    else:
        await sink.submit(events or [], new)
