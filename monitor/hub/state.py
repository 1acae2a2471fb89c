"""What the hub keeps per session (:class:`HubSession`), apart from the engine's state.

Its own module so that the lifecycle (:mod:`~monitor.hub.sessions`), the
snapshots, the actions and the recorder all import it from below.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from monitor.control import PidClaim, ProcessIdentity
from monitor.detect.base import Detection
from monitor.detect.input_wait import InputWait
from monitor.events import Event, Level
from monitor.updates import SessionInfo

#: Recent events per live session shown in the UI's window when the
#: detectors compare none (bounded copies: see :func:`~monitor.hub.snapshots.window_copy`).
RECENT_EVENTS = 24
#: Recent tool calls' (seq, fingerprint) kept for the guard, to name a flagged loop's calls.
GUARD_CALLS = 64


@dataclass(eq=False)
class HubSession:
    """The hub's bookkeeping for one session (its snapshot is built from it):
    how it is reached (channel, identity, claim), when its events arrived,
    what arrived as the hub saw it across closes and revivals (agent, pid,
    parent, times, count) and what the hub itself decided (status, nudges,
    automatic actions).  What the engine knows of it -- level, reason,
    similarity, window, mutes, costs -- is read from ``Engine.summary``.

    The fields that look like the engine's (times, count, identity, status,
    detections) are not copies: the engine drops a session's detector state
    when it closes and starts again when it revives, the hub keeps the
    session across both; each says in a line why it is the hub's."""

    id: str
    origin: str
    source: str
    first_ts: float  # (the hub's: the engine forgets it on close; the store's first_seen)
    last_ts: float = 0.0  # (the hub's: across closes and revivals; the store's last_seen)
    last_activity: float = 0.0  # min(event ts, arrival): idle timing immune to clocks ahead
    last_arrival: float = 0.0  # when its latest event reached the hub
    events: int = 0  # events that reached it, across closes and revivals (the engine's restart at each)
    agent: str | None = None  # identity claimed by any of its events, kept across closes
    pid: int | None = None  # the pid claimed (``claim`` says what backs it), kept across closes
    parent: str | None = None  # the parent session claimed, kept across closes
    status: str = "live"  # the hub's lifecycle (live, idle, ended, stopped): not the engine's end status
    channel: Any = None
    identity: ProcessIdentity | None = None
    claim: PidClaim | None = None  # the pid, and what backs it
    kill_reason: str = "no process id is known for this session"
    #: The latest detection, kept after a close (the engine's go with its detector state).
    last_detection: Detection | None = None
    #: While live: the latest detection of each detector (for operator actions).
    latest: dict[str, Detection] = field(default_factory=dict)
    #: While live: bounded copies of its latest calls and messages (for the window).
    recent: deque[Event] = field(default_factory=lambda: deque(maxlen=RECENT_EVENTS))
    info: SessionInfo | None = None
    dirty: bool = True
    store_dirty: bool = True
    stored_at: float = 0.0
    auto_done: set[tuple] = field(default_factory=set)
    nudged: float = 0.0  # event time of the inject it has not recovered from
    stored_level: Level = Level.NONE  # the level its latest session row said
    steps_since_nudge: int = 0
    order: int = 0  # first-seen position: updates are published in this order
    #: seq of the latest OTLP event the engine kept: OTLP proves no identity, so
    #: a detection whose span reaches it drives no automatic action.
    otlp_seq: int = 0
    auto_skipped: bool = False  # the operator was told automatic actions were skipped
    #: The wait for the person it is in (monitor/hub/waiting.py), and whether it was noticed.
    waiting: InputWait | None = None
    wait_noticed: bool = False
    home: str = ""  # the source it was first seen from: what its live-session share counts against
    #: Wall-clock time its process was paused (SIGSTOP) by the operator; 0: running.
    paused: float = 0.0
    #: The guard for this session as the operator set it (None: ``[control] guard``).
    guard: bool | None = None
    #: What the guard denies: the loop at the guard's level, and its recent calls (monitor/hub/guard.py).
    guarded: Any = None
    guard_calls: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=GUARD_CALLS))
    #: (detector, pattern) marked a false positive: when (wall clock), kept across a restart
    #: (monitor/hub/false_positives.py).
    false_positives: dict[tuple[str, str], float] = field(default_factory=dict)
