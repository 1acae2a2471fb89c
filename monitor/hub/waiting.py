"""Sessions waiting for the person, as the hub keeps them: the state, and the notice when it lasts.

The hub applies :func:`monitor.detect.input_wait.follow` to every event it
takes (the engine does too, for its own timing): the wait is kept on the
:class:`~monitor.hub.state.HubSession`, so a session that went idle while
it waited still shows it, and its snapshot carries ``waiting_since`` /
``waiting_why`` / ``waiting_for``.  A wait longer than ``[sources]
waiting_notice_seconds`` (0: never) raises one :class:`~monitor.updates.WaitingNotice`
per wait: the TUI shows it, ``watch --headless`` prints it.
"""

from __future__ import annotations

from collections.abc import Iterable

from monitor.detect.input_wait import asks_the_person, follow
from monitor.events import WAITING, Event
from monitor.hub.state import HubSession
from monitor.updates import WaitingNotice


def follow_event(state: HubSession, event: Event) -> None:
    """The session's wait after ``event`` (a new wait may be noticed again)."""
    wait = state.waiting
    if wait is None and event.kind is not WAITING and not asks_the_person(event):
        return  # the common case: not waiting, not starting to
    after = follow(wait, event)
    if after is None or wait is None or after.since != wait.since:
        state.wait_noticed = False
    state.waiting = after


def overdue(sessions: Iterable[HubSession], now: float, seconds: float) -> list[WaitingNotice]:
    """The notices due: sessions not ended that have waited ``seconds`` or more, each wait once."""
    if seconds <= 0:
        return []
    notices = []
    for state in sessions:
        wait = state.waiting
        if wait is None or state.wait_noticed or state.status == "ended" or now - wait.since < seconds:
            continue
        if state.paused:
            continue  # its process is stopped: nobody can answer it now (its clock stands still)
        state.wait_noticed = True
        notices.append(WaitingNotice(state.id, wait.since, wait.why, wait.asks))
    return notices
