"""A paused session's clocks stand still for detection too (issue 35 §2, pause): the time its
process was stopped is not a wait of the agent's, so the ``waiting`` budget does not count
it.  A real process is paused and resumed (SIGSTOP / SIGCONT) through the hub; the hub's
clock is the test's, so an hour passes without a sleep.
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from monitor.config import build_config
from monitor.events import Event, Kind
from monitor.hub import Hub

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
POLL = {"command": "gh run view 42 --json status"}


@pytest.fixture
async def agent():
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(120)")
    yield process
    if process.returncode is None:
        os.kill(process.pid, 18)  # SIGCONT, then the kill
        process.kill()
        await process.wait()


def _poll(session: str, ts: float, n: int) -> list[Event]:
    call = Event(Kind.TOOL_CALL, session, ts, tool="bash", args=POLL, call_id=f"c{n}")
    result = Event(Kind.TOOL_RESULT, session, ts + 1, call_id=f"c{n}", content='{"status":"in_progress"}')
    return [call, result]


async def test_an_hour_paused_is_not_an_hour_of_waiting(agent):
    start = 1_900_000_000.0
    clock = [start]
    hub = Hub(build_config({}), clock=lambda: clock[0])
    await hub.start()
    try:
        await hub.submit([Event(Kind.SESSION_START, "s", start, agent="poller", pid=agent.pid)])
        # Polls 30 s apart (waited calls: a gap of 20 s or more), then an hour stopped.
        await hub.submit(_poll("s", start + 1, 0) + _poll("s", start + 31, 1))
        await hub.join()
        clock[0] = start + 40
        assert (await hub.act("pause", "s")).outcome == "delivered"
        clock[0] = start + 3640
        assert (await hub.act("resume", "s")).outcome == "delivered"
        await hub.submit(_poll("s", start + 3661, 2))  # 30 s after its last poll, the pause left out
        await hub.join()
        waiting = [d for d in hub.recent_detections() if d.detector == "waiting"]
    finally:
        await hub.stop()
    assert waiting == []  # the budget (30 min) would be spent if the pause counted


async def test_a_paused_sessions_wait_for_the_person_raises_no_notice_and_its_clock_stands_still(agent):
    """Stopped by the operator, the agent cannot take an answer: no "waiting for you" notice
    while paused, and the wait's clock resumes where it stood."""
    start = 1_900_000_000.0
    clock = [start]
    hub = Hub(build_config({"sources": {"waiting_notice_seconds": 300}}), clock=lambda: clock[0])
    await hub.start()
    try:
        await hub.submit(
            [
                Event(Kind.SESSION_START, "s", start, agent="asker", pid=agent.pid),
                Event(Kind.WAITING, "s", start + 1, status="permission", content="Bash: rm -rf build"),
            ]
        )
        await hub.join()
        clock[0] = start + 11  # waited 10 s, then paused for an hour
        assert (await hub.act("pause", "s")).outcome == "delivered"
        clock[0] = start + 3611
        assert hub.notice_waits() == []  # paused: nobody can answer it now
        assert (await hub.act("resume", "s")).outcome == "delivered"
        clock[0] = start + 3612
        assert hub.notice_waits() == []  # 11 s of waiting, not an hour
        clock[0] = start + 3600 + 301
        (notice,) = hub.notice_waits()
    finally:
        await hub.stop()
    assert notice.session == "s" and notice.why == "permission"
