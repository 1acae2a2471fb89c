"""TCP strangers cannot lock local agents out or eat memory (issue 14, item 14).

Real sockets on 127.0.0.1 and a real Unix socket, against the real hub and
server.  Counts are small and the deadlines configurable, so nothing waits
long; waiting is reading a socket with a deadline, never a sleep.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from monitor.config import build_config
from tests.securitykit import until
from tests.socketkit import DEADLINE, RawClient, Updates, running_monitor, tool_loop

START = {"type": "session_start", "session": "local", "agent": "a"}


async def test_unauthenticated_tcp_has_its_own_cap_and_local_agents_always_get_in(tmp_path):
    """10 silent TCP connections against a pre-auth cap of 4 (a quarter of it kept for
    addresses that sent a token before): the oldest 7 closed as newer ones come, and every
    Unix agent (up to the shared limit of 6 in the old code) still gets in and is heard."""
    config = build_config(
        {"sources": {"max_connections": 6, "max_unauthenticated": 4, "hello_timeout_seconds": 60}}
    )
    async with running_monitor(tmp_path, config, listen="127.0.0.1:0", token="t") as (hub, server):
        updates = Updates(hub)
        strangers = [await RawClient.tcp(*server.tcp_address) for _ in range(10)]
        # Refusals are reported once and then counted (not one line each): wait on the count.
        await until(lambda: server.refused >= 7, "seven strangers refused")
        assert any("without a hello" in p.reason for p in updates.problems())
        assert server.refused == 7 and sum(1 for c in server.connections if c.tcp) == 3
        agents = [await RawClient.unix(server.unix_path) for _ in range(6)]
        for n, agent in enumerate(agents):
            await agent.send(dict(START, session=f"local{n}"), *tool_loop(f"local{n}", 1))
        for n in range(6):
            info = await updates.session(f"local{n}", lambda i: i.events == 3)
            assert info.events == 3
        for client in [*strangers, *agents]:
            await client.close()


@pytest.mark.parametrize("key", ["hello_timeout_seconds", "idle_timeout_seconds"])
async def test_hello_deadline_is_absolute_not_reset_by_each_byte(tmp_path, key):
    """A client trickling one byte at a time, faster than the hello timeout, is still
    dropped when the deadline from its connect passes (the smaller of the hello and idle
    timeouts, as before: the idle one is a key older versions know)."""
    config = build_config({"sources": {key: 0.3}})
    async with running_monitor(tmp_path, config, listen="127.0.0.1:0", token="t") as (_hub, server):
        client = await RawClient.tcp(*server.tcp_address)
        deadline = time.monotonic() + DEADLINE
        reason = None
        while time.monotonic() < deadline:
            try:
                client.writer.write(b" ")
                await client.writer.drain()
            except (ConnectionError, OSError):
                break
            try:  # wait for the server's answer for a while shorter than its timeout
                async with asyncio.timeout(0.05):
                    line = await client.reader.readline()
            except TimeoutError:
                continue
            if line:
                reason = line.decode()
            break
        assert reason is not None, "the trickling client was never dropped"
        assert "no hello with a valid token within 0.3s of connecting" in reason
        assert server.refused == 1


async def test_preauth_buffer_is_small(tmp_path):
    """A 64 KiB line before any hello is refused after the first 1 KiB, not buffered."""
    config = build_config({"sources": {"preauth_bytes": 1024, "hello_timeout_seconds": 60}})
    async with running_monitor(tmp_path, config, listen="127.0.0.1:0", token="t") as (hub, server):
        client = await RawClient.tcp(*server.tcp_address)
        updates = Updates(hub)
        client.writer.write(b"x" * 65536)
        # The client may see a reset rather than the refusal (it sent more than was read).
        await updates.problem(lambda p: "no hello with a valid token in the first 1024 bytes" in p.reason)
        assert server.refused == 1
        assert all(c.splitter.pending_bytes <= 1024 for c in server.connections)


async def test_hello_followed_by_many_events_in_one_write_still_gets_in(tmp_path):
    """The pre-auth limit counts bytes before the hello only: a hello and 200 KiB of events
    sent at once are all processed."""
    config = build_config({"sources": {"preauth_bytes": 1024}})
    async with running_monitor(tmp_path, config, listen="127.0.0.1:0", token="t") as (hub, server):
        updates = Updates(hub)
        client = await RawClient.tcp(*server.tcp_address)
        big = [
            {"type": "message", "session": "remote", "role": "assistant", "content": "y" * 1000}
            for _ in range(200)
        ]
        await client.send({"type": "hello", "token": "t"}, dict(START, session="remote"), *big)
        assert (await client.read())["type"] == "welcome"
        info = await updates.session("remote", lambda i: i.events == 201)
        assert info.events == 201
        await client.close()
