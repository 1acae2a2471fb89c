"""When the hub tells its subscribers what changed.

Every update goes at once to the subscribers that take its kind
(:class:`~monitor.hub.subscribers.Subscribers`), but session snapshots are
coalesced: a changed session is marked (:meth:`Publisher.touch`) and its
:class:`~monitor.updates.SessionChanged` published once per interval however
many events it took, built only while some subscriber takes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from monitor.hub.recording import Recorder
from monitor.hub.snapshots import Snapshots
from monitor.hub.state import HubSession
from monitor.hub.subscribers import Subscribers
from monitor.updates import SessionChanged

#: Subscribers get coalesced SessionChanged updates at most this often under load.
PUBLISH_INTERVAL = 0.05


class Publisher:
    """The hub's subscribers, and the sessions with a snapshot to publish."""

    def __init__(self, snapshots: Snapshots, recorder: Recorder):
        self.snapshots = snapshots
        self.recorder = recorder
        self.subscribers = Subscribers()
        #: The hub's sessions by id (the lifecycle's; set once it is made).
        self.sessions: Mapping[str, HubSession] = {}
        self.changed: set[str] = set()  # sessions with a SessionChanged to publish
        self._handle: asyncio.TimerHandle | None = None
        #: A UI that flushes less often asks for snapshots as seldom (never
        #: more often than PUBLISH_INTERVAL): one build per changed session per flush.
        self.interval = PUBLISH_INTERVAL

    def subscribe(
        self, callback: Callable[[object], None], kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        return self.subscribers.subscribe(callback, kinds)

    def publish(self, update: object) -> None:
        self.subscribers.publish(update)

    def touch(self, state: HubSession) -> None:
        """The session changed: rebuild its snapshot lazily, publish it and store it soon."""
        state.dirty = True
        state.store_dirty = True
        self.changed.add(state.id)
        self.recorder.changed.add(state.id)

    def soon(self) -> None:
        """Publish the changed sessions at the end of the interval (one
        SessionChanged per session per interval, however many events)."""
        if self.changed and self._handle is None:
            delay = max(PUBLISH_INTERVAL, self.interval)
            self._handle = asyncio.get_running_loop().call_later(delay, self.now)

    def now(self) -> None:
        """Publish the changed sessions now, in first-seen order (deterministic, as the UI wants)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        changed, self.changed = self.changed, set()
        if not self.subscribers.want_sessions():
            return  # nobody to tell: snapshots are built when asked for
        sessions = self.sessions
        states = [sessions[s] for s in changed if s in sessions]
        for state in sorted(states, key=lambda state: state.order):
            self.publish(SessionChanged(self.snapshots.info(state)))
