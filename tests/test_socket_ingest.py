"""The socket ingest path under overload (issue 14, item 7): fair, coalesced, nothing lost.

Every test holds the hub back (not started yet) while the connections read,
decode and fill their lanes, so what is compared is the *order* in which the
hub then processes events, never how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import orjson

from monitor.config import build_config
from monitor.hub import Hub
from monitor.sources import fair, socket_out
from monitor.sources.fair import BATCH_EVENTS, Lane
from monitor.sources.sockets import SocketServer
from monitor.store import Store
from monitor.updates import DetectionRaised
from tests.socketkit import DEADLINE, RawClient, Updates, short_socket_path


async def poll_until(predicate, what: str = "the condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not predicate():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def jsonl(records) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def message(session: str, i: int) -> dict:
    return {"type": "message", "session": session, "role": "assistant", "content": f"{session} step {i}"}


def loop_records(session: str) -> list[dict]:
    """Three identical failing calls: the exact-repeat detector flags the third."""
    call = {"type": "tool_call", "session": session, "name": "bash", "args": {"cmd": "ls /x"}}
    result = {"type": "tool_result", "session": session, "content": "ls: /x: no such file", "is_error": True}
    records = []
    for n in range(3):
        records += [dict(call, id=f"c{n}"), dict(result, id=f"c{n}")]
    return records


@contextlib.asynccontextmanager
async def held_monitor(tmp_path: Path, store: Store | None = None) -> AsyncIterator[tuple[Hub, SocketServer]]:
    """A socket server whose hub is not started: the test starts it when the lanes are set."""
    config = build_config({})
    hub = Hub(config, store)
    server = SocketServer(hub, config, unix_path=short_socket_path(tmp_path))
    await server.start()
    try:
        yield hub, server
    finally:
        await hub.start()  # a no-op if the test started it
        await server.stop()
        await hub.stop()


def lane_of(server: SocketServer, number: int) -> Lane:
    return next(c.lane for c in server.connections if c.number == number)


async def test_a_quiet_connection_is_served_before_a_flood_is_drained(tmp_path):
    """One connection floods 10,000 events; a quiet one sends a 6-event loop after it.  The
    quiet loop goes in the next batch after the one already handed over: its detection comes
    after at most two batches of the flood, not after the flood (or a queue of it)."""
    async with held_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        flood = await RawClient.unix(server.unix_path)
        sending = asyncio.create_task(flood.send(jsonl(message("flood", i) for i in range(10_000))))
        await poll_until(lambda: len(server.connections) == 1, "the flood's connection")
        flood_lane = lane_of(server, 1)
        await poll_until(
            lambda: server.ingest.full(flood_lane) and server.ingest.batches == 1,
            "the flood to fill its lane",
        )
        quiet = await RawClient.unix(server.unix_path)
        await quiet.send(jsonl(loop_records("quiet")))
        await poll_until(
            lambda: len(server.connections) == 2 and len(lane_of(server, 2)) == 6,
            "the quiet loop in its lane",
        )
        seen_at: list[int] = []
        hub.subscribe(
            lambda u: (
                seen_at.append(hub.events_total)
                if isinstance(u, DetectionRaised) and u.detection.session == "quiet"
                else None
            )
        )
        await hub.start()
        await updates.wait(lambda u: isinstance(u, DetectionRaised) and u.detection.session == "quiet")
        await sending
        await poll_until(lambda: hub.events_total == 10_006, "every event processed")
        for client in (flood, quiet):
            await client.close()
    assert seen_at and seen_at[0] <= 2 * BATCH_EVENTS, f"{seen_at[0]} events were processed first"


async def test_coalescing_keeps_each_sessions_order_and_loses_nothing(tmp_path, monkeypatch):
    """20 connections, two sessions each, interleaved: the hub gets them in a few full
    batches (not one per read or connection), and every session's events are stored
    complete and in the order they were sent."""
    # One round's read budget covers every connection, and batches keep their full size
    # (not adapted to how long rounds take): only the grouping is compared.
    monkeypatch.setattr(fair, "READ_BUDGET_MIN", 1 << 22)
    monkeypatch.setattr(fair, "ROUND_SECONDS", 1e9)
    # ...and a store slow under load does not make the pump slice (that is back-pressure, tested apart).
    monkeypatch.setattr("monitor.store.store.BACKLOG_BATCHES", 1 << 20)
    store = Store(tmp_path / "lw.db")
    store.start()
    sent: dict[str, list[str]] = {}
    async with held_monitor(tmp_path, store) as (hub, server):
        clients = [await RawClient.unix(server.unix_path) for _ in range(20)]
        for n, client in enumerate(clients):
            records = [message(f"c{n}-{'ab'[i % 2]}", i) for i in range(200)]
            for record in records:
                sent.setdefault(record["session"], []).append(record["content"])
            await client.send(jsonl(records))
        mux = server.ingest
        await poll_until(lambda: mux.submitted + mux.pending == 4000, "every line decoded")
        await hub.start()
        await poll_until(lambda: hub.events_total == 4000, "every event processed")
        batches = mux.batches
        for client in clients:
            await client.close()
    store.close()
    # Fewer submissions than connections: grouped across them, not one per read or connection (the
    # fair pump's lanes may split a round's 4,000 events in a few more than 4000 // BATCH_EVENTS).
    assert batches < len(clients), f"{batches} submissions for 20 connections' 4,000 events"
    with sqlite3.connect(tmp_path / "lw.db") as conn:
        rows = conn.execute("SELECT session, content FROM events ORDER BY id").fetchall()
    stored: dict[str, list[str]] = {}
    for session, content in rows:
        stored.setdefault(session, []).append(content)
    assert stored == sent


async def test_back_pressure_bounds_memory_and_drops_no_event(tmp_path):
    """A client sending 20,000 events to a monitor whose hub is held: the connection stops
    reading once its lane is full or the round's read budget is spent (the rest waits in
    the socket and the client), and every event arrives once the hub runs."""
    async with held_monitor(tmp_path) as (hub, server):
        client = await RawClient.unix(server.unix_path)
        sending = asyncio.create_task(client.send(jsonl(message("big", i) for i in range(20_000))))
        await poll_until(lambda: len(server.connections) == 1, "the connection")
        mux = server.ingest
        await poll_until(
            lambda: mux.batches == 1 and (mux.full(lane_of(server, 1)) or mux.turns.waiting),
            "the connection to stop reading",
        )
        held = mux.pending
        assert not sending.done(), "the client was never held back"
        await hub.start()
        await sending
        await poll_until(lambda: hub.events_total == 20_000, "every event processed")
        await client.close()
    # One read's worth (32 KB of ~70-byte lines) past the lane's bound at most.
    assert held <= mux.lane_events + 32 * 1024 // 60
    assert mux.lost == 0 and hub.problems_total == 0


async def test_pushes_to_a_client_that_does_not_read_are_counted_exactly(tmp_path, monkeypatch):
    """Detections pushed to an agent that never reads its socket: past a bounded buffer they
    are dropped, and each drop is counted: delivered + dropped == raised."""
    monkeypatch.setattr(socket_out, "PUSH_BUFFER_LIMIT", 4096)
    async with held_monitor(tmp_path) as (hub, server):
        raised = Updates(hub)
        await hub.start()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(DEADLINE)
        sock.connect(str(server.unix_path))
        sessions = [f"loop{n}" for n in range(1500)]
        await asyncio.to_thread(sock.sendall, jsonl(r for session in sessions for r in loop_records(session)))
        await poll_until(lambda: hub.events_total == 1500 * 6, "every event processed")
        await hub.join()
        connection = next(iter(server.connections))
        count = sum(1 for u in raised.seen if isinstance(u, DetectionRaised))
        dropped = connection.pushes_dropped
        assert count >= 1500 and dropped > 0

        def read_all() -> int:
            delivered, buffer = 0, b""
            while delivered + dropped < count:
                buffer += sock.recv(1 << 16)
                *lines, buffer = buffer.split(b"\n")
                delivered += sum(1 for line in lines if b'"detection"' in line)
            return delivered

        delivered = await asyncio.to_thread(read_all)
        sock.close()
    assert delivered + dropped == count
