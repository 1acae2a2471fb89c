"""The Python client and the example agent, against a real hub and socket server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.client import AsyncLoopwatchClient, LoopwatchClient
from monitor.control import ProcessIdentity, terminate
from tests.socketkit import DEADLINE, Updates, running_monitor, short_socket_path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "example_agent.py"


async def until(predicate, timeout: float = DEADLINE) -> None:
    """Poll a condition owned by another thread (the client's) with a deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0.005)


def loop_calls(client: LoopwatchClient, n: int) -> None:
    for _ in range(n):
        call = client.tool_call("bash", {"cmd": "ls /no/such/dir"})
        client.tool_result(call, "ls: cannot access '/no/such/dir': No such file or directory", is_error=True)


# -- without a monitor ----------------------------------------------------------------------


def test_client_without_a_monitor_never_blocks_or_raises(tmp_path):
    """No monitor: helpers return at once, the buffer keeps the newest events, close is quick."""
    client = LoopwatchClient(
        agent="lonely", socket_path=tmp_path / "nobody.sock", buffer_size=10, backoff_max=0.05
    )
    client.session_start()
    loop_calls(client, 12)  # 1 + 24 events into a 10-event buffer
    client.message("assistant", object())  # not JSON: sent as text, never raised
    client.tool_call("weird", {"when": time, 3: {1, 2}})
    assert not client.connected
    assert client.dropped == 17 and client.sent == 0 and client.errors == 0
    client.close(timeout=0.2)
    assert client.get_message(timeout=0) is None


def test_tcp_client_with_a_bad_address_does_not_raise():
    """An unreachable or malformed TCP address is just 'not connected'."""
    client = LoopwatchClient(agent="x", address="127.0.0.1:1", token="t", connect_timeout=0.2)
    client.session_start()
    client.close(timeout=0.1)
    assert not client.connected
    garbled = LoopwatchClient(agent="x", address="no-port-here")
    garbled.session_start()
    garbled.close(timeout=0.1)
    assert not garbled.connected and "invalid monitor address" in garbled.unusable


# -- with a monitor ------------------------------------------------------------------------------


async def test_events_arrive_and_detections_come_back(tmp_path):
    """Helper events reach the hub; the loop's detection reaches the callback and the iterator."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        seen: list[dict] = []
        client = LoopwatchClient(agent="t", socket_path=server.unix_path, on_control=seen.append)
        client.session_start()
        client.message("user", "list the build dir")
        loop_calls(client, 4)
        client.usage(100, 20, 0.01)
        client.compaction()
        client.session_end("ok")
        info = await updates.session(client.session, lambda i: i.status == "ended")
        assert info.events == 13 and info.agent == "t" and info.pid == os.getpid()
        detection = await asyncio.to_thread(client.get_message, DEADLINE)
        assert detection["type"] == "detection" and detection["session"] == client.session
        assert any(m["type"] == "detection" for m in seen)
        await asyncio.to_thread(client.close)
        assert client.sent == 13  # every event was written (the hello is not counted)
        assert client.dropped == 0


async def test_inject_reaches_the_callback_and_the_iterator(tmp_path):
    """An operator's inject arrives through on_control and messages()."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        seen: list[dict] = []
        client = LoopwatchClient(agent="t", socket_path=server.unix_path, on_control=seen.append)
        client.session_start()
        await updates.session(client.session)
        action = await hub.act("inject", client.session, text="change tack")
        assert action.outcome == "delivered"
        message = await asyncio.to_thread(lambda: next(client.messages(timeout=DEADLINE)))
        assert message["type"] == "inject" and message["text"] == "change tack"
        assert seen[0]["text"] == "change tack"
        await asyncio.to_thread(client.close)


async def test_a_failing_callback_does_not_break_the_client(tmp_path):
    """An exception in the agent's handler is logged; later messages still arrive."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)

        def broken(message: dict) -> None:
            raise RuntimeError("agent bug")

        client = LoopwatchClient(agent="t", socket_path=server.unix_path, on_control=broken)
        client.session_start()
        await updates.session(client.session)
        for text in ("one", "two"):
            await hub.act("inject", client.session, text=text)
        first = await asyncio.to_thread(client.get_message, DEADLINE)
        second = await asyncio.to_thread(client.get_message, DEADLINE)
        assert [first["text"], second["text"]] == ["one", "two"]
        assert client.connected
        await asyncio.to_thread(client.close)


async def test_async_client_iterates_control_messages(tmp_path):
    """AsyncLoopwatchClient: `async for` yields the inject sent by the operator."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        async with AsyncLoopwatchClient(agent="aio", socket_path=server.unix_path) as client:
            client.session_start()
            await updates.session(client.session)
            await hub.act("inject", client.session, text="async hello")
            async with asyncio.timeout(DEADLINE):
                async for message in client:
                    if message["type"] == "inject":
                        break
            assert message["text"] == "async hello"


async def test_client_buffers_until_the_monitor_starts(tmp_path):
    """Events sent before the monitor exists are delivered once it appears (with back-off)."""
    path = short_socket_path(tmp_path)
    client = LoopwatchClient(agent="early", socket_path=path, backoff_max=0.1)
    client.session_start()
    loop_calls(client, 2)
    assert not client.connected
    async with running_monitor(tmp_path, unix_path=path) as (hub, _server):
        updates = Updates(hub)
        info = await updates.session(client.session, lambda i: i.events >= 5)
        assert info.events == 5
    await asyncio.to_thread(client.close, 0.2)


async def test_client_reconnects_after_a_monitor_restart_and_is_reachable(tmp_path):
    """After the monitor restarts, the client reconnects, resends, and its session is reachable again."""
    path = short_socket_path(tmp_path)
    client = LoopwatchClient(agent="phoenix", socket_path=path, backoff_max=0.1)
    async with running_monitor(tmp_path, unix_path=path) as (hub, _server):
        updates = Updates(hub)
        client.session_start()
        await updates.session(client.session)
    await until(lambda: not client.connected)
    client.message("assistant", "said while the monitor was down")
    async with running_monitor(tmp_path, unix_path=path) as (hub, _server):
        updates = Updates(hub)
        await updates.session(client.session)  # the message sent while it was down arrived
        await until(lambda: client.connects == 2)
        action = await hub.act("inject", client.session, text="welcome back")
        assert action.outcome == "delivered"
        message = await asyncio.to_thread(client.get_message, DEADLINE)
        assert message["text"] == "welcome back"
    await asyncio.to_thread(client.close, 0.2)


async def test_tcp_client_with_token(tmp_path):
    """Over TCP the client authenticates with its token; a wrong token is refused without raising."""
    async with running_monitor(tmp_path, listen="127.0.0.1:0", token="tok") as (hub, server):
        updates = Updates(hub)
        address = "%s:%d" % server.tcp_address
        good = LoopwatchClient(agent="tcp", address=address, token="tok")
        good.session_start()
        info = await updates.session(good.session)
        assert info.source.startswith("socket:127.0.0.1:")
        bad = LoopwatchClient(agent="tcp", address=address, token="nope", backoff_max=0.1)
        bad.session_start()
        await until(lambda: bad.last_error is not None)
        assert bad.last_error["reason"].startswith("connection refused")
        assert hub.session(bad.session) is None
        assert not bad.connected and bad.connects == 0
        assert bad.queued == 1  # kept, not thrown at a monitor that refuses it
        await asyncio.to_thread(good.close)
        await asyncio.to_thread(bad.close, 0.1)


async def test_client_refused_by_a_full_monitor_keeps_its_events(tmp_path):
    """Refused for too many connections, the client keeps its events and delivers them later."""
    from monitor.config import build_config
    from tests.socketkit import RawClient

    config = build_config({"sources": {"max_connections": 1}})
    async with running_monitor(tmp_path, config) as (hub, server):
        updates = Updates(hub)
        occupant = await RawClient.unix(server.unix_path)
        await occupant.send({"type": "hello"})
        await occupant.read(lambda m: m["type"] == "welcome")
        client = LoopwatchClient(agent="patient", socket_path=server.unix_path, backoff_max=0.1)
        client.session_start()
        loop_calls(client, 1)
        await until(lambda: client.last_error is not None)
        assert "too many connections" in client.last_error["reason"]
        assert client.queued == 3 and client.sent == 0
        await occupant.close()
        info = await updates.session(client.session, lambda i: i.events >= 3)
        assert info.events == 3
        await asyncio.to_thread(client.close)


# -- the example agent, for real ---------------------------------------------------------------------


class Agent:
    """The example agent as a subprocess, read line by line from its stdout."""

    def __init__(self, socket_path: Path, *options: str):
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--socket", str(socket_path), "--delay", "0.05", *options],
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
        )
        self.lines: list[str] = []

    async def expect(self, prefix: str) -> str:
        """The next output line starting with ``prefix`` (earlier ones are kept)."""
        async with asyncio.timeout(DEADLINE):
            while True:
                line = await asyncio.to_thread(self.proc.stdout.readline)
                if not line:
                    raise AssertionError(f"agent exited before printing {prefix!r}: {self.lines}")
                self.lines.append(line.strip())
                if line.startswith(prefix):
                    return line.strip()

    def session(self, ready: str) -> str:
        return ready.split("session=")[1].split()[0]

    async def wait(self) -> int:
        return await asyncio.to_thread(self.proc.wait, DEADLINE)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def agents():
    started: list[Agent] = []
    yield started
    for agent in started:
        agent.cleanup()


async def test_example_agent_changes_approach_when_injected(tmp_path, agents):
    """The example agent loops, is flagged, gets an inject, changes approach and ends its session."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        agent = Agent(server.unix_path, "--steps", "0")
        agents.append(agent)
        session = agent.session(await agent.expect("READY"))
        await agent.expect("DETECTION")
        action = await hub.act("inject", session)  # no text: the current nudge
        assert action.outcome == "delivered" and action.text.startswith("[loopwatch]")
        await agent.expect("INJECT [loopwatch]")
        await agent.expect("CHANGED")
        assert await agent.wait() == 0
        info = await updates.session(session, lambda i: i.status == "ended")
        assert info.pid == agent.proc.pid


async def test_example_agent_injected_then_killed_with_sigterm(tmp_path, agents):
    """An agent that ignores nudges is killed through the hub: SIGTERM suffices, its session ends."""
    config_overrides = {"control": {"kill_grace_seconds": 10.0}}
    from monitor.config import build_config

    async with running_monitor(tmp_path, build_config(config_overrides)) as (hub, server):
        updates = Updates(hub)
        agent = Agent(server.unix_path, "--steps", "0", "--stubborn")
        agents.append(agent)
        session = agent.session(await agent.expect("READY"))
        await agent.expect("DETECTION")
        await hub.act("inject", session, text="please stop")
        await agent.expect("INJECT please stop")
        assert hub.describe_kill(session).startswith(f"SIGTERM pid {agent.proc.pid}")
        action = await hub.act("kill", session)
        assert action.outcome == "delivered", action.detail
        assert action.detail == f"pid {agent.proc.pid} exited after SIGTERM"
        assert await agent.wait() == 143  # its SIGTERM handler ended the session and exited
        info = await updates.session(session, lambda i: i.status == "ended")
        assert info.status == "ended"


async def test_agent_ignoring_sigterm_is_killed_with_sigkill(tmp_path, agents):
    """A stubborn agent survives SIGTERM and is SIGKILLed after the grace period."""
    from monitor.config import build_config

    config = build_config({"control": {"kill_grace_seconds": 0.3}})
    async with running_monitor(tmp_path, config) as (hub, server):
        updates = Updates(hub)
        agent = Agent(server.unix_path, "--steps", "0", "--ignore-sigterm", "--stubborn")
        agents.append(agent)
        session = agent.session(await agent.expect("READY"))
        await updates.session(session, lambda i: i.pid == agent.proc.pid)
        action = await hub.act("kill", session)
        assert action.outcome == "delivered"
        assert "killed with SIGKILL" in action.detail
        assert await agent.wait() == -signal.SIGKILL


async def test_agent_whose_pid_was_reused_is_not_killed(tmp_path, agents):
    """If the session's pid now has another start time, the kill is refused and nothing dies."""
    async with running_monitor(tmp_path) as (hub, server):
        agent = Agent(server.unix_path, "--steps", "0", "--stubborn")
        agents.append(agent)
        await agent.expect("READY")
        real = ProcessIdentity.capture(agent.proc.pid)
        recorded = ProcessIdentity(real.pid, real.start_time + 3.5, real.uid, real.cmdline)
        outcome = await terminate(recorded, grace=0.1)
        assert outcome.status == "refused" and "reused" in outcome.detail
        assert agent.proc.poll() is None
        await agent.expect("DETECTION")  # still running and still talking to the monitor


def test_client_import_is_light():
    """An agent embedding the client loads neither the config, the detectors, rapidfuzz nor asyncio."""
    code = (
        "import sys\nimport monitor.client\n"
        "heavy = ('monitor.config', 'monitor.detect', 'monitor.formats', 'monitor.control', 'rapidfuzz',\n"
        "         'textual', 'sqlite_utils', 'asyncio')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == "[]"
