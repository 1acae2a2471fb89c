"""TCP limits on a non-loopback address of this machine (issue 32, item 10).

Loopback peers cannot be told apart (every local user is 127.0.0.1), so the
per-address limit only applies to other addresses: here the server listens
on a real non-loopback address of this machine and the clients connect from
it (skipped, saying so, where the machine has none).  The reserved share is
checked with strangers connecting from 127.0.0.1 to that address and a peer
whose address sent a valid token before.  Real sockets, the real hub and
server; waiting is reading a socket or polling with a deadline.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from monitor.config import build_config
from tests.securitykit import until
from tests.socketkit import RawClient, Updates, running_monitor

TOKEN = "t0ken"


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback and can be bound, or None."""
    candidates = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        candidates.append(probe.getsockname()[0])
    except OSError:
        pass
    finally:
        probe.close()
    try:
        candidates += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except OSError:
        pass
    for address in candidates:
        if address.startswith("127.") or address == "0.0.0.0":
            continue
        with socket.socket() as test:
            try:
                test.bind((address, 0))
            except OSError:
                continue
        return address
    return None


ADDRESS = non_loopback_address()
pytestmark = pytest.mark.skipif(ADDRESS is None, reason="this machine has no non-loopback IPv4 address")


async def connect(server_address: tuple[str, int], source: str) -> RawClient:
    """A TCP client whose connection comes from ``source`` (an address of this machine)."""
    reader, writer = await asyncio.open_connection(*server_address, local_addr=(source, 0), limit=1 << 20)
    return RawClient(reader, writer)


def config(**sources: int):
    return build_config({"sources": {"max_connections": 64, "hello_timeout_seconds": 60, **sources}})


def waiting(server) -> list:
    return [c for c in server.connections if c.tcp and not c.authed]


async def test_one_address_holds_at_most_its_share_of_the_waiting_room(tmp_path):
    """Six silent connections from one non-loopback address, three allowed per address: the
    oldest three are closed as the newer come, other slots stay free, and an agent from the
    same address that says hello at once is still welcomed."""
    settings = config(max_unauthenticated=8, max_unauthenticated_per_address=3)
    async with running_monitor(tmp_path, settings, listen=f"{ADDRESS}:0", token=TOKEN) as (hub, server):
        updates = Updates(hub)
        silent = []
        for _ in range(6):
            silent.append(await connect(server.tcp_address, ADDRESS))
            await until(lambda: len(waiting(server)) + server.refused == len(silent), "the server saw it")
        assert server.refused == 3 and len(waiting(server)) == 3
        assert all(c.host == ADDRESS for c in waiting(server))
        reason = f"more than 3 connections from {ADDRESS} without a hello"
        assert any(reason in p.reason for p in updates.problems())
        agent = await connect(server.tcp_address, ADDRESS)
        await agent.send({"type": "hello", "agent": "remote", "token": TOKEN})
        assert (await agent.read(lambda m: m.get("type") in ("welcome", "error")))["type"] == "welcome"
        assert ADDRESS in server.known_hosts
        for client in [*silent, agent]:
            await client.close()


async def test_an_address_that_authenticated_before_keeps_a_share_strangers_cannot_take(tmp_path):
    """An agent from the non-loopback address authenticates once.  Ten strangers (from
    127.0.0.1) then hold what they can of a 4-slot waiting room: three quarters, never the
    last slot.  The known address gets that slot while strangers keep coming, and its
    agent is welcomed."""
    settings = config(max_unauthenticated=4, max_unauthenticated_per_address=4)
    async with running_monitor(tmp_path, settings, listen=f"{ADDRESS}:0", token=TOKEN) as (hub, server):
        first = await connect(server.tcp_address, ADDRESS)
        await first.send({"type": "hello", "agent": "remote", "token": TOKEN})
        assert (await first.read(lambda m: m.get("type") == "welcome"))["type"] == "welcome"
        await first.close()
        strangers = []
        for _ in range(10):
            strangers.append(await connect(server.tcp_address, "127.0.0.1"))
            await until(lambda: len(waiting(server)) + server.refused == len(strangers), "the server saw it")
        assert len(waiting(server)) == 3 and server.refused == 7  # a quarter kept back
        known = await connect(server.tcp_address, ADDRESS)
        await until(lambda: any(c.host == ADDRESS for c in waiting(server)), "the known peer waits")
        assert len(waiting(server)) == 4 and server.refused == 7  # it took the kept slot, evicting nobody
        late = await connect(server.tcp_address, "127.0.0.1")  # a stranger now evicts a stranger
        await until(lambda: server.refused == 8, "the late stranger handled")
        assert any(c.host == ADDRESS for c in waiting(server))
        await known.send({"type": "hello", "agent": "remote", "token": TOKEN})
        assert (await known.read(lambda m: m.get("type") in ("welcome", "error")))["type"] == "welcome"
        for client in [*strangers, known, late]:
            await client.close()
