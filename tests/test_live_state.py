"""What the monitor shows must be true: acknowledge, nudged and recovered,
false positives, and whether a session is live (issue 15, items 2-5).

A real hub with a real SQLite store and real inbox files; time comes from an
injected clock.  ``tests/test_ui_live_state.py`` checks the screens.
"""

from __future__ import annotations

from monitor.control import InboxChannel
from monitor.detect.base import Detection
from monitor.detect.escalation import ACKNOWLEDGED, EscalationPolicy
from monitor.events import Event, Kind, Level
from monitor.hub.actions import RECOVERY_STEPS
from monitor.updates import DetectionRaised
from tests.test_hub import T0, Clock, config, hub_factory, loop_events, store  # noqa: F401  (fixtures)


def calls(
    session: str, commands: list[str], *, ts: float, source: str = "/logs/a.jsonl", line: int = 1000
) -> list[Event]:
    """One call and its (distinct) result per command."""
    out = []
    for i, cmd in enumerate(commands):
        out.append(
            Event(
                Kind.TOOL_CALL,
                session,
                ts + i,
                source=source,
                line=line + 2 * i,
                tool="bash",
                args={"cmd": cmd},
                call_id=f"x{line + i}",
            )
        )
        out.append(
            Event(
                Kind.TOOL_RESULT,
                session,
                ts + i + 0.5,
                source=source,
                line=line + 2 * i + 1,
                call_id=f"x{line + i}",
                content=f"output of {cmd}",
            )
        )
    return out


def stored_level(store, session: str) -> str:
    store.flush()
    return store.get_session(session)["level"]


# -- acknowledge ----------------------------------------------------------------------------------


async def test_history_and_dashboard_agree_after_an_acknowledged_loop_goes_on(config, store, hub_factory):
    """After ``a``, the quieted pattern's notices must not make history say "notice" while a
    new pattern has the session at warn (history said "Final ○ notice" next to a terminate row)."""
    hub = await hub_factory(config, store)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    await hub.act("ack", "s")
    # A new pattern breaks through; the acknowledged one goes on, quieted.
    pwd = [
        Event(
            e.kind,
            e.session,
            e.ts,
            source=e.source,
            line=e.line + 100,
            tool=e.tool,
            args={"cmd": "pwd"} if e.args else None,
            call_id=e.call_id + "p",
            content=e.content,
        )
        for e in loop_events("s", 3, start=3)
    ]
    await hub.submit(pwd + loop_events("s", 3, start=6))
    await hub.join()
    info = hub.session("s")
    assert info.level >= Level.WARN
    assert stored_level(store, "s") == info.level.label


def detection(count: int, ts: float, level: Level = Level.WARN, pattern: str = "bash:ls") -> Detection:
    return Detection(
        "exact_repeat",
        level,
        1.0,
        f"same call {count} times",
        pattern,
        count=count,
        session="s",
        ts=ts,
        seq=count,
    )


def test_acknowledge_quiets_standing_patterns_until_clearly_worse():
    """Quieted: the patterns standing at the ack, for the cool-down.  Breaks through: a new
    pattern, or a quieted one whose count doubled (and grew by WORSE_BY)."""
    policy = EscalationPolicy()
    for n in (3, 4):
        policy.apply(detection(n, T0 + n))
    policy.acknowledge("s", T0 + 4)
    quiet = policy.apply(detection(5, T0 + 5))
    assert quiet.level == Level.NOTICE and quiet.suppressed == ACKNOWLEDGED
    assert policy.sessions["s"].level < Level.WARN
    new = policy.apply(detection(3, T0 + 6, pattern="bash:pwd"))
    assert new.level >= Level.WARN and not new.suppressed
    worse = policy.apply(detection(8, T0 + 7))
    assert worse.level >= Level.WARN and not worse.suppressed
    after = policy.apply(detection(3, T0 + 4 + policy.settings.cooldown_seconds + 1, pattern="bash:cat"))
    assert after.level >= Level.WARN


# -- nudged, then recovered ---------------------------------------------------------------------------


async def test_a_nudged_session_that_changes_course_returns_to_watching(tmp_path, config, store, hub_factory):
    clock = Clock(T0 + 5)
    hub = await hub_factory(config, store, clock=clock)
    log = tmp_path / "agent.jsonl"
    log.write_text("")
    hub.register_channel("s", InboxChannel(log))
    await hub.submit(loop_events("s", 4))
    await hub.join()
    assert hub.session("s").level >= Level.WARN and hub.stats().warnings_open == 1
    record = await hub.act("inject", "s")
    assert record.outcome == "delivered"
    assert hub.session("s").nudged
    # Still looping: stays nudged and open.
    await hub.submit(loop_events("s", 2, start=4))
    await hub.join()
    assert hub.session("s").nudged and hub.session("s").level >= Level.WARN
    # Changed course: different calls, no warning.
    await hub.submit(calls("s", [f"step {i}" for i in range(RECOVERY_STEPS)], ts=T0 + 20))
    await hub.join()
    info = hub.session("s")
    assert not info.nudged and info.level == Level.NONE and "recovered" in info.reason
    assert hub.stats().warnings_open == 0
    await hub.stop()
    row = store.get_session("s")
    assert row["level"] == "watching" and row["peak"] in ("warn", "critical", "terminate")
    assert [a["kind"] for a in store.actions("s")] == ["inject"] and store.detections("s")


# -- false positive -----------------------------------------------------------------------------------


async def test_a_false_positive_sticks_in_feed_row_and_store(config, store, hub_factory):
    hub = await hub_factory(config, store)
    await hub.submit(loop_events("s", 3))
    await hub.join()
    flagged = hub.session("s").last_detection
    await hub.act("false_positive", "s", detection=flagged)
    store.flush()
    before = len(store.detections("s"))
    feed: list = []
    hub.subscribe(lambda u: feed.append(u.detection) if isinstance(u, DetectionRaised) else None)
    await hub.submit(loop_events("s", 4, start=3))
    await hub.join()
    same = [d for d in feed if (d.detector, d.pattern) == (flagged.detector, flagged.pattern)]
    assert same == []  # the feed logs nothing more for it, not even notices
    assert hub.session("s").level < Level.WARN
    store.flush()
    assert [
        d
        for d in store.detections("s")[before:]
        if (d["detector"], d["pattern"]) == (flagged.detector, flagged.pattern)
    ] == []


# -- live only while delivered -----------------------------------------------------------------------


async def test_sessions_of_a_stopped_watcher_are_stopped_not_live(config, store, hub_factory):
    hub = await hub_factory(config, store)
    await hub.submit(loop_events("s", 2))
    await hub.join()
    assert hub.session("s").status == "live"
    await hub.stop()
    assert hub.session("s").status == "stopped"
    assert store.get_session("s")["status"] == "stopped"


async def test_replayed_history_goes_idle_soon_after_its_source_went_quiet(config, hub_factory):
    """A transcript from long ago is not "live" a minute after it was read."""
    clock = Clock(T0 + 365 * 86400)
    hub = await hub_factory(config, clock=clock)
    await hub.submit(loop_events("old", 2))
    await hub.join()
    assert hub.session("old").status == "live"  # while it is being delivered
    clock.now += 10
    assert hub.sweep_idle() == ["old"] and hub.session("old").status == "idle"


# -- the window panel's evidence ------------------------------------------------------------------------


async def test_a_session_flagged_for_its_replies_shows_the_replies_in_its_window(config, hub_factory):
    """Monologue/chanting: the window showed "(1 events)", an unrelated read_file call."""
    hub = await hub_factory(config)
    events = [
        Event(
            Kind.TOOL_CALL,
            "m",
            T0,
            source="/logs/m.jsonl",
            line=1,
            tool="read_file",
            args={"path": "src/cache.py"},
            call_id="r1",
        ),
        Event(
            Kind.TOOL_RESULT,
            "m",
            T0 + 1,
            source="/logs/m.jsonl",
            line=2,
            call_id="r1",
            content="class Cache: ...",
        ),
    ]
    thoughts = [  # the demo's monologue agent's
        "I should look at how the cache is invalidated before changing anything.",
        "Thinking about it more, the invalidation might happen in the middleware instead.",
        "Before touching the middleware I want to be sure about the request lifecycle.",
        "The lifecycle suggests the cache key is computed too early, which would explain it.",
        "If the key is computed early, then the fix belongs in the key builder, not the middleware.",
    ]
    for n in range(12):
        events.append(
            Event(
                Kind.MESSAGE,
                "m",
                T0 + 10 + 5 * n,
                source="/logs/m.jsonl",
                line=3 + n,
                role="assistant",
                content=thoughts[n % len(thoughts)],
            )
        )
    await hub.submit(events)
    await hub.join()
    info = hub.session("m")
    assert info.level >= Level.WARN, info
    assert len(info.window) > 1 and all(e.kind is Kind.MESSAGE for e in info.window)


# -- sparklines --------------------------------------------------------------------------------------


def sparklines_of(name: str) -> tuple[tuple[float, ...], dict[str, tuple[float, ...]]]:
    """A scenario of the corpus through the live engine (with sparklines), as the UI draws it."""
    from pathlib import Path

    from monitor.config import build_config
    from monitor.detect.engine import Engine
    from monitor.formats.lines import LineDecoder
    from monitor.ui.sparks import bars

    path = Path(__file__).resolve().parent / "scenarios" / f"{name}.jsonl"
    engine = Engine(build_config({}), sparklines=True)
    decoder = LineDecoder(str(path))
    for number, raw in enumerate(path.read_bytes().splitlines(), 1):
        events, _problem = decoder.feed(raw, number, 0.0)
        for event in events:
            engine.process(event).detections
    (session,) = engine.sessions
    summary = engine.summary(session)
    return bars(summary.similarity), {name: bars(s) for name, s in summary.detector_similarity.items()}


def test_sparklines_keep_honest_polling_low_and_fill_for_a_loop():
    """Honest polling drew █▁█▁ like a loop (the repeated call at full height, and
    exact_repeat at full height in the detail view next to "No detections")."""
    for honest in ("a_honest_poll_progress", "b_honest_narrated_poll"):
        overall, by_detector = sparklines_of(honest)
        assert max(overall, default=0) <= 0.5, honest
        assert all(max(values) <= 0.5 for values in by_detector.values()), honest
    for loop in ("a_loop_cycle_read_test", "b_loop_chant_in_reply", "a_loop_bash_grep_spellings"):
        overall, _ = sparklines_of(loop)
        assert max(overall) > 0.5, loop


async def test_a_session_ends_when_its_process_exits(config, hub_factory):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        hub = await hub_factory(config)
        await hub.submit(
            [Event(Kind.SESSION_START, "p", T0, source="/logs/p.jsonl", pid=proc.pid)]
            + loop_events("p", 1, source="/logs/p.jsonl")
        )
        await hub.join()
        assert hub.sweep_exited() == [] and hub.session("p").status == "live"
    finally:
        proc.kill()
        proc.wait()
    assert hub.sweep_exited() == ["p"] and hub.session("p").status == "ended"
