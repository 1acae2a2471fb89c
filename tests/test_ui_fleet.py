"""The dashboard at fleet size: the flush rate adapts to the number of sessions,
the hub coalesces snapshots over the same interval (latest state, detections
unchanged), and the sessions table writes the cells of rows in view only, the
others when they are scrolled to or read.

Real hubs and the real app (headless); waiting is by polling with a deadline.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

from monitor.config import Config, build_config
from monitor.events import Event, Kind
from monitor.hub import Hub
from monitor.ui.app import LoopwatchApp
from monitor.ui.live import FLEET_SESSIONS, SLOWEST_FLUSH, flush_interval
from monitor.updates import DetectionRaised, SessionChanged

T0 = 1_700_000_000.0


def calls(session: str, n: int, *, start: int = 0, looping: bool = False) -> list[Event]:
    """``n`` call/result pairs; looping sessions repeat one failing call."""
    out = []
    for i in range(start, start + n):
        args = {"cmd": "ls /missing"} if looping else {"path": f"f{i}.py"}
        out.append(
            Event(
                Kind.TOOL_CALL,
                session,
                T0 + i,
                source=f"/logs/{session}.jsonl",
                line=2 * i + 1,
                tool="bash",
                args=args,
                call_id=f"{session}-{i}",
            )
        )
        out.append(
            Event(
                Kind.TOOL_RESULT,
                session,
                T0 + i + 0.5,
                source=f"/logs/{session}.jsonl",
                line=2 * i + 2,
                call_id=f"{session}-{i}",
                content="No such file" if looping else f"contents {i}",
                is_error=looping,
            )
        )
    return out


async def until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0)


def test_flush_interval_grows_with_the_fleet():
    """Full refresh_hz up to FLEET_SESSIONS sessions, then slower in proportion, bounded."""
    assert flush_interval(10, 0) == flush_interval(10, FLEET_SESSIONS) == 0.1
    assert flush_interval(10, 1000) == 0.1 * 1000 / FLEET_SESSIONS
    assert flush_interval(10, 100_000) == SLOWEST_FLUSH
    assert flush_interval(1, 1000) == 1.0  # never faster than asked
    assert flush_interval(0, 1000) == 0.0  # 0: flush at once


async def test_hub_coalesces_snapshots_and_keeps_the_latest_state():
    """With a long publish interval a session changed by many events is published
    once, with its latest state; detections are published as they happen, the
    same ones as with the default interval."""

    async def run(interval: float | None) -> tuple[list, list]:
        hub = Hub(build_config({}), None)
        if interval is not None:
            hub.publish_interval = interval
        changes, detections = [], []
        hub.subscribe(lambda u: (changes if isinstance(u, SessionChanged) else detections).append(u))
        await hub.start()
        try:
            events = calls("busy", 6, looping=True) + calls("calm", 3)
            for event in events:  # one submission per event: six changes of "busy"
                await hub.submit([event])
            await until(lambda: hub.events_total == len(events))
            if interval is not None:
                assert changes == []  # nothing published before the interval ends
            await hub.join()
            # Copied now: stopping the hub publishes each session once more (as stopped).
            return list(changes), [
                (d.detection.session, d.detection.detector, d.detection.seq, d.detection.level)
                for d in detections
                if isinstance(d, DetectionRaised)
            ]
        finally:
            await hub.stop()

    changes, detections = await run(3600.0)
    assert [c.info.id for c in changes] == ["busy", "calm"]
    assert [c.info.events for c in changes] == [12, 6]
    _, default_detections = await run(None)
    assert detections and detections == default_detections


@asynccontextmanager
async def fleet_app(sessions: int):
    config = Config()

    @asynccontextmanager
    async def factory():
        hub = Hub(config, None)
        await hub.start()
        try:
            yield hub
        finally:
            await hub.stop()

    app = LoopwatchApp(config, hub_factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        hub = app.hub
        await hub.submit([event for n in range(sessions) for event in calls(f"agent-{n:04d}", 1)])
        await hub.join()
        await until(lambda: len(app.feed.sessions) == sessions)
        app.flush_live()
        await pilot.pause()
        yield app, pilot


async def test_app_flushes_a_large_fleet_less_often_and_the_hub_follows():
    """With 600 sessions the app asks for the longer interval, and the hub coalesces over it."""
    async with fleet_app(600) as (app, pilot):
        expected = flush_interval(app.config.ui.refresh_hz, 600)
        assert expected > 1 / app.config.ui.refresh_hz
        assert app._flush_interval() == expected
        assert app.hub.publish_interval == expected


async def test_rows_out_of_view_are_written_when_read_or_scrolled_to():
    """Changing every session rewrites the cells of the rows in view only; a row
    out of view shows its latest values once read or scrolled to."""
    async with fleet_app(300) as (app, pilot):
        table = app.screen.query_one("SessionsTable")
        height = table.size.height
        last = "agent-0299"
        assert table.get_row_index(last) > height  # out of view
        updates = table.cell_updates
        await app.hub.submit([e for n in range(300) for e in calls(f"agent-{n:04d}", 1, start=1)])
        await app.hub.join()
        app.flush_live()
        await pilot.pause()
        assert app.feed.sessions[last].events == 4
        assert table.cell_updates - updates <= height * len(table.columns)  # the rows in view only
        table.move_cursor(row=table.row_count - 1, animate=False)  # scrolls the last row into view
        deadline = time.monotonic() + 10
        while table.scroll_offset.y + height <= table.get_row_index(last):
            assert time.monotonic() < deadline
            await pilot.pause()
        row = table.get_row_index(last)
        drawn = "".join(segment.text for segment in table.render_line(row + 1 - table.scroll_offset.y))
        assert last in drawn and " 4 " in drawn
        assert table.get_cell("agent-0000", "events").plain == "4"  # read: up to date
