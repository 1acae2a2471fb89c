"""Waits for the person an earlier watcher left open, taken up when the hub restarts.

A session that waited for input when ``watch`` stopped (a permission prompt,
a question) still waits after the restart, since its original time: nothing
it did later reached the database.  The store keeps every event, so the wait
is found again by the one rule (:func:`monitor.detect.input_wait.follow`)
over the latest :data:`TAIL_EVENTS` stored events of each session not ended;
no column of its own is needed (and no migration).  A restarted watcher that
resumes a tailed file reads only what came after, so the next record ends the
wait as it would have live.

A wait older than ``[sources] waiting_notice_seconds`` raises its notice again
after the restart: the operator of the new dashboard has not seen it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from monitor.detect.input_wait import InputWait, follow
from monitor.store.rows import event_from_row

log = logging.getLogger("loopwatch.hub")

#: Stored events read per session, the latest, to find a wait still open.
TAIL_EVENTS = 64
#: Sessions (not ended, the most recently seen first) whose latest events are read.
SEED_WAITS = 500


def read_waits(store: Any, rows: Iterable[dict[str, Any]], limit: int = SEED_WAITS) -> dict[str, InputWait]:
    """The open wait of each session of ``rows`` not ended (reads only: run it in a thread)."""
    waits: dict[str, InputWait] = {}
    read = 0
    for row in rows:
        if row.get("status") == "ended" or read >= limit:
            continue
        read += 1
        wait = _open_wait(store, str(row["id"]))
        if wait is not None:
            waits[str(row["id"])] = wait
    return waits


def _open_wait(store: Any, session: str) -> InputWait | None:
    total = store.count_events(session)
    if not total:
        return None
    wait = None
    for stored in store.events(session, offset=max(total - TAIL_EVENTS, 0), limit=TAIL_EVENTS):
        try:
            event = event_from_row(stored)
        except (KeyError, ValueError, TypeError):
            continue  # a row another version wrote: not one of the wait's
        wait = follow(wait, event)
    return wait


def adopt_waits(sessions: dict[str, Any], waits: dict[str, InputWait]) -> int:
    """Put each wait on its seeded session (one a source already reached keeps its own)."""
    taken = 0
    for session, wait in waits.items():
        state = sessions.get(session)
        if state is not None and state.waiting is None and state.status != "ended":
            state.waiting = wait
            taken += 1
    return taken


async def restore_waits(hub: Any, rows: list[dict[str, Any]]) -> int:
    """Seed the waits of ``hub``'s stored sessions (``hub.seeded_waits``: how many)."""
    hub.seeded_waits = 0
    try:
        waits = await asyncio.to_thread(read_waits, hub.store, rows)
    except Exception:  # the sessions are taken up; only their waits are not shown
        log.exception("could not read the waits an earlier run left open")
        return 0
    hub.seeded_waits = adopt_waits(hub.lifecycle.sessions, waits)
    return hub.seeded_waits


__all__ = ["SEED_WAITS", "TAIL_EVENTS", "adopt_waits", "read_waits", "restore_waits"]
