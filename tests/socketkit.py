"""Helpers for the socket and client tests: a real hub + socket server, raw clients.

Nothing here fakes the pipeline: :func:`running_monitor` starts the real
:class:`~monitor.hub.Hub` (engine and escalation policy, no store) and a real
:class:`~monitor.sources.sockets.SocketServer` on a Unix socket in
``tmp_path``.  Waiting is done by awaiting hub updates or socket reads, each
bounded by :data:`DEADLINE` so a broken build fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson

from monitor.config import Config, build_config
from monitor.hub import Hub
from monitor.sources.sockets import SocketServer

#: Upper bound for any single wait; a hang guard, not a performance assertion.
DEADLINE = 20.0


def short_socket_path(tmp_path: Path) -> Path:
    """A socket path under the 107-byte limit even when tmp_path is long."""
    path = tmp_path / "lw.sock"
    if len(str(path)) <= 100:
        return path
    return Path(tempfile.mkdtemp(prefix="lw-")) / "lw.sock"


@contextlib.asynccontextmanager
async def running_monitor(
    tmp_path: Path, config: Config | None = None, **server_options: Any
) -> AsyncIterator[tuple[Hub, SocketServer]]:
    config = config or build_config({})
    hub = Hub(config)
    await hub.start()
    server_options.setdefault("unix_path", short_socket_path(tmp_path))
    server = SocketServer(hub, config, **server_options)
    try:
        await server.start()
        yield hub, server
    finally:
        await server.stop()
        await hub.stop()


class Updates:
    """Collects every hub update; ``wait(predicate)`` awaits the first that matches."""

    def __init__(self, hub: Hub):
        self.seen: list[object] = []
        self._waiters: list[tuple[Callable[[object], bool], asyncio.Future]] = []
        self.unsubscribe = hub.subscribe(self._on_update)

    def _on_update(self, update: object) -> None:
        self.seen.append(update)
        for predicate, future in list(self._waiters):
            if not future.done() and predicate(update):
                future.set_result(update)

    async def wait(self, predicate: Callable[[object], bool], timeout: float = DEADLINE) -> object:
        for update in self.seen:
            if predicate(update):
                return update
        future = asyncio.get_running_loop().create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._waiters.remove(entry)

    def problems(self) -> list:
        return [u.problem for u in self.seen if hasattr(u, "problem")]

    async def problem(self, predicate: Callable[[Any], bool]) -> Any:
        update = await self.wait(lambda u: hasattr(u, "problem") and predicate(u.problem))
        return update.problem

    async def session(self, session: str, predicate: Callable[[Any], bool] = lambda info: True) -> Any:
        """The first SessionInfo snapshot of ``session`` that satisfies ``predicate``."""
        update = await self.wait(lambda u: hasattr(u, "info") and u.info.id == session and predicate(u.info))
        return update.info


class RawClient:
    """A bare asyncio socket client speaking the protocol line by line."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.received: list[dict] = []

    @classmethod
    async def unix(cls, path: Path) -> RawClient:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 24)
        return cls(reader, writer)

    @classmethod
    async def tcp(cls, host: str, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 24)
        return cls(reader, writer)

    async def send(self, *records: dict | bytes) -> None:
        for record in records:
            self.writer.write(record if isinstance(record, bytes) else orjson.dumps(record) + b"\n")
        await self.writer.drain()

    async def read(
        self, predicate: Callable[[dict], bool] = lambda m: True, timeout: float = DEADLINE
    ) -> dict:
        """The next message matching ``predicate`` (earlier ones are kept in ``received``)."""
        async with asyncio.timeout(timeout):
            while True:
                line = await self.reader.readline()
                if not line:
                    raise ConnectionError("the server closed the connection")
                message = orjson.loads(line)
                self.received.append(message)
                if predicate(message):
                    return message

    async def read_until_closed(self, timeout: float = DEADLINE) -> list[dict]:
        """Every message until the server closes the connection."""
        out = []
        async with asyncio.timeout(timeout):
            while line := await self.reader.readline():
                message = orjson.loads(line)
                self.received.append(message)
                out.append(message)
        return out

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def abort(client: RawClient) -> None:
    """Drop the connection at once (no graceful shutdown of what is buffered)."""
    sock: socket.socket = client.writer.get_extra_info("socket")
    sock.shutdown(socket.SHUT_RDWR)
    client.writer.transport.abort()


def tool_loop(session: str, repeats: int, *, start: int = 0) -> list[dict]:
    """``repeats`` identical failing bash calls with identical results: an exact-repeat loop."""
    records = []
    for i in range(start, start + repeats):
        records.append(
            {
                "type": "tool_call",
                "session": session,
                "id": f"c{i}",
                "name": "bash",
                "args": {"cmd": "ls /no/such/dir"},
            }
        )
        records.append(
            {
                "type": "tool_result",
                "session": session,
                "id": f"c{i}",
                "content": "ls: cannot access '/no/such/dir': No such file or directory",
                "is_error": True,
            }
        )
    return records
