"""Reads over a running :class:`~monitor.hub.core.Hub` for its callers (the UI,
``watch``), kept out of the class: what sessions this hub heard from, and the
loop episodes a UI that subscribes late has missed."""

from __future__ import annotations

from typing import Any

from monitor.detect.episodes import Episode


def sessions_heard(hub: Any) -> list[str]:
    """Sessions that sent events to ``hub`` (not those only taken up from the store)."""
    return [state.id for state in hub.lifecycle.sessions.values() if state.last_arrival]


def recent_episodes(hub: Any) -> list[Episode]:
    """The loop episodes open now and lately closed in the sessions ``hub`` holds,
    by when they opened (read through the engine's summary), after the latest
    ones an earlier run stored (``hub.seeded_episodes``: monitor/hub/seeding.py)."""
    summary = hub.engine.summary
    # Those an earlier run stored first: an episode of this run with the same
    # (session, number) takes its line in the feed.
    found: list[Episode] = list(getattr(hub, "seeded_episodes", ()))
    for session in hub.engine.books:
        if session in hub.lifecycle.sessions:
            read = summary(session)
            found.extend(read.closed_episodes)
            found.extend(read.episodes)
    return sorted(found, key=lambda e: (e.first_ts, e.session, e.number))
