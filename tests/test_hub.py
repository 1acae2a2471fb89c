"""The hub wires events through the engine to the store and subscribers, and carries out operator actions.

Real SQLite stores and inbox files in tmp_path, real subprocesses for kills;
time that matters (idle timeouts) comes from an injected clock, never a sleep.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time

import pytest

from monitor.config import build_config
from monitor.control import InboxChannel, Outcome
from monitor.events import Event, Kind, Level
from monitor.formats.base import Problem
from monitor.hub import Hub
from monitor.store import Store
from monitor.updates import (
    ActionFinished,
    DetectionRaised,
    EpisodeChanged,
    ProblemReported,
    SessionChanged,
    SessionInfo,
    Stats,
)

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def loop_events(
    session: str, n: int, *, ts: float = T0, start: int = 0, source: str = "/logs/a.jsonl"
) -> list[Event]:
    """``n`` identical bash calls with identical results: exact_repeat warns from the 3rd."""
    out = []
    for i in range(start, start + n):
        out.append(
            Event(
                Kind.TOOL_CALL,
                session,
                ts + i,
                source=source,
                line=2 * i + 1,
                tool="bash",
                args={"cmd": "ls"},
                call_id=f"c{i}",
            )
        )
        out.append(
            Event(
                Kind.TOOL_RESULT,
                session,
                ts + i + 0.5,
                source=source,
                line=2 * i + 2,
                call_id=f"c{i}",
                content="nothing here",
            )
        )
    return out


@pytest.fixture
def config():
    return build_config({})


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "lw.db", flush_ms=20)
    store.start()
    yield store
    store.close()


@pytest.fixture
async def hub_factory():
    hubs: list[Hub] = []

    async def make(config, store=None, **kwargs) -> Hub:
        hub = Hub(config, store, **kwargs)
        await hub.start()
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        await hub.stop()


async def test_events_reach_engine_subscribers_and_store(config, store, hub_factory):
    """A looping session raises detections to subscribers, a WARN snapshot, and rows in the store."""
    clock = Clock(T0 + 10)
    hub = await hub_factory(config, store, clock=clock)
    updates: list[object] = []
    hub.subscribe(updates.append)
    await hub.submit([Event(Kind.SESSION_START, "s1", T0, source="/logs/a.jsonl", agent="demo")])
    await hub.submit(loop_events("s1", 4, ts=T0 + 1))
    await hub.join()
    detections = [u.detection for u in updates if isinstance(u, DetectionRaised)]
    assert [d.count for d in detections if d.detector == "exact_repeat"] == [3, 4]
    info = hub.session("s1")
    assert isinstance(info, SessionInfo)
    assert info.level >= Level.WARN and info.detector and info.nudge
    assert info.events == 9 and info.agent == "demo" and info.origin == "file" and info.status == "live"
    assert info.window and info.similarity and info.last_detection is detections[-1]
    assert any(isinstance(u, SessionChanged) and u.info.id == "s1" for u in updates)
    stats = hub.stats()
    assert stats.events_total == 9 and stats.sessions_live == 1 and stats.warnings_open == 1
    await hub.stop()
    assert store.count_events("s1") == 9
    # One episode; the first detection of each of its rungs is the evidence kept (not one per repeat).
    changes = [u.change for u in updates if isinstance(u, EpisodeChanged)]
    assert [c.kind for c in changes][:1] == ["opened"] and {c.episode.number for c in changes} == {1}
    rungs = [c for c in changes if c.kind in ("opened", "escalated")]
    assert len(store.detections("s1")) == len(rungs) < len(detections)
    row = store.get_session("s1")
    assert row["level"] == info.level.label and row["agent"] == "demo"


async def test_submit_waits_when_the_queue_is_full(config):
    """Back-pressure: with the worker not running, the queue holds its bound and further submits wait."""
    hub = Hub(config, queue_items=2)
    await hub.submit(loop_events("s", 1))
    await hub.submit(loop_events("s", 1, start=1))
    blocked = asyncio.create_task(hub.submit(loop_events("s", 1, start=2)))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not blocked.done() and hub._queue.qsize() == 2
    await hub.start()
    await blocked
    await hub.join()
    assert hub.session("s").events == 6
    await hub.stop()


async def test_big_submissions_are_split_into_bounded_batches(config, hub_factory):
    """A flood submitted at once is queued in bounded batches and fully processed."""
    hub = await hub_factory(config, queue_items=2)
    events = [Event(Kind.MESSAGE, "flood", T0 + i, role="assistant", content=f"m{i}") for i in range(5000)]
    await hub.submit(events)
    await hub.join()
    assert hub.session("flood").events == 5000 and hub.events_total == 5000


async def test_session_end_closes_and_new_events_revive(config, hub_factory):
    """session_end frees the session's detector state; the session reappears live if it speaks again."""
    hub = await hub_factory(config)
    await hub.submit(loop_events("s", 3) + [Event(Kind.SESSION_END, "s", T0 + 10, status="done")])
    await hub.join()
    info = hub.session("s")
    assert info.status == "ended" and "s" not in hub.engine.sessions
    assert info.window, "the closed session keeps its last window for the UI"
    await hub.submit([Event(Kind.MESSAGE, "s", T0 + 20, role="assistant", content="back")])
    await hub.join()
    assert hub.session("s").status == "live" and "s" in hub.engine.sessions


async def test_idle_sessions_are_closed_after_the_timeout(config, hub_factory):
    """A session silent for longer than idle_timeout_seconds becomes idle and its engine state is freed."""
    config.sources = dataclasses.replace(config.sources, idle_timeout_seconds=60)
    clock = Clock(T0)
    hub = await hub_factory(config, clock=clock)
    await hub.submit(
        [
            Event(Kind.MESSAGE, "quiet", T0, role="assistant", content="hi"),
            Event(Kind.MESSAGE, "busy", T0, role="assistant", content="hi"),
        ]
    )
    await hub.join()
    clock.now = T0 + 50
    await hub.submit([Event(Kind.MESSAGE, "busy", T0 + 50, role="assistant", content="still here")])
    await hub.join()
    clock.now = T0 + 61
    assert hub.sweep_idle() == ["quiet"]
    assert hub.session("quiet").status == "idle" and "quiet" not in hub.engine.sessions
    assert hub.session("busy").status == "live"
    assert hub.stats().sessions_live == 1


async def test_replayed_history_is_not_closed_mid_replay(config, hub_factory):
    """Hours-old events still arriving keep their session live (detectors intact); it goes idle once they stop."""
    config.sources = dataclasses.replace(config.sources, idle_timeout_seconds=60)
    clock = Clock(T0 + 7200)
    hub = await hub_factory(config, clock=clock)
    await hub.submit(loop_events("old", 2))
    await hub.join()
    assert hub.sweep_idle() == []
    await hub.submit(loop_events("old", 1, start=2))
    await hub.join()
    assert [d.count for d in hub.engine.sessions["old"].detections if d.detector == "exact_repeat"] == [3]
    clock.now += 61
    assert hub.sweep_idle() == ["old"]


async def test_problems_are_published(config, hub_factory):
    """Bad input reported by a source reaches subscribers as ProblemReported."""
    hub = await hub_factory(config)
    updates: list[object] = []
    hub.subscribe(updates.append)
    await hub.submit([], [Problem("/logs/a.jsonl", 3, "invalid JSON")])
    await hub.join()
    assert [u.problem.where for u in updates if isinstance(u, ProblemReported)] == ["/logs/a.jsonl:3"]


async def test_a_failing_subscriber_does_not_stop_the_others(config, hub_factory):
    """One subscriber raising does not prevent delivery to the next."""
    hub = await hub_factory(config)

    def broken(_update):
        raise RuntimeError("boom")

    seen: list[object] = []
    hub.subscribe(broken)
    unsubscribe = hub.subscribe(seen.append)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    assert any(isinstance(u, DetectionRaised) for u in seen)
    unsubscribe()
    count = len(seen)
    await hub.submit(loop_events("s", 1, start=3))
    await hub.join()
    assert len(seen) == count


class RecordingInbox(InboxChannel):
    """An inbox that notes what the store held at the moment of delivery."""

    def __init__(self, log_path, store):
        super().__init__(log_path)
        self.store = store
        self.seen_at_delivery: list[dict] = []

    async def send(self, message):
        self.seen_at_delivery = self.store.actions(message["session"])
        return await super().send(message)


async def test_inject_is_recorded_before_it_is_delivered(config, store, hub_factory, tmp_path):
    """inject: a pending action row is committed before the inbox line is written, then its outcome."""
    log = tmp_path / "run.jsonl"
    hub = await hub_factory(config, store)
    channel = RecordingInbox(log, store)
    hub.register_channel("s", channel)
    finished: list[ActionFinished] = []
    hub.subscribe(lambda u: finished.append(u) if isinstance(u, ActionFinished) else None)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    assert hub.session("s").channel == "inbox"
    record = await hub.act("inject", "s", text="try something else")
    assert record.outcome == "delivered"
    assert [(a["kind"], a["outcome"]) for a in channel.seen_at_delivery] == [("inject", "pending")]
    lines = [json.loads(x) for x in channel.path.read_text().splitlines()]
    assert lines[-1]["type"] == "inject" and lines[-1]["text"] == "try something else"
    assert lines[-1]["session"] == "s"
    rows = store.actions("s")
    assert [(a["kind"], a["outcome"], a["text"]) for a in rows] == [
        ("inject", "delivered", "try something else")
    ]
    assert finished and finished[-1].action == record


async def test_inject_defaults_to_the_current_nudge(config, hub_factory, tmp_path):
    """Without text, inject sends the session's current nudge."""
    hub = await hub_factory(config)
    channel = InboxChannel(tmp_path / "run.jsonl")
    hub.register_channel("s", channel)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    record = await hub.act("inject", "s")
    assert record.text == hub.session("s").nudge and "[loopwatch]" in record.text
    assert json.loads(channel.path.read_text())["text"] == record.text


async def test_an_ended_session_refuses_inject_and_kill_and_says_why(config, store, hub_factory, tmp_path):
    """Its inbox would be written and reported delivered with nobody to read it: refused, recorded."""
    hub = await hub_factory(config, store)
    channel = InboxChannel(tmp_path / "run.jsonl")
    hub.register_channel("s", channel)
    await hub.submit(loop_events("s", 3) + [Event(Kind.SESSION_END, "s", T0 + 10, status="done")])
    await hub.join()
    inject = await hub.act("inject", "s", text="hello?")
    kill = await hub.act("kill", "s")
    assert (inject.outcome, kill.outcome) == ("refused", "refused")
    assert "the session has ended" in inject.detail and hub.actions.kill_refusal("s") == kill.detail
    assert not channel.path.exists()
    assert [a["outcome"] for a in store.actions("s")] == ["refused", "refused"]
    assert hub.actions.unreachable("s") and not hub.actions.unreachable("nobody")


async def test_inject_without_a_channel_is_unsupported(config, store, hub_factory):
    """A session with no channel cannot be injected into; the attempt is still recorded."""
    hub = await hub_factory(config, store)
    await hub.submit(loop_events("s", 3, source="socket:x"))
    await hub.join()
    record = await hub.act("inject", "s", text="hello")
    assert record.outcome == "unsupported" and "no control channel" in record.detail
    assert [a["outcome"] for a in store.actions("s")] == ["unsupported"]


async def test_actions_work_without_a_store(config, hub_factory):
    """store=None: actions still happen and get ids."""
    hub = await hub_factory(config)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    first = await hub.act("ack", "s")
    second = await hub.act("mute", "s", detector="exact_repeat")
    assert (first.outcome, second.outcome) == ("delivered", "delivered")
    assert second.id > first.id


async def test_ack_returns_to_watching_and_cools_the_pattern_down(config, hub_factory):
    """ack: level back to watching; the same loop right after is only a notice (cool-down, event time)."""
    hub = await hub_factory(config)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    assert hub.session("s").level >= Level.WARN
    await hub.act("ack", "s")
    assert hub.session("s").level == Level.NONE
    raised: list = []
    hub.subscribe(lambda u: raised.append(u.detection) if isinstance(u, DetectionRaised) else None)
    await hub.submit(loop_events("s", 1, start=3))
    await hub.join()
    exact = [d for d in raised if d.detector == "exact_repeat"]
    assert exact and exact[-1].level == Level.NOTICE and exact[-1].suppressed


async def test_false_positive_and_mute(config, store, hub_factory):
    """false_positive stops the pattern from escalating; mute stops the detector for the session."""
    hub = await hub_factory(config, store)
    await hub.submit(loop_events("a", 3) + loop_events("b", 3))
    await hub.join()
    exact = hub.engine.sessions["a"].detections[0]
    assert exact.detector == "exact_repeat"
    fp = await hub.act("false_positive", "a", detection=exact)
    assert fp.outcome == "delivered"
    mute = await hub.act("mute", "b", detector="exact_repeat")
    assert mute.outcome == "delivered" and "exact_repeat" in hub.session("b").muted
    raised: list = []
    hub.subscribe(lambda u: raised.append(u.detection) if isinstance(u, DetectionRaised) else None)
    await hub.submit(loop_events("a", 1, start=3) + loop_events("b", 1, start=3))
    await hub.join()
    exact_repeats = [(d.session, d.level) for d in raised if d.detector == "exact_repeat"]
    assert exact_repeats == []  # a: marked a false positive (not even a notice); b: muted
    assert {a["kind"] for a in store.actions("a") + store.actions("b")} == {"false_positive", "mute"}


async def test_unknown_session_and_kind(config, store, hub_factory):
    """An action on an unknown session is recorded as failed; an unknown kind is a programming error."""
    hub = await hub_factory(config, store)
    record = await hub.act("ack", "nobody")
    assert record.outcome == "failed" and [a["outcome"] for a in store.actions("nobody")] == ["failed"]
    with pytest.raises(ValueError):
        await hub.act("explode", "nobody")


async def test_kill_without_a_pid_is_refused(config, hub_factory):
    """No pid and no channel: kill is refused with the reason, and describe_kill says so."""
    hub = await hub_factory(config)
    await hub.submit(loop_events("s", 1))
    await hub.join()
    assert "no process id" in hub.describe_kill("s")
    assert hub.session("s").kill
    record = await hub.act("kill", "s")
    assert record.outcome == "refused" and "no process id" in record.detail


async def test_kill_terminates_the_sessions_process(config, store, hub_factory):
    """kill: the identity captured at first sight is checked, the agent gets SIGTERM and exits."""
    config.control = dataclasses.replace(config.control, kill_grace_seconds=5)
    agent = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(120)")
    try:
        hub = await hub_factory(config, store)
        # A record newer than the process: one older than it would name a reused pid.
        await hub.submit([Event(Kind.SESSION_START, "s", time.time(), agent="sleepy", pid=agent.pid)])
        await hub.join()
        info = hub.session("s")
        assert info.pid == agent.pid and info.kill == ""
        assert hub.describe_kill("s").startswith(f"SIGTERM pid {agent.pid}")
        assert "NOT confirmed by the agent" in hub.describe_kill("s")
        record = await hub.act("kill", "s")
        assert record.outcome == "delivered", record.detail
        assert await asyncio.wait_for(agent.wait(), 10) != 0
        assert [(a["kind"], a["outcome"]) for a in store.actions("s")] == [("kill", "delivered")]
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()


async def test_kill_of_a_pid_that_is_not_running_is_refused(config, hub_factory):
    """A pid from a log whose process is gone gives a clear refusal, not a signal to a stranger."""
    probe = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await probe.wait()
    hub = await hub_factory(config)
    await hub.submit([Event(Kind.SESSION_START, "s", T0, pid=probe.pid)])
    await hub.join()
    record = await hub.act("kill", "s")
    assert record.outcome == "refused" and "not running" in record.detail


class FakeSocket:
    name = "socket"

    def __init__(self):
        self.sent: list[dict] = []

    async def send(self, message):
        self.sent.append(message)
        return Outcome("delivered", "sent")


async def test_socket_channel_sets_origin_and_gets_ack(config, hub_factory):
    """A session registered with a socket channel is a socket session; ack is sent to the agent."""
    hub = await hub_factory(config)
    channel = FakeSocket()
    hub.register_channel("s", channel)
    await hub.submit(loop_events("s", 3, source="socket:pid 42"))
    await hub.join()
    info = hub.session("s")
    assert (info.origin, info.channel) == ("socket", "socket")
    record = await hub.act("ack", "s")
    assert record.outcome == "delivered" and channel.sent[-1]["type"] == "ack"


async def test_auto_inject_on_warn(config, store, hub_factory):
    """auto_inject: a fresh warn sends the nudge through the channel once per rung, recorded as auto."""
    config.control = dataclasses.replace(config.control, auto_inject=True)
    clock = Clock(T0 + 5)
    hub = await hub_factory(config, store, clock=clock)
    channel = FakeSocket()
    hub.register_channel("s", channel)
    finished: list[ActionFinished] = []
    hub.subscribe(lambda u: finished.append(u) if isinstance(u, ActionFinished) else None)
    await hub.submit(loop_events("s", 4))
    await hub.join()
    await hub.stop()  # waits for the spawned action
    injects = [m for m in channel.sent if m["type"] == "inject"]
    assert len(injects) == 1 and injects[0]["text"].startswith("[loopwatch]")
    assert finished[-1].action.who == "loopwatch (auto)"
    assert [a["who"] for a in store.actions("s")] == ["loopwatch (auto)"]


async def test_auto_response_ignores_replayed_history(config, hub_factory):
    """Detections from hours-old events (a replayed log) never trigger an automatic inject."""
    config.control = dataclasses.replace(config.control, auto_inject=True)
    hub = await hub_factory(config, clock=Clock(T0 + 7200))
    channel = FakeSocket()
    hub.register_channel("s", channel)
    await hub.submit(loop_events("s", 4))
    await hub.join()
    await hub.stop()
    assert channel.sent == []


async def test_stats_are_published(config, hub_factory):
    """Stats carry the totals; events per second are computed from the hub's clock."""
    clock = Clock(T0)
    hub = await hub_factory(config, clock=clock)
    await hub.submit(loop_events("s", 5))
    await hub.join()
    clock.now = T0 + 1
    stats = hub.stats()
    assert isinstance(stats, Stats) and stats.events_total == 10 and stats.events_per_sec == 10.0


def _mixed_events(session: str, n: int, *, ts: float = T0) -> list[Event]:
    """Calls that repeat now and then (so windows fill and slide), their results, and messages."""
    out = []
    for i in range(n):
        args = {"cmd": "ls"} if i % 4 == 0 else {"cmd": f"cat f{i % 13}.py"}
        out.append(
            Event(
                Kind.TOOL_CALL,
                session,
                ts + i,
                source="/logs/m.jsonl",
                tool="bash",
                args=args,
                call_id=f"c{i}",
            )
        )
        out.append(
            Event(
                Kind.TOOL_RESULT,
                session,
                ts + i + 0.2,
                source="/logs/m.jsonl",
                call_id=f"c{i}",
                content="nothing here" if i % 4 == 0 else f"line {i}",
            )
        )
        if i % 3 == 0:
            out.append(Event(Kind.MESSAGE, session, ts + i + 0.4, role="assistant", content=f"step {i}"))
    return out


def _window(engine_state, recent) -> tuple[Event, ...]:
    """What the hub built eagerly at publish time before windows were lazy: the
    call detectors' window (events, or references matched to ``recent``
    copies), else the calls and messages among the session's last
    ``RECENT_EVENTS`` events."""
    from monitor.hub.state import RECENT_EVENTS

    compared = engine_state.window()
    if compared:
        events = [item for item in compared if isinstance(item, Event)]
        if len(events) == len(compared):
            return tuple(events)
        copies = {event.seq: event for event in recent}
        matched = tuple(copies[item.seq] for item in compared if item.seq in copies)
        if matched:
            return matched
    horizon = engine_state.events - RECENT_EVENTS
    return tuple(event for event in recent if event.seq > horizon)


async def test_a_snapshot_window_is_built_when_read_and_is_the_window_of_its_time(config, hub_factory):
    """SessionInfo.window is made from a snapshot when first read: read long after,
    while the detectors' windows have moved on (or the session ended), it holds
    exactly the events the hub used to build at publish time; a tuple, the same
    object on every read, and as immutable as the rest of the snapshot."""
    from monitor.hub.snapshots import replies_window as _replies_window

    hub = await hub_factory(config)
    published: list[tuple[SessionInfo, tuple[Event, ...]]] = []

    def on_update(update):
        if isinstance(update, SessionChanged):
            info = update.info
            engine_state = hub.engine.sessions.get(info.id)
            if engine_state is not None and info.status == "live":  # what was built eagerly before
                state = hub.lifecycle.sessions[info.id]
                replies = _replies_window(state, info.detector if info.level else None)  # message loops
                published.append((info, replies or _window(engine_state, state.recent)))

    hub.subscribe(on_update)
    events = _mixed_events("calls", 60) + [
        Event(Kind.MESSAGE, "talk", T0 + i, role="assistant", content=f"thinking {i}") for i in range(40)
    ]
    for start in range(0, len(events), 7):
        await hub.submit(events[start : start + 7])
        await hub.join()
    await hub.submit([Event(Kind.SESSION_END, "calls", T0 + 100, status="done")])
    await hub.join()
    assert len(published) > 20
    assert any(info.id == "talk" for info, _ in published) and any(len(w) == 10 for _, w in published)
    for info, eager in published:
        window = info.window
        assert type(window) is tuple and window == eager
        assert [type(e) for e in window] == [type(e) for e in eager]
        assert [e.summary() for e in window] == [e.summary() for e in eager]
        assert info.window is window
        with pytest.raises(dataclasses.FrozenInstanceError):
            info.window = ()  # type: ignore[misc]
    ended = hub.session("calls")  # built when it closed: no detector records kept alive
    assert ended.status == "ended" and type(ended.window) is tuple and len(ended.window) == 10
    assert getattr(ended.window_source, "_records", ()) == ()


async def test_snapshots_are_built_for_publishing_only_when_someone_takes_them(config, hub_factory):
    """Subscribers may take only some kinds of update; while none takes
    SessionChanged the hub builds no snapshots to publish, and sessions()
    still answers with up-to-date ones."""
    hub = await hub_factory(config)
    built = []
    build = hub.snapshots.build
    hub.snapshots.build = lambda state: built.append(state.id) or build(state)
    detections: list[object] = []
    hub.subscribe(detections.append, kinds=(DetectionRaised,))
    await hub.submit(loop_events("s", 4))
    await hub.join()
    assert detections and all(isinstance(u, DetectionRaised) for u in detections)
    assert built == []
    info = hub.session("s")
    assert built == ["s"] and info.events == 8 and info.level >= Level.WARN and len(info.window) == 4
    changes: list[object] = []
    unsubscribe = hub.subscribe(changes.append, kinds=(SessionChanged,))
    await hub.submit(loop_events("s", 1, start=4))
    await hub.join()
    assert [type(u) for u in changes] == [SessionChanged] and changes[0].info.events == 10
    unsubscribe()
    await hub.submit(loop_events("s", 1, start=5))
    await hub.join()
    assert len(changes) == 1 and hub.session("s").events == 12


async def test_many_small_submissions_are_processed_in_order(config, store, hub_factory):
    """The worker takes what is queued several items at a time (1,000 tailed
    files submit a line or two each): every event is processed once, in order,
    and stored."""
    hub = await hub_factory(config, store)
    events = _mixed_events("many", 150)
    submits = [hub.submit(events[i : i + 2]) for i in range(0, len(events), 2)]
    await asyncio.gather(*submits)
    await hub.join()
    assert hub.events_total == len(events) == hub.session("many").events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    await hub.stop()
    assert store.count_events("many") == len(events)
    assert [row["call_id"] for row in store.events("many", limit=1000)] == [e.call_id for e in events]


async def test_the_collector_runs_rarely_while_a_hub_runs(config):
    """While any hub runs the cyclic collector's first threshold is raised; the
    last hub to stop puts it back as it was."""
    import gc

    from monitor.hub.core import LIVE_GC_THRESHOLD

    before = gc.get_threshold()
    first, second = Hub(config), Hub(config)
    await first.start()
    await second.start()
    assert gc.get_threshold() == (max(LIVE_GC_THRESHOLD, before[0]), *before[1:])
    await first.stop()
    assert gc.get_threshold()[0] == max(LIVE_GC_THRESHOLD, before[0])
    await second.stop()
    assert gc.get_threshold() == before


async def test_the_hub_answers_a_patterns_history(config, hub_factory):
    """The UI asks the hub, not its policy: how often a pattern was flagged, and
    until when an acknowledgement quiets it."""
    hub = await hub_factory(config)
    assert hub.pattern_history("nobody", "exact_repeat", "x") == (0, None)
    await hub.submit(loop_events("s", 4))
    await hub.join()
    last = hub.session("s").last_detection
    occurrences, acked = hub.pattern_history("s", last.detector, last.pattern)
    assert occurrences >= 1 and acked is None
    await hub.act("ack", "s")
    assert hub.pattern_history("s", last.detector, last.pattern)[1] is not None


async def test_a_stored_session_replays_to_the_live_sparklines(config, store, hub_factory):
    """replay_similarity rebuilds from the store the similarity the live engine drew."""
    from monitor.hub.replay import replay_similarity

    hub = await hub_factory(config, store)
    await hub.submit(loop_events("s", 6))
    await hub.join()
    live = hub.session("s")
    await hub.stop()
    progress: list[tuple[int, int]] = []
    overall, by_detector = replay_similarity(config, store, "s", progress=lambda *p: progress.append(p))
    assert overall == live.similarity and by_detector == live.detector_similarity
    assert progress[0] == (0, 12) and progress[-1] == (12, 12)
    assert replay_similarity(config, store, "nobody") is None


async def test_the_window_comes_from_the_detector_that_provides_it(hub_factory):
    """No detector is named in the hub: the one that says provides_window gives
    the window; without it (disabled) the session's recent calls stand in."""
    with_window = await hub_factory(build_config({}))
    without = await hub_factory(build_config({"detectors": {"exact_repeat": {"enabled": False}}}))
    for hub in (with_window, without):
        await hub.submit(loop_events("s", 4))
        await hub.join()
    providers = [d for d in with_window.engine.sessions["s"].detectors if d.provides_window]
    assert len(providers) == 1 and providers[0].window_records()
    assert [e.seq for e in with_window.session("s").window] == [e.seq for e in providers[0].window()]
    assert not any(d.provides_window for d in without.engine.sessions["s"].detectors)
    assert len(without.session("s").window) == 4
