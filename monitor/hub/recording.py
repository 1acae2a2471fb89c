"""What the hub writes to the store: events, loop episodes (a row per
episode, a row per rung) and the first detection of each rung as they are
processed, session rows at most once a second per session (at once when a
level changed), file positions after the events read before them.

A store that refuses a write is not retried: the monitor goes on without
recording, and says so (the store counts what it lost).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.detect.episodes import EpisodeChange
from monitor.events import Event, Level
from monitor.formats.base import Problem
from monitor.store.episodes import first_detections

if TYPE_CHECKING:
    from monitor.hub.state import HubSession

log = logging.getLogger("loopwatch.hub")

#: Session rows are written to the store at most this often per session.
STORE_INTERVAL = 1.0


class Recorder:
    """The hub's writes to its store (``None``: nothing is recorded)."""

    def __init__(self, store: Any, engine: Engine):
        self.store = store
        self.engine = engine
        self.failed = False
        self.changed: set[str] = set()  # sessions whose row must be written
        self._losses_seen = (0, 0)  # (dropped, failed) last reported

    @property
    def on(self) -> bool:
        return self.store is not None and not self.failed

    def level(self, session: str) -> Level:
        return self.engine.level(session)

    def add(
        self,
        events: list[Event],
        found: list[Detection],
        position: dict | None,
        sessions: dict[str, HubSession],
        changes: Sequence[EpisodeChange] = (),
    ) -> None:
        store = self.store
        if store is not None and not self.failed:
            try:
                store.add_events(events)
                if changes:
                    # Not a detection row per repeat: the first of each rung is the evidence.
                    kept = first_detections(list(changes))
                    if kept:
                        store.add_detections(kept)
                    store.add_episodes(changes)
            except Exception:
                self.failed = True
                log.exception("store rejected writes; continuing without recording")
        self.position(position)
        if found and self.on:
            # A level that changed is written now, not at the next tick: the
            # store merges the hub's row over what detection rows say, and an
            # older row (say, "watching" after an ack) must not outlast them.
            for session in {d.session for d in found}:
                state = sessions.get(session)
                if state is not None and self.level(session) != state.stored_level:
                    self.session(state)

    def episodes(self, changes: Sequence[EpisodeChange]) -> None:
        """Episode changes made outside event processing (closes, mostly)."""
        if changes and self.on:
            try:
                kept = first_detections(list(changes))
                if kept:
                    self.store.add_detections(kept)
                self.store.add_episodes(changes)
            except Exception:
                self.failed = True
                log.exception("store rejected writes; continuing without recording")

    def position(self, position: dict | None) -> None:
        """After the events read before it: so the database never has a
        position past events it lacks (they would never be read again)."""
        if position is None or not self.on:
            return
        try:
            self.store.add_position(position)
        except Exception:
            log.exception("store rejected a file position")

    def sessions(self, sessions: dict[str, HubSession], force: bool = False) -> None:
        """Write the rows of changed sessions not written for ``STORE_INTERVAL`` (all with ``force``)."""
        if not self.on:
            self.changed.clear()
            return
        now = time.monotonic()
        for session in list(self.changed):
            state = sessions.get(session)
            if state is None or not state.store_dirty:
                self.changed.discard(session)
            elif force or now - state.stored_at >= STORE_INTERVAL:
                self.session(state)
                self.changed.discard(session)

    def session(self, state: HubSession) -> None:
        state.store_dirty = False
        state.stored_at = time.monotonic()
        summary = self.engine.summary(state.id)
        state.stored_level = summary.level
        try:
            self.store.upsert_session(
                {
                    "id": state.id,
                    "agent": state.agent,
                    "source": state.source,
                    "kind": state.origin,
                    "pid": state.pid,
                    "parent": state.parent,
                    "first_seen": state.first_ts,
                    "last_seen": state.last_ts,
                    "status": state.status,
                    "level": summary.level.label,
                    "events": state.events,
                    "detector": summary.detector,
                    "reason": summary.reason,
                }
            )
        except Exception:
            self.failed = True
            log.exception("store rejected a session row; continuing without recording")

    def session_now(self, state: HubSession) -> None:
        """Write ``state``'s row now (history says so now, not at the next tick)."""
        if self.on:
            self.session(state)

    def banner(self) -> str:
        """What the TUI shows while recording is in trouble ("" when it is not)."""
        stats = getattr(self.store, "stats", None) if self.on else None
        if stats is None:
            return ""
        lost = stats.dropped + stats.failed
        tail = f", {lost:,} rows lost" if lost else ""
        if getattr(stats, "disk_full", False):
            return f"DISK FULL: {stats.pending:,} rows waiting to be recorded{tail}"
        return f"DATABASE INCOMPLETE{tail}" if lost else ""

    def losses(self) -> Iterable[Problem]:
        """A problem when the store dropped or refused rows since last asked,
        with the exact running count."""
        losses = getattr(self.store, "losses", None)
        if losses is None:
            return ()
        stats = self.store.stats
        counts = (stats.dropped, stats.failed)
        if getattr(stats, "disk_full", False):
            return ()  # said once when the disk filled; the count follows when it is written again
        if counts != self._losses_seen and any(counts):
            self._losses_seen = counts
            return (Problem("store", None, losses() or ""),)
        return ()
