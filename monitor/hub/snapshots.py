"""Session snapshots: building each session's :class:`~monitor.updates.SessionInfo`
and its window (the events the detectors compare, as the UI shows them).

The hub rebuilds the snapshot of every changed session on every publish
(1,000 live sessions: several thousand a second) while the UI shows the
window of one, so a window is taken cheaply (:class:`LazyWindow`) and made
into events only when read.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import TYPE_CHECKING, Any

from monitor.detect.analysis.calls import events as recalled_events
from monitor.detect.summary import NO_SPARKS
from monitor.events import Event, Kind, Level
from monitor.hub.false_positives import marked
from monitor.hub.state import RECENT_EVENTS, HubSession
from monitor.updates import SessionInfo, WindowSource

if TYPE_CHECKING:
    from monitor.detect.base import Detection
    from monitor.detect.engine import Engine
    from monitor.detect.summary import SessionSummary

#: Characters of content (and of each argument) kept in a window's copies (:func:`window_copy`).
WINDOW_CHARS = 512


class LazyWindow:
    """A session's detection window as it was when its snapshot was taken,
    turned into events only when first read, then kept.

    It keeps the window detector's records as they were (a tuple of at most a
    window's references; what a window event shows of a record -- its seq,
    time, tool, keys and evidence -- never changes once made) or the recent
    copies, and makes the events on demand, exactly as they would have been."""

    __slots__ = ("_records", "_recent", "_horizon", "_value")

    def __init__(self, records: tuple[Any, ...], recent: tuple[Event, ...] = (), horizon: int = 0):
        self._records = records
        self._recent = recent
        self._horizon = horizon
        self._value: tuple[Event, ...] | None = None

    @classmethod
    def of(cls, events: Sequence[Event]) -> LazyWindow:
        """A window already made."""
        window = cls(())
        window._value = tuple(events)
        return window

    def get(self) -> tuple[Event, ...]:
        value = self._value
        if value is None:
            if self._records:
                value = tuple(recalled_events(self._records))
            else:
                horizon = self._horizon
                value = tuple(event for event in self._recent if event.seq > horizon)
            self._value = value
            self._records = self._recent = ()  # what it was made from can go
        return value


EMPTY_WINDOW = LazyWindow.of(())


def window_snapshot(summary: SessionSummary, recent: Sequence[Event]) -> LazyWindow:
    """What the detectors compare now, as a :class:`LazyWindow` that builds it when read:
    the records of the detector that provides the session's window
    (:attr:`~monitor.detect.base.Detector.provides_window`), as they are, else
    the calls and messages among the session's last ``RECENT_EVENTS`` events."""
    if summary.window:
        return LazyWindow(summary.window)
    return LazyWindow((), tuple(recent), summary.events - RECENT_EVENTS)


def replies_window(state: HubSession, detector: str | None) -> tuple[Event, ...]:
    """For a session flagged for its replies (chanting, monologue, output or
    turn similarity): the replies its latest detection cites, not the call
    detectors' window (which showed one unrelated call)."""
    detection = state.latest.get(detector) if detector else None
    if detection is None or not detection.evidence:
        return ()
    if any(ref.kind != Kind.MESSAGE.value for ref in detection.evidence):
        return ()
    copies = {event.seq: event for event in state.recent}
    return tuple(copies[ref.seq] for ref in detection.evidence if ref.seq in copies)


def latest_per_session(
    detections: Sequence[Detection], live: Container[str], per_session: int
) -> list[Detection]:
    """The last ``per_session`` of ``detections`` for each session in ``live``,
    ordered by time (raised order among detections of one event)."""
    counts: dict[str, int] = {}
    found = []
    for detection in reversed(detections):
        session = detection.session
        count = counts.get(session, 0)
        if session in live and count < per_session:
            counts[session] = count + 1
            found.append(detection)
    found.reverse()
    return sorted(found, key=lambda d: (d.ts, d.session, d.seq))


def window_copy(event: Event) -> Event:
    """A copy of a call or message for the window, bounded in size: long
    content and arguments are cut to ``WINDOW_CHARS`` (a 1 MB message must
    not stay alive for the UI), the call's key kept for highlighting repeats."""
    content = event.content
    if len(content) > WINDOW_CHARS:
        content = content[:WINDOW_CHARS]
    args = event.args
    if args is not None and _size(args, WINDOW_CHARS * 4) < 0:
        args = {
            key: value[:WINDOW_CHARS] if isinstance(value, str) else "…"
            for key, value in list(args.items())[:16]
        }
    meta = event.meta if not event.meta or _size(event.meta, WINDOW_CHARS) >= 0 else {}
    copy = Event(
        event.kind,
        event.session,
        event.ts,
        event.source,
        event.line,
        event.agent,
        event.role,
        content,
        event.call_id,
        event.tool,
        args,
        event.is_error,
        meta=meta,
        seq=event.seq,
    )
    key = event.facts.call_key
    if key is not None:
        # Equal keys stay equal and different ones differ (but for a hash collision).
        copy.facts.call_key = key if len(key) <= WINDOW_CHARS else f"{key[:WINDOW_CHARS]}#{hash(key):x}"
    return copy


def _size(value: Any, budget: int) -> int:
    """``budget`` less the characters in ``value`` (JSON-like), or -1 once spent."""
    if isinstance(value, str):
        budget -= len(value)
    elif isinstance(value, dict):
        budget -= len(value)
        for key, item in value.items():
            if budget < 0:
                return -1
            budget = _size(item, budget - len(key) if isinstance(key, str) else budget)
    elif isinstance(value, (list, tuple)):
        budget -= len(value)
        for item in value:
            if budget < 0:
                return -1
            budget = _size(item, budget)
    else:
        budget -= 8
    return budget if budget >= 0 else -1


class Snapshots:
    """Builds each session's snapshot when it changed and someone reads it."""

    def __init__(self, engine: Engine, guard_default: bool = False):
        self.engine = engine
        self.guard_default = guard_default

    def guard_on(self, state: HubSession) -> bool:
        return self.guard_default if state.guard is None else state.guard

    def info(self, state: HubSession) -> SessionInfo:
        if state.dirty or state.info is None:
            state.info = self.build(state)
            state.dirty = False
        return state.info

    def build(self, state: HubSession) -> SessionInfo:
        summary = self.engine.summary(state.id)
        level = summary.level
        previous = state.info
        window: WindowSource
        if summary.live and state.status == "live":
            similarity, by_detector = summary.similarity, summary.detector_similarity
            replies = replies_window(state, summary.detector if level else None)
            window = LazyWindow.of(replies) if replies else window_snapshot(summary, state.recent)
        elif previous is not None:  # the window as it was (the same object, built or not)
            similarity, by_detector = previous.similarity, previous.detector_similarity
            window = previous.window_source
        else:
            similarity, by_detector, window = NO_SPARKS, {}, EMPTY_WINDOW
        if state.identity is not None and not state.kill_reason:
            kill = ""
        elif state.channel is not None:
            kill = ""  # the agent can be asked to stop over its channel
        else:
            kill = state.kill_reason
        return SessionInfo(
            id=state.id,
            agent=state.agent,
            source=state.source,
            origin=state.origin,
            pid=state.pid,
            parent=state.parent,
            first_ts=state.first_ts,
            last_ts=state.last_ts,
            events=state.events,
            status=state.status,
            level=level,
            detector=summary.detector,
            reason=summary.reason,
            nudge=summary.nudge,
            similarity=similarity,
            detector_similarity=by_detector,
            window_source=window,
            last_detection=state.last_detection,
            muted=summary.muted,
            channel=state.channel.name if state.channel is not None else "none",
            kill=kill,
            nudged=state.nudged if state.status == "live" else 0.0,
            quiet_until=summary.quiet_until if level < Level.WARN else 0.0,
            episode_cost=summary.episode_cost,
            loop_cost=summary.loop_cost,
            waiting_since=state.waiting.since if state.waiting is not None else 0.0,
            waiting_why=state.waiting.why if state.waiting is not None else "",
            waiting_for=state.waiting.asks if state.waiting is not None else "",
            paused=state.paused if state.status == "live" else 0.0,
            guard=self.guard_on(state),
            false_positives=marked(state) if state.false_positives else (),
        )
