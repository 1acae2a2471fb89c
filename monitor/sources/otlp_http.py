"""The bounded HTTP/1.1 half of the OTLP receiver: connections, heads, bodies.

Everything a client can make the receiver hold is bounded before it is held
(issue 32, item 3):

* **Connections.** :class:`Gate` admits at most ``max_connections`` (and never
  more than the process's descriptor limit allows, keeping
  :data:`FD_RESERVE` descriptors for agents, hooks, files and the database);
  a connection that has not yet sent an authorized request counts against
  its peer's share (``max_per_peer``).  When full, the oldest such
  connection is closed to make room (a stranger's idle connection never
  holds a slot an exporter needs); only when every slot belongs to
  authorized connections is the new one answered 503.
* **Time.** A request's head must arrive within :data:`HEAD_SECONDS` of the
  connection (or of the previous answer); its body within
  :data:`BODY_SECONDS`, however slowly it trickles; an authorized
  connection may then stay idle :data:`IDLE_SECONDS`.
* **Bytes.** Heads are at most :data:`MAX_HEADER_LINES` lines of the
  reader's limit; a body is read only after the path, method, token and
  content type passed, only up to ``max_body`` (a larger Content-Length is
  refused at once, a chunked body as soon as it passes it), into one
  buffer, and only while :class:`BodyBudget` has room for it: the bytes of
  all bodies being read or decoded at once are bounded too.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections import OrderedDict

#: Descriptors never taken by OTLP connections (agents' sockets, hooks, tailed files, SQLite).
FD_RESERVE = 256
MAX_CONNECTIONS = 128
MAX_PER_PEER = 32
HEAD_SECONDS = 10.0
BODY_SECONDS = 30.0
IDLE_SECONDS = 60.0
MAX_HEADER_LINES = 100
#: Bytes of request bodies held at once (being read, or waiting to be decoded).
BODY_BUDGET = 64 * 1024 * 1024

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Reply:
    __slots__ = ("status", "body", "content_type", "headers")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "text/plain",
        headers: dict[str, str] | None = None,
    ):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}


class HttpError(Exception):
    """A request answered with ``reply`` and the connection closed (its body unread)."""

    def __init__(self, reply: Reply):
        super().__init__(reply.status)
        self.reply = reply


class Request:
    __slots__ = ("method", "path", "version", "headers")

    def __init__(self, method: str, path: str, version: str, headers: dict[str, str]):
        self.method = method
        self.path = path
        self.version = version
        self.headers = headers

    @property
    def close(self) -> bool:
        return self.headers.get("connection", "").lower() == "close" or self.version == "HTTP/1.0"


async def read_head(reader: asyncio.StreamReader) -> Request | None:
    """The request line and headers; None at a clean end of the stream."""
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(Reply(400, b"bad request line"))
    method, target, version = parts
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise HttpError(Reply(400, b"too many header lines"))
    return Request(method, target.split("?", 1)[0], version, headers)


class BodyBudget:
    """Bytes of bodies held at once, across connections."""

    def __init__(self, limit: int = BODY_BUDGET):
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used -= size


def _busy(what: str) -> HttpError:
    return HttpError(
        Reply(503, f"loopwatch is busy ({what}); retry later".encode(), headers={"Retry-After": "2"})
    )


async def read_body(
    reader: asyncio.StreamReader, request: Request, limit: int, budget: BodyBudget
) -> bytearray:
    """The request's body, bounded by ``limit`` and the shared ``budget``.

    The caller gives ``len(body)`` back to the budget once done with it."""
    headers = request.headers
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader, limit, budget)
    text = headers.get("content-length")
    if text is None:
        raise HttpError(Reply(411, b"Content-Length required"))
    try:
        length = int(text)
    except ValueError:
        raise HttpError(Reply(400, b"bad Content-Length")) from None
    if length < 0:
        raise HttpError(Reply(400, b"bad Content-Length"))
    if length > limit:
        raise HttpError(Reply(413, f"body over {limit:,} bytes".encode()))
    if not budget.take(length):
        raise _busy("too many bodies being read")
    try:
        body = bytearray()
        while len(body) < length:
            chunk = await reader.read(min(length - len(body), 256 * 1024))
            if not chunk:
                raise asyncio.IncompleteReadError(bytes(body), length)
            body += chunk
        return body
    except BaseException:
        budget.give(length)
        raise


async def _read_chunked(reader: asyncio.StreamReader, limit: int, budget: BodyBudget) -> bytearray:
    body = bytearray()
    taken = 0
    try:
        while True:
            size_line = (await reader.readline()).split(b";")[0].strip()
            try:
                size = int(size_line or b"0", 16)
            except ValueError:
                raise HttpError(Reply(400, b"bad chunk size")) from None
            if size < 0:
                raise HttpError(Reply(400, b"bad chunk size"))
            if size == 0:
                for _ in range(MAX_HEADER_LINES):  # trailers
                    if (await reader.readline()) in (b"\r\n", b"\n", b""):
                        return body
                raise HttpError(Reply(400, b"too many trailer lines"))
            if len(body) + size > limit:
                raise HttpError(Reply(413, f"body over {limit:,} bytes".encode()))
            if not budget.take(size):
                raise _busy("too many bodies being read")
            taken += size
            body += await reader.readexactly(size)
            await reader.readline()
    except BaseException:
        budget.give(taken)
        raise


class Slot:
    """One admitted connection."""

    __slots__ = ("peer", "task", "writer", "authorized", "since")

    def __init__(self, peer: str, task: asyncio.Task | None, writer: asyncio.StreamWriter):
        self.peer = peer
        self.task = task
        self.writer = writer
        self.authorized = False
        self.since = time.monotonic()

    def evict(self) -> None:
        self.writer.close()
        if self.task is not None:
            self.task.cancel()


def descriptor_cap(wanted: int) -> int:
    """``wanted``, lowered so OTLP connections leave :data:`FD_RESERVE` descriptors free."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(4, min(wanted, (soft - FD_RESERVE) // 2))


class Gate:
    """Admits connections within the caps; evicts strangers' to make room."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS, max_per_peer: int = MAX_PER_PEER):
        self.max_connections = descriptor_cap(max(1, max_connections))
        self.max_per_peer = max(1, max_per_peer)
        self.slots: OrderedDict[Slot, None] = OrderedDict()  # oldest first
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self.slots)

    def _oldest_stranger(self, peer: str | None = None) -> Slot | None:
        for slot in self.slots:
            if not slot.authorized and (peer is None or slot.peer == peer):
                return slot
        return None

    def admit(self, slot: Slot) -> bool:
        """Take ``slot`` in (evicting another if need be), or False: answer 503."""
        strangers = sum(1 for s in self.slots if s.peer == slot.peer and not s.authorized)
        if strangers >= self.max_per_peer:
            self._evict(self._oldest_stranger(slot.peer))
        if len(self.slots) >= self.max_connections:
            victim = self._oldest_stranger()
            if victim is None:
                self.refused += 1
                return False
            self._evict(victim)
        self.slots[slot] = None
        return True

    def _evict(self, slot: Slot | None) -> None:
        if slot is not None:
            self.slots.pop(slot, None)
            self.evicted += 1
            slot.evict()

    def leave(self, slot: Slot) -> None:
        self.slots.pop(slot, None)

    def close_all(self) -> None:
        for slot in list(self.slots):
            slot.evict()
        self.slots.clear()
