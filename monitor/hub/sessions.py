"""Session lifecycle: when a session is created, revived, closed (idle,
ended, its process gone) and forgotten (what is kept per session is
:class:`~monitor.hub.state.HubSession`).

Sessions are created on first sight and closed (their detector state freed) on
``session_end`` or when idle for ``[sources] idle_timeout_seconds``; a closed
session that speaks again is revived, and ended when its process (when one was
proven to be its) exits.  Replayed history (events older than ten idle
timeouts) goes idle a few seconds after its source went quiet.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from monitor.config import Config
from monitor.control import PidClaim, ProcessIdentity
from monitor.detect.engine import Engine
from monitor.detect.episodes import EpisodeChange
from monitor.events import Event
from monitor.hub.snapshots import Snapshots
from monitor.hub.state import HubSession

log = logging.getLogger("loopwatch.hub")

#: Closed (ended or idle) sessions remembered for the UI and history.
MAX_CLOSED_SESSIONS = 2000
#: A session still receiving events within this many seconds is never idle.
IDLE_ARRIVAL_SECONDS = 60.0
#: Sessions whose latest event is older than this many idle timeouts are replayed
#: history: idle once nothing arrived for them for REPLAY_QUIET_SECONDS.
REPLAY_AGE_TIMEOUTS = 10
REPLAY_QUIET_SECONDS = 5.0


def origin_of(source: str, channel: Any) -> str:
    name = getattr(channel, "name", "")
    if name == "hook":
        return "hook"
    if name == "socket" or source.startswith("socket:"):
        return "socket"
    if source.startswith("hook:"):
        return "hook"
    if source.startswith("otlp:"):
        return "otlp"
    return "file"


class Lifecycle:
    """The hub's sessions, from first sight to forgotten.

    ``touch(state)`` is the hub's: the session changed, publish and store it."""

    def __init__(
        self,
        config: Config,
        engine: Engine,
        snapshots: Snapshots,
        clock: Callable[[], float],
        touch: Callable[[HubSession], None],
    ):
        self.config = config
        self.engine = engine
        self.snapshots = snapshots
        self.clock = clock
        self.touch = touch
        self.sessions: dict[str, HubSession] = {}
        self.channels: dict[str, Any] = {}  # registered before the session was seen
        #: Pids the agents proved their own (socket peer credentials), by session.
        self.proofs: OrderedDict[str, tuple[ProcessIdentity, str]] = OrderedDict()
        self.seen = 0
        self.closed_count = 0  # sessions not live (bounded by MAX_CLOSED_SESSIONS)
        #: Live sessions, least recently active first: in all, and by the source first seen from.
        self.live: OrderedDict[str, None] = OrderedDict()
        self.live_by_source: dict[str, OrderedDict[str, None]] = {}
        self.evicted = 0  # live sessions closed to stay within the bounds
        #: Called with a session about to be forgotten whose row the store has not had yet.
        self.on_forget: Callable[[HubSession], None] | None = None
        #: Told the episode changes of a session closed (its open episodes end).
        self.on_episodes: Callable[[list[EpisodeChange]], None] | None = None

    def register_channel(self, session: str, channel: Any) -> None:
        state = self.sessions.get(session)
        if state is None:
            self.channels[session] = channel
            if len(self.channels) > 4 * MAX_CLOSED_SESSIONS:  # never-seen sessions must not pile up
                self.channels.pop(next(iter(self.channels)))
            return
        state.channel = channel
        origin = origin_of(state.source, channel)
        if origin != "file" or state.origin == "file":
            state.origin = origin
        self.touch(state)

    def confirm_pid(self, session: str, identity: ProcessIdentity, how: str) -> None:
        self.proofs[session] = (identity, how)
        self.proofs.move_to_end(session)
        while len(self.proofs) > 4 * MAX_CLOSED_SESSIONS:
            self.proofs.popitem(last=False)
        state = self.sessions.get(session)
        if state is not None and state.claim is not None and not state.claim.confirmed:
            self._confirm(state)

    def _confirm(self, state: HubSession) -> None:
        proof = self.proofs.get(state.id)
        claim = state.claim
        if proof is None or claim is None:
            return
        identity, how = proof
        if identity.pid == claim.identity.pid and identity.start_time == claim.identity.start_time:
            state.claim = replace(claim, confirmed=how)
            self.touch(state)

    def new_session(self, event: Event) -> HubSession:
        channel = self.channels.pop(event.session, None)
        self.seen += 1
        state = HubSession(
            id=event.session,
            origin=origin_of(event.source, channel),
            source=event.source,
            first_ts=event.ts,
            channel=channel,
            order=self.seen,
        )
        state.home = event.source
        self.sessions[event.session] = state
        self._went_live(state)
        self.forget_old()
        return state

    def adopt(self, state: HubSession) -> None:
        """A closed session an earlier run recorded (monitor/hub/seeding.py)."""
        self.seen += 1
        state.order = self.seen
        state.channel = self.channels.pop(state.id, state.channel)  # registered before the start
        self.sessions[state.id] = state
        self.closed_count += 1
        self.forget_old()

    def _went_live(self, state: HubSession) -> None:
        """Count ``state`` as live; close the least recently active beyond the bounds."""
        self.live[state.id] = None
        mine = self.live_by_source.setdefault(state.home, OrderedDict())
        mine[state.id] = None
        settings = self.config.sources
        per_source = max(1, settings.max_live_sessions_per_source)
        while len(mine) > per_source:
            self._evict(next(iter(mine)))
        limit = max(1, settings.max_live_sessions)
        while len(self.live) > limit:
            self._evict(next(iter(self.live)))

    def _evict(self, session: str) -> None:
        victim = self.sessions.get(session)
        if victim is None or victim.status != "live":  # not ours to count (a bug): drop the entry
            self._left_live(session, victim.home if victim is not None else "")
            return
        if not self.evicted or self.evicted % 1000 == 0:
            log.warning(
                "more live sessions than [sources] max_live_sessions(_per_source) allow: closing the "
                "least recently active (%s; %d so far)",
                session,
                self.evicted + 1,
            )
        self.evicted += 1
        self.close(victim, "idle")

    def _left_live(self, session: str, home: str) -> None:
        self.live.pop(session, None)
        mine = self.live_by_source.get(home)
        if mine is not None:
            mine.pop(session, None)
            if not mine:
                del self.live_by_source[home]

    def revive(self, state: HubSession) -> None:
        """A closed session speaks again: the engine starts it afresh (same mutes)."""
        state.status = "live"
        self.closed_count -= 1
        state.recent.clear()
        state.otlp_seq = 0
        self._went_live(state)

    def observe(self, state: HubSession, event: Event, arrival: float) -> None:
        live = self.live
        if state.id in live:  # most recently active last: the first is the one to evict
            live.move_to_end(state.id)
            self.live_by_source[state.home].move_to_end(state.id)
        state.events += 1
        state.last_ts = event.ts
        state.last_activity = min(event.ts, arrival)
        state.last_arrival = arrival
        if event.source and state.source != event.source and state.origin == "file":
            state.source = event.source
        if event.agent:
            state.agent = event.agent
        if event.parent:
            state.parent = event.parent
        if event.pid is not None and event.pid != state.pid:
            state.pid = event.pid
            self._capture(state, event, event.pid)
        self.touch(state)

    def _capture(self, state: HubSession, event: Event, pid: int) -> None:
        """Remember who the event's pid is now, so that a later kill can check it
        is still them, and what backs the claim (see :class:`~monitor.control.PidClaim`)."""
        state.identity = state.claim = None
        identity = ProcessIdentity.capture(pid)
        if identity is None:
            state.kill_reason = f"pid {pid} is not running on this machine"
            return
        source = event.source
        from_file = bool(source) and origin_of(source, None) == "file"
        state.claim = PidClaim(identity, since=event.ts, log_path=source if from_file else "")
        state.identity = identity
        self._confirm(state)
        state.kill_reason = state.claim.refusal() or ""

    def close(self, state: HubSession, status: str) -> None:
        """Free the session's detector state; keep its snapshot."""
        if state.status == status:
            return
        info = state.info = self.snapshots.build(state)  # last window and sparklines, before they go
        info.window  # noqa: B018  built now: the records it was made from must not outlive the session
        if state.status == "live":
            self.closed_count += 1
            self._left_live(state.id, state.home)
        state.status = status
        if status == "ended":
            state.paused = 0.0  # its process is gone: nothing stays stopped
        self.engine.close(state.id)
        ended = self.engine.end_episodes(state.id)
        if ended and self.on_episodes is not None:
            self.on_episodes(ended)
        state.recent.clear()
        state.latest.clear()
        state.stored_at = 0.0  # written at the next tick, not after the usual interval
        self.touch(state)

    def forget_old(self) -> None:
        # With some slack: sessions closed one at a time (evicted) must not sort
        # every closed session each time.
        if self.closed_count <= MAX_CLOSED_SESSIONS + MAX_CLOSED_SESSIONS // 10:
            return
        closed = [s for s in self.sessions.values() if s.status != "live"]
        closed.sort(key=lambda s: s.last_activity)
        for state in closed[: len(closed) - MAX_CLOSED_SESSIONS]:
            if state.store_dirty and self.on_forget is not None:
                self.on_forget(state)  # its last row (closed, its level) reaches the store first
            del self.sessions[state.id]
            self.engine.forget(state.id)
            self.closed_count -= 1

    def sweep_exited(self) -> list[str]:
        """End live sessions whose process (captured when its pid was first seen) has exited."""
        ended = []
        for state in list(self.sessions.values()):
            identity = state.identity
            if state.status != "live" or identity is None:
                continue
            now = ProcessIdentity.capture(identity.pid)
            if now is None or abs(now.start_time - identity.start_time) > 1e-6:
                self.close(state, "ended")
                ended.append(state.id)
        if ended:
            self.forget_old()
        return ended

    def sweep_idle(self) -> list[str]:
        """Close live sessions silent for longer than the idle timeout; return their ids.

        Silent means both: its latest event is older than the timeout (event
        time, so replayed history goes idle soon after the replay), and nothing
        arrived for it for a while (so a replay in progress, or an agent whose
        clock lags, is not closed and reset between two of its events).
        """
        timeout = self.config.sources.idle_timeout_seconds
        if timeout <= 0:
            return []
        quiet = min(timeout, IDLE_ARRIVAL_SECONDS)
        replayed = REPLAY_AGE_TIMEOUTS * timeout
        now = self.clock()
        closed = []
        for state in list(self.sessions.values()):
            if state.status != "live" or now - state.last_activity <= timeout or state.paused:
                continue  # a paused session's clock stands still: never idle
            silent = now - state.last_arrival
            if silent > quiet or (now - state.last_activity > replayed and silent > REPLAY_QUIET_SECONDS):
                self.close(state, "idle")
                closed.append(state.id)
        if closed:
            self.forget_old()
        return closed

    def stop_all(self) -> None:
        """The hub stops: every session not ended is ``stopped`` (nobody delivers it any more)."""
        for state in self.sessions.values():
            if state.status != "ended":
                state.status = "stopped"
                self.touch(state)
