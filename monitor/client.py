"""The Python client agents use to stream events to loopwatch and hear back from it.

    from monitor.client import LoopwatchClient

    client = LoopwatchClient(agent="my-agent", on_control=handle)   # never raises
    client.session_start()
    call = client.tool_call("bash", {"cmd": "ls"})
    client.tool_result(call, "README.md")
    ...
    client.session_end("ok")
    client.close()

:class:`LoopwatchClient` is synchronous and thread-based, so it works in any
agent.  Every public method only serializes and queues: the one background
thread connects (Unix socket, or TCP with a token), writes, reads control
messages (``inject``, ``ack``, ``kill``, ``detection``…), and reconnects with
exponential back-off and jitter, quietly (a monitor at its connection limit
refuses; the client just retries).  While the monitor is absent, events wait
in a bounded buffer; when it is full the oldest are dropped and counted.
Nothing here blocks the agent for long or raises into it.

``close(timeout=5.0)`` flushes: it keeps connecting (every 50-200 ms) and
writing until the queue is empty or ``timeout`` seconds have passed, then
stops the thread; ``queued`` says what was left.  At interpreter exit the
clients still open get one shared ``EXIT_FLUSH_SECONDS``.

:class:`AsyncLoopwatchClient` is the same client for asyncio agents, with
``async for message in client`` for control messages.  :class:`InboxReader`
follows ``<log>.inbox.jsonl`` for agents that log to files instead.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import random
import select
import socket
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from monitor.framing import LineSplitter
from monitor.localsock import listener_problem, socket_dir_problem
from monitor.paths import ADDRESS_ENV, SOCKET_ENV, TOKEN_ENV, default_socket_path, inbox_path

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("loopwatch.client")

MAX_REPLY_BYTES = 16 * 1024 * 1024
#: A connection the monitor does not welcome within this time is dropped and retried.
WELCOME_TIMEOUT = 5.0
#: How long ``close()`` keeps trying to deliver what is queued, by default.
CLOSE_TIMEOUT = 5.0
#: While closing, a refused or failed connection is retried after this long (jittered).
CLOSE_RETRY = 0.2
#: What the clients still open at interpreter exit share to flush.
EXIT_FLUSH_SECONDS = 2.0
_DUMP_OPTIONS = orjson.OPT_NON_STR_KEYS

ControlCallback = Callable[[dict], None]


def _now() -> float:
    return time.time()


class _EventHelpers:
    """The native event helpers, shared by the sync and async clients."""

    agent: str
    session: str

    def _emit(self, record: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def event(self, type: str, *, session: str | None = None, **fields: Any) -> None:
        """Send any native event: ``{"type": type, "session": …, "ts": now, **fields}``."""
        record = {"type": type, "session": session or self.session, "ts": _now()}
        record.update({k: v for k, v in fields.items() if v is not None})
        self._emit(record)

    def session_start(
        self,
        *,
        session: str | None = None,
        agent: str | None = None,
        pid: int | None = None,
        parent: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """Announce the session; ``pid`` defaults to this process (so it can be killed)."""
        self.event(
            "session_start",
            session=session,
            agent=agent or self.agent,
            pid=os.getpid() if pid is None else pid,
            parent=parent,
            meta=meta,
        )

    def tool_call(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        session: str | None = None,
    ) -> str:
        """Record a tool call; returns its id for the matching :meth:`tool_result`."""
        call_id = id or uuid.uuid4().hex[:12]
        self.event("tool_call", session=session, id=call_id, name=name, args=args or {})
        return call_id

    def tool_result(
        self, id: str, content: Any = "", *, is_error: bool = False, session: str | None = None
    ) -> None:
        if not isinstance(content, str):
            content = str(content)
        self.event("tool_result", session=session, id=id, content=content, is_error=bool(is_error))

    def message(self, role: str, content: Any, *, session: str | None = None) -> None:
        """``role`` is user, assistant or system."""
        if not isinstance(content, str):
            content = str(content)
        self.event("message", session=session, role=role, content=content)

    def usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
        *,
        session: str | None = None,
    ) -> None:
        self.event(
            "usage",
            session=session,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
        )

    def compaction(self, *, session: str | None = None) -> None:
        self.event("compaction", session=session)

    def session_end(self, status: str = "ok", *, session: str | None = None) -> None:
        self.event("session_end", session=session, status=status)


def _parse_address(address: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(address, tuple):
        return address[0], int(address[1])
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def _monitor_address(address: str | tuple[str, int] | None) -> tuple[tuple[str, int] | None, str | None]:
    """The monitor's (host, port) from ``address`` or ``$LOOPWATCH_ADDRESS`` (None: use
    the socket), and why it is unusable when it is no address (then ``("", 0)``)."""
    address = address if address is not None else (os.environ.get(ADDRESS_ENV) or None)
    if not address:
        return None, None
    try:
        return _parse_address(address), None
    except (ValueError, TypeError, IndexError):
        # A bad address must not crash the agent: it just never connects.
        unusable = f"invalid monitor address {address!r} (expected HOST:PORT)"
        log.warning("loopwatch: %s", unusable)
        return ("", 0), unusable


def _send_some(sock: socket.socket, data: memoryview) -> int:
    """Send what the socket takes of ``data`` now; how many bytes that was."""
    try:
        return sock.send(data)
    except BlockingIOError:
        return 0


def _unsent(batch: list[bytes], sent: int) -> list[bytes]:
    """The lines of ``batch`` not wholly within its first ``sent`` bytes (a half-sent line is sent again whole)."""
    offset, unsent = 0, []
    for line in batch:
        if offset + len(line) > sent:
            unsent.append(line)
        offset += len(line)
    return unsent


def _open_socket(
    address: tuple[str, int] | None, socket_path: Path | None, timeout: float
) -> tuple[socket.socket | None, str | None]:
    """A non-blocking connection to the monitor, or (None, why the listener
    found is not trusted); (None, None) when nothing answers."""
    try:
        if address is not None:
            sock = socket.create_connection(address, timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            assert socket_path is not None, "a client has a socket path when it has no address"
            problem = socket_dir_problem(socket_path)
            if problem is not None:
                return None, problem
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(os.fspath(socket_path))
                problem = listener_problem(sock)
            except OSError:
                sock.close()
                raise
            if problem is not None:  # not the user's monitor: send it nothing
                sock.close()
                return None, problem
    except OSError:
        return None, None
    sock.setblocking(False)
    return sock, None


class LoopwatchClient(_EventHelpers):
    """A thread-based connection to the monitor that never blocks or crashes the agent.

    ``socket_path`` (default ``$LOOPWATCH_SOCKET`` or the monitor's default
    path) or ``address`` (``HOST:PORT``, default ``$LOOPWATCH_ADDRESS``) with
    ``token`` (default ``$LOOPWATCH_TOKEN``).  Control messages go to
    ``on_control`` (called on the client's thread; exceptions are logged and
    swallowed) and to :meth:`messages` / :meth:`get_message`.
    """

    def __init__(
        self,
        agent: str = "agent",
        session: str | None = None,
        *,
        socket_path: str | Path | None = None,
        address: str | tuple[str, int] | None = None,
        token: str | None = None,
        on_control: ControlCallback | None = None,
        buffer_size: int = 10_000,
        inbox_size: int = 1_000,
        connect_timeout: float = 1.0,
        backoff_min: float = 0.05,
        backoff_max: float = 5.0,
        heartbeat: float = 60.0,
        start: bool = True,
    ):
        self.agent = agent
        self.session = session or f"{agent}-{uuid.uuid4().hex[:8]}"
        #: ``unusable``: why this client can never connect (None: it can).
        self.address, self.unusable = _monitor_address(address)
        self.listener_refused: str | None = None  # why the socket found was not trusted
        self.socket_path = (
            None if self.address else Path(socket_path or os.environ.get(SOCKET_ENV) or default_socket_path())
        )
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.on_control = on_control
        self.connect_timeout = connect_timeout
        self.backoff_min, self.backoff_max = backoff_min, backoff_max
        self.heartbeat = heartbeat
        # Counters (read them any time; they only grow).
        self.sent = 0
        self.dropped = 0
        self.received = 0
        self.connects = 0
        self.errors = 0
        self.last_error: dict | None = None  # the last {"type":"error"} the monitor sent
        self._buffer_size = max(1, buffer_size)
        self._out: collections.deque[bytes] = collections.deque()
        self._inbox: collections.deque[dict] = collections.deque(maxlen=max(1, inbox_size))
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._sessions: dict[str, None] = {}  # started and not ended: re-bound on reconnect
        self._connected = threading.Event()
        self._closing = False
        self._close_deadline = 0.0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._thread: threading.Thread | None = None
        self._listeners: list[ControlCallback] = []
        if start:
            self.start()

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="loopwatch-client", daemon=True)
            self._thread.start()
            _open_clients.add(self)

    @property
    def connected(self) -> bool:
        """True while the monitor has welcomed this connection."""
        return self._connected.is_set()

    @property
    def queued(self) -> int:
        """Events waiting to be written (the monitor is absent, slow or refusing)."""
        return len(self._out)

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until connected (for scripts and tests); False on timeout."""
        return self._connected.wait(timeout)

    def flush(self, timeout: float = 1.0) -> bool:
        """Wait up to ``timeout`` until everything queued was written; True if it was."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._out and not self._writing:
                    return True
            if not self.connected:
                return False
            time.sleep(0.005)
        return False

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Flush what is queued (at most ``timeout`` seconds, retrying a refused or
        broken connection meanwhile) and stop the thread."""
        try:
            self._close_deadline = time.monotonic() + timeout
            self._closing = True
            self._wake()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(timeout + 0.5)
            _open_clients.discard(self)
        except Exception:  # pragma: no cover - close must never raise into the agent
            log.debug("loopwatch client close failed", exc_info=True)

    def __enter__(self) -> LoopwatchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending ------------------------------------------------------------------------

    _writing = False  # a batch is handed to the socket but not fully written

    def _emit(self, record: dict[str, Any]) -> None:
        try:
            line = orjson.dumps(record, default=str, option=_DUMP_OPTIONS) + b"\n"
            session = record.get("session", "")  # event() always sets it
            with self._lock:
                if record.get("type") == "session_start":
                    self._sessions[session] = None
                elif record.get("type") == "session_end":
                    self._sessions.pop(session, None)
                if len(self._out) >= self._buffer_size:
                    self._out.popleft()  # the monitor is absent or slow: keep the newest
                    self.dropped += 1
                self._out.append(line)
            self._wake()
        except Exception:
            self.errors += 1
            log.debug("loopwatch client could not queue an event", exc_info=True)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already awake (buffer full) or closed

    # -- receiving ------------------------------------------------------------------------

    def get_message(self, timeout: float | None = 0.0) -> dict | None:
        """The next control message, waiting up to ``timeout`` (None: forever)."""
        with self._arrived:
            if not self._inbox and timeout != 0:
                self._arrived.wait_for(lambda: bool(self._inbox) or self._closing, timeout)
            return self._inbox.popleft() if self._inbox else None

    def messages(self, timeout: float | None = None) -> Iterator[dict]:
        """Control messages as they arrive; stops after ``timeout`` seconds without one, or on close."""
        while True:
            message = self.get_message(timeout)
            if message is None:
                return
            yield message

    def _dispatch(self, raw: bytes, welcomed: bool = True) -> str | None:
        """Hand one line from the monitor to the agent; return its type."""
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(message, dict):
            return None
        kind = message.get("type")
        if kind == "welcome":
            return kind
        if not welcomed and kind == "error":
            # A refusal before the welcome (the monitor is at its connection
            # limit): the client retries with back-off; not the agent's business.
            self.last_error = message
            return kind
        self.received += 1
        if message.get("type") == "error":
            self.last_error = message
        with self._arrived:
            self._inbox.append(message)
            self._arrived.notify_all()
        for callback in [self.on_control, *self._listeners]:
            if callback is None:
                continue
            try:
                callback(message)
            except Exception:  # the agent's handler must not kill the connection
                log.exception("loopwatch on_control callback failed")
        return kind

    # -- the connection thread ------------------------------------------------------------

    def _connect(self) -> socket.socket | None:
        if self.unusable:
            return None
        sock, problem = _open_socket(self.address, self.socket_path, self.connect_timeout)
        if problem is not None:
            self._refuse_listener(problem)
        return sock

    def _refuse_listener(self, problem: str) -> None:
        """Say once why the socket is not used; keep retrying (the owner may fix it)."""
        if self.listener_refused != problem:
            self.listener_refused = problem
            log.warning("loopwatch: not connecting to %s: %s", self.socket_path, problem)

    def _hello(self) -> bytes:
        hello: dict[str, Any] = {
            "type": "hello",
            "agent": self.agent,
            "session": self.session,
            "client": "monitor.client",
        }
        if self.token:
            hello["token"] = self.token
        with self._lock:
            if self._sessions:
                hello["sessions"] = list(self._sessions)
        return orjson.dumps(hello) + b"\n"

    def _run(self) -> None:
        try:
            self._connection_loop()
        finally:
            with self._arrived:
                self._arrived.notify_all()  # wake readers blocked in get_message()
            for end in (self._wake_r, self._wake_w):
                end.close()

    def _connection_loop(self) -> None:
        backoff = self.backoff_min
        while True:
            sock = self._connect()
            welcomed = False
            if sock is not None:
                try:
                    welcomed = self._serve(sock)
                except Exception:
                    log.debug("loopwatch connection ended", exc_info=True)
                finally:
                    self._connected.clear()
                    sock.close()
            if self._closing and (self._flushed() or time.monotonic() >= self._close_deadline):
                return
            if welcomed:  # a good connection broke (monitor restart): retry soon
                backoff = self.backoff_min
            if self._closing:  # events still queued: keep trying, briefly, until the deadline
                left = self._close_deadline - time.monotonic()
                self._sleep(max(0.0, min(left, CLOSE_RETRY * random.uniform(0.25, 1.0))))
                continue
            # Back off (with jitter, so many agents do not reconnect in step);
            # a refused connection counts as a failure, or it would spin.
            self._sleep(backoff * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, self.backoff_max)

    def _flushed(self) -> bool:
        with self._lock:
            return not self._out and not self._writing

    def _sleep(self, seconds: float) -> None:
        """Sleep that ``close()`` interrupts."""
        try:
            select.select([self._wake_r], [], [], seconds)
            self._drain_wake()
        except (OSError, ValueError):
            time.sleep(seconds)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _serve(self, sock: socket.socket) -> bool:
        """Say hello, then write queued lines and read control messages until the
        connection breaks or we close.  True if the monitor welcomed us.

        Queued events wait for the welcome, so a refused connection (bad
        token, too many clients) loses none of them.
        """
        splitter = LineSplitter(MAX_REPLY_BYTES)
        welcomed = False
        batch: list[bytes] = []  # the queued lines in ``pending`` (none for hello/ping)
        pending = memoryview(self._hello())
        sent = 0
        opened = last_write = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                if sent >= len(pending):
                    self.sent += len(batch)
                    batch = []
                    if welcomed:
                        with self._lock:
                            batch = [self._out.popleft() for _ in range(min(len(self._out), 512))]
                            self._writing = bool(batch)
                        pending, sent = memoryview(b"".join(batch)), 0
                        if not batch:
                            if self._closing:
                                return welcomed
                            if now - last_write >= self.heartbeat:
                                pending = memoryview(b'{"type":"ping"}\n')
                    elif now - opened > WELCOME_TIMEOUT:
                        return False
                if self._closing and now >= self._close_deadline:
                    return welcomed
                readable, writable, _ = select.select(
                    [sock, self._wake_r],
                    [sock] if sent < len(pending) else [],
                    [],
                    self.heartbeat if welcomed and not self._closing else 0.1,
                )
                if self._wake_r in readable:
                    self._drain_wake()
                if sock in readable:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return welcomed
                    for _lineno, raw, _size in splitter.feed(chunk):
                        if raw is not None and self._dispatch(raw, welcomed) == "welcome" and not welcomed:
                            welcomed = True
                            self.connects += 1
                            self._connected.set()
                if sock in writable:
                    sent += _send_some(sock, pending[sent:])
                    last_write = time.monotonic()
        finally:
            if sent >= len(pending):
                self.sent += len(batch)
                batch = []
            self._requeue(batch, sent)

    def _requeue(self, batch: list[bytes], sent: int) -> None:
        """Put back the lines of a batch the broken connection did not fully take."""
        unsent = _unsent(batch, sent)
        with self._lock:
            self._writing = False
            for line in reversed(unsent):
                if len(self._out) >= self._buffer_size:
                    self.dropped += 1
                    continue
                self._out.appendleft(line)


_open_clients: weakref.WeakSet[LoopwatchClient] = weakref.WeakSet()


@atexit.register
def _close_open_clients(timeout: float = EXIT_FLUSH_SECONDS) -> None:
    """Give queued events (a final session_end) one brief, shared chance to leave at exit."""
    clients = list(_open_clients)
    deadline = time.monotonic() + timeout
    for client in clients:
        client._close_deadline = deadline
        client._closing = True
        client._wake()
    for client in clients:
        if client._thread is not None:
            client._thread.join(max(0.0, deadline - time.monotonic()) + 0.1)


class AsyncLoopwatchClient(_EventHelpers):
    """The client for asyncio agents: the same non-blocking helpers, plus ``async for``.

    async with AsyncLoopwatchClient(agent="a") as client:
        client.session_start()
        async for message in client:          # control messages
            if message["type"] == "inject": ...
    """

    def __init__(self, agent: str = "agent", session: str | None = None, **options: Any):
        options.pop("start", None)
        self._on_control = options.pop("on_control", None)
        self._client = LoopwatchClient(agent, session, start=False, **options)
        self.agent = self._client.agent
        self.session = self._client.session
        self._queue: asyncio.Queue[dict] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def client(self) -> LoopwatchClient:
        """The underlying thread-based client (for its counters)."""
        return self._client

    @property
    def connected(self) -> bool:
        return self._client.connected

    async def start(self) -> None:
        import asyncio  # here, not at the top: agents that are not asyncio never load it

        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue(maxsize=self._client._inbox.maxlen or 1000)
        self._client._listeners.append(self._from_thread)
        self._client.start()

    async def wait_connected(self, timeout: float | None = None) -> bool:
        import asyncio

        return await asyncio.to_thread(self._client.wait_connected, timeout)

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        import asyncio

        await asyncio.to_thread(self._client.close, timeout)

    async def __aenter__(self) -> AsyncLoopwatchClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _emit(self, record: dict[str, Any]) -> None:
        self._client._emit(record)

    def _from_thread(self, message: dict) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._deliver, message)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _deliver(self, message: dict) -> None:
        queue = self._queue
        if queue is None:
            return
        if queue.full():
            queue.get_nowait()  # bounded: the newest control messages matter most
        queue.put_nowait(message)
        if self._on_control is not None:
            try:
                self._on_control(message)
            except Exception:
                log.exception("loopwatch on_control callback failed")

    async def get_message(self, timeout: float | None = None) -> dict | None:
        """The next control message, or None after ``timeout`` seconds."""
        import asyncio

        if self._queue is None:
            await self.start()
        queue = self._queue
        assert queue is not None, "start() makes the queue"
        try:
            async with asyncio.timeout(timeout):
                return await queue.get()
        except TimeoutError:
            return None

    def __aiter__(self) -> AsyncIterator[dict]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[dict]:
        while True:
            message = await self.get_message()
            if message is not None:
                yield message


class InboxReader:
    """Follows ``<log>.inbox.jsonl``: the control messages for an agent that logs to a file.

    ``read()`` returns the complete new lines since the last call (a line still
    being written waits for its newline); it survives the inbox being
    truncated, replaced or not existing yet.
    """

    def __init__(self, log_path: str | Path, *, from_start: bool = True):
        self.path = inbox_path(log_path)
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""
        self.skipped = 0  # lines that were not JSON objects
        if not from_start:
            try:
                info = self.path.stat()
                self._offset, self._inode = info.st_size, info.st_ino
            except OSError:
                pass

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                info = os.fstat(f.fileno())
                if info.st_ino != self._inode or info.st_size < self._offset:
                    self._offset, self._inode, self._partial = 0, info.st_ino, b""
                f.seek(self._offset)
                data = f.read(MAX_REPLY_BYTES)
        except OSError:
            return []
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        out: list[dict] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                message = orjson.loads(raw)
            except orjson.JSONDecodeError:
                self.skipped += 1
                continue
            if isinstance(message, dict):
                out.append(message)
            else:
                self.skipped += 1
        return out
