"""Pause and resume: SIGSTOP / SIGCONT to a real process, with the kill's proof.

The agent is a real subprocess; its state is read from ``/proc/PID/stat``
(``T``: stopped) after each action, never slept for.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from monitor.config import build_config
from monitor.control import ProcessIdentity, process_state, suspend
from monitor.events import Event, Kind
from monitor.hub import Hub
from monitor.store import Store

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
#: Hang guard (not a performance assertion).
DEADLINE = 10.0


async def _state_becomes(pid: int, wanted: set[str]) -> str | None:
    """Poll /proc with a deadline until the process's state is one of ``wanted``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    state = process_state(pid)
    while state not in wanted and loop.time() < end:
        await asyncio.sleep(0.01)
        state = process_state(pid)
    return state


@pytest.fixture
async def agent():
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(120)")
    yield process
    if process.returncode is None:
        os.kill(process.pid, 18)  # SIGCONT first: a stopped process still gets SIGKILL, but be tidy
        process.kill()
        await process.wait()


@pytest.fixture
async def monitor(tmp_path: Path):
    store = Store(tmp_path / "lw.db", flush_ms=20)
    store.start()
    hub = Hub(build_config({}), store)
    await hub.start()
    yield hub, store
    await hub.stop()
    store.close()


async def test_pause_stops_the_process_and_resume_runs_it_again(agent, monitor):
    hub, store = monitor
    await hub.submit([Event(Kind.SESSION_START, "s", time.time(), agent="sleepy", pid=agent.pid)])
    await hub.join()
    record = await hub.act("pause", "s")
    assert record.outcome == "delivered", record.detail
    assert "SIGSTOP" in record.detail
    assert await _state_becomes(agent.pid, {"T", "t"}) in ("T", "t")
    await hub.join()
    assert hub.session("s").paused > 0
    again = await hub.act("pause", "s")
    assert again.outcome == "refused" and "already paused" in again.detail
    record = await hub.act("resume", "s")
    assert record.outcome == "delivered", record.detail
    assert await _state_becomes(agent.pid, {"S", "R"}) in ("S", "R")
    assert hub.session("s").paused == 0
    assert [(a["kind"], a["outcome"]) for a in store.actions("s")] == [
        ("pause", "delivered"),
        ("pause", "refused"),
        ("resume", "delivered"),
    ]


async def test_a_paused_session_is_never_closed_as_idle(agent, tmp_path):
    clock = [time.time()]
    config = build_config({"sources": {"idle_timeout_seconds": 30}})
    hub = Hub(config, clock=lambda: clock[0])
    await hub.start()
    try:
        await hub.submit([Event(Kind.SESSION_START, "s", clock[0], agent="sleepy", pid=agent.pid)])
        await hub.join()
        assert (await hub.act("pause", "s")).outcome == "delivered"
        clock[0] += 3600  # an hour stopped: its clocks stood still
        assert hub.sweep_idle() == []
        assert (await hub.act("resume", "s")).outcome == "delivered"
        assert hub.sweep_idle() == []  # idle time starts again at the resume
        clock[0] += 600
        assert hub.sweep_idle() == ["s"]
    finally:
        await hub.stop()


async def test_the_monitor_resumes_what_it_paused_when_it_stops(agent, tmp_path):
    store = Store(tmp_path / "lw.db", flush_ms=20)
    store.start()
    hub = Hub(build_config({}), store)
    await hub.start()
    await hub.submit([Event(Kind.SESSION_START, "s", time.time(), agent="sleepy", pid=agent.pid)])
    await hub.join()
    assert (await hub.act("pause", "s")).outcome == "delivered"
    assert await _state_becomes(agent.pid, {"T", "t"}) in ("T", "t")
    await hub.stop()
    assert await _state_becomes(agent.pid, {"S", "R"}) in ("S", "R")
    kinds = [(a["kind"], a["who"], a["outcome"]) for a in store.actions("s")]
    store.close()
    assert kinds[-1] == ("resume", "loopwatch (auto)", "delivered")


async def test_pause_needs_the_kill_proof():
    """Never pid 1, the monitor itself or its parent; never a process whose start time changed."""
    own = ProcessIdentity.capture(os.getpid())
    parent = ProcessIdentity.capture(os.getppid())
    init = ProcessIdentity(1, 0.0, 0, "init")
    for identity, why in ((own, "monitor itself"), (parent, "parent"), (init, "pid 1")):
        outcome = await suspend(identity, True)
        assert outcome.status == "refused" and why in outcome.detail, outcome.detail
        assert "refusing to pause" in outcome.detail or "pid 1" in outcome.detail
    assert process_state(os.getpid()) not in ("T", "t")


async def test_a_reused_pid_is_not_paused(agent):
    identity = ProcessIdentity.capture(agent.pid)
    assert identity is not None
    older = ProcessIdentity(identity.pid, identity.start_time - 5, identity.uid, identity.cmdline)
    outcome = await suspend(older, True)
    assert outcome.status == "refused" and "no longer the session's process" in outcome.detail
    assert process_state(agent.pid) not in ("T", "t")


async def test_a_session_without_a_process_refuses_pause(monitor):
    hub, _store = monitor
    await hub.submit([Event(Kind.TOOL_CALL, "nopid", time.time(), tool="bash", args={"command": "ls"})])
    await hub.join()
    record = await hub.act("pause", "nopid")
    assert record.outcome == "refused" and "no process" in record.detail


async def test_a_paused_process_is_resumed_before_it_is_killed(agent, monitor):
    """SIGTERM waits while a process is stopped: the kill lets it run first, so it ends at once."""
    hub, store = monitor
    await hub.submit([Event(Kind.SESSION_START, "s", time.time(), agent="sleepy", pid=agent.pid)])
    await hub.join()
    assert (await hub.act("pause", "s")).outcome == "delivered"
    record = await hub.act("kill", "s")
    assert record.outcome == "delivered" and "after SIGTERM" in record.detail, record.detail
    assert await asyncio.wait_for(agent.wait(), DEADLINE) != 0
    assert hub.session("s").paused == 0
