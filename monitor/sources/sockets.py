"""The socket source: agents stream native JSONL events in, control messages go back out.

:class:`SocketServer` listens on a Unix domain socket (mode 0600 in a 0700
directory) and, only when asked, on TCP (``HOST:PORT``, a token required).
Each accepted client is a :class:`~monitor.sources.socket_conn.Connection`.

Protocol lines the server handles itself (never passed to the decoder):

* ``{"type":"hello","token":…,"agent":…,"session":…,"sessions":[…],"origin":"hook"}``
  — required first on TCP (with the token); optional on Unix.  ``session`` is
  the default for events without one; ``sessions`` re-binds those sessions to
  this connection after a reconnect; ``origin: "hook"`` marks a hook process.
  Answered with ``{"type":"welcome","server":"loopwatch","version":…}``.
* ``{"type":"poll","session":S}`` — a hook collects the control messages
  queued for S, then ``{"type":"poll_done","session":S}``.  A ``PreToolUse``
  hook adds ``"call_id"``: a guard's ``deny`` goes only to the poll of the call it names.
* ``{"type":"ping"}`` — keeps an idle connection open; no reply.

Every session an agent connection speaks for gets a :class:`SocketChannel`
registered with the hub; hook sessions get a
:class:`~monitor.control.HookMailbox` instead.  Detections are pushed to the
session's connection as ``{"type":"detection",…}``.  A malformed line gets
``{"type":"error","line":N,"reason":…}`` and the connection stays up.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import stat
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from monitor.config import Config, default_socket_path
from monitor.control import HookMailbox, control_message
from monitor.formats.base import Problem
from monitor.localsock import ensure_private_dir, in_shared_dir
from monitor.sources import LiveSink
from monitor.sources.fair import IngestMux, Lane
from monitor.sources.socket_conn import PROTOCOL_TYPES, Connection, SocketChannel, quiet_refusal
from monitor.updates import DetectionRaised

__all__ = ["PROTOCOL_TYPES", "SocketChannel", "SocketError", "SocketServer", "parse_listen"]

log = logging.getLogger("loopwatch.sockets")

TOKEN_ENV = "LOOPWATCH_TOKEN"
#: Hook sessions whose mailboxes are kept (least recently used dropped first).
MAX_MAILBOXES = 10_000
#: How long a poll waits for the hub to finish the events sent just before it
#: (well inside a hook's own 0.5 s budget, so queued messages still get out).
POLL_SETTLE_TIMEOUT = 0.25
UNIX_PATH_MAX = 107
LISTEN_BACKLOG = 256


class SocketError(RuntimeError):
    """The server cannot start (socket in use, bad path, missing token…)."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``PORT`` or ``[IPv6]:PORT`` -> (host, port); host defaults to 127.0.0.1."""
    text = value.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise SocketError(f"--listen {value!r}: expected HOST:PORT with a numeric port") from None
    if not 0 <= port <= 65535:
        raise SocketError(f"--listen {value!r}: port must be 0..65535")
    return host, port


class SocketServer:
    """Accepts agent connections on a Unix socket (and optionally TCP) for a hub."""

    def __init__(
        self,
        hub: LiveSink,
        config: Config,
        *,
        unix_path: str | Path | None = None,
        listen: str | None = None,
        token: str | None = None,
        ingest: IngestMux | None = None,
    ):
        settings = config.sources
        self.hub = hub
        self.config = config
        self.unix_path = Path(unix_path or settings.socket or default_socket_path()).expanduser()
        self.listen = listen if listen is not None else (settings.listen or None)
        self.token = token or os.environ.get(TOKEN_ENV) or ""
        if self.listen and not self.token:
            raise SocketError(f"TCP listening needs a token: use --token-file PATH or set {TOKEN_ENV}")
        self.max_line_bytes = settings.max_line_bytes
        self.max_connections = settings.max_connections
        self.hello_timeout = settings.hello_timeout_seconds
        self.max_unauthenticated = settings.max_unauthenticated
        self.per_address = max(1, settings.max_unauthenticated_per_address)
        #: Addresses whose clients sent a valid token before (most recent last).
        self.known_hosts: OrderedDict[str, None] = OrderedDict()
        self.evicted = 0
        self.preauth_bytes = max(256, settings.preauth_bytes)
        self.idle_timeout = settings.idle_timeout_seconds
        self.tcp_address: tuple[str, int] | None = None
        self.mailboxes: OrderedDict[str, HookMailbox] = OrderedDict()
        self.socket_channels: dict[str, SocketChannel] = {}
        self.connections: set[Connection] = set()
        #: All connections' events to the hub, fairly (fair.py); shared with the
        #: other sources when given (then its owner closes it).
        self.ingest = ingest if ingest is not None else IngestMux(hub)
        self._owns_ingest = ingest is None
        self.lines = self.events = self.refused = 0
        self._listeners: list[socket.socket] = []
        self._acceptors: list[asyncio.Task] = []
        self._tasks: set[asyncio.Task] = set()
        self._numbers = 0
        self._unix_inode: int | None = None
        self._unsubscribe: Callable[[], None] | None = None

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        self.ingest.start()
        try:
            self._serve(self._bind_unix(), tcp=False)
            if self.listen:
                listener = self._bind_tcp(*parse_listen(self.listen))
                self.tcp_address = listener.getsockname()[:2]
                self._serve(listener, tcp=True)
        except BaseException:
            await self.stop()
            raise
        self._unsubscribe = self.hub.subscribe(self._on_update, kinds=(DetectionRaised,))

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for task in [*self._acceptors, *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._acceptors, *self._tasks, return_exceptions=True)
        self._acceptors.clear()
        if self._owns_ingest:  # (a shared one is closed by its owner, flushing these lanes too)
            await self.ingest.close()  # what the connections decoded still reaches the hub
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        self._remove_own_socket()

    async def __aenter__(self) -> SocketServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the Unix socket file --------------------------------------------------------------

    def _prepare_dir(self) -> None:
        """The socket's directory: one in a shared directory (the default
        ``/tmp/loopwatch-<uid>``) is created 0700 and checked with ``lstat``
        (ours, private, not a link); it is never ``chmod``-ed or followed."""
        parent = self.unix_path.parent
        if in_shared_dir(parent):
            problem = ensure_private_dir(parent)
            if problem is not None:
                raise SocketError(problem)
        elif not parent.exists():
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _bind_unix(self) -> socket.socket:
        path = self.unix_path
        if len(os.fsencode(path)) > UNIX_PATH_MAX:
            raise SocketError(
                f"socket path too long ({len(os.fsencode(path))} bytes, max {UNIX_PATH_MAX}): {path}"
            )
        self._prepare_dir()
        if path.exists() or path.is_symlink():
            mode = path.lstat().st_mode
            if not stat.S_ISSOCK(mode):
                raise SocketError(f"{path} exists and is not a socket; refusing to replace it")
            if _listening(path):
                raise SocketError(f"another monitor is already listening on {path}")
        # Bind under a temporary name, restrict it, then rename into place: the
        # final path never exists with looser permissions, and a stale socket
        # is replaced atomically.
        temp = Path(tempfile.mktemp(prefix=".loopwatch-", suffix=".sock", dir=path.parent))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(os.fspath(temp))
            os.chmod(temp, 0o600)
            os.rename(temp, path)
        except OSError as exc:
            sock.close()
            temp.unlink(missing_ok=True)
            raise SocketError(f"cannot create socket {path}: {exc.strerror or exc}") from None
        self._unix_inode = path.stat().st_ino
        sock.setblocking(False)
        return sock

    def _remove_own_socket(self) -> None:
        """Remove the socket file unless another monitor has replaced it since."""
        if self._unix_inode is None:
            return
        try:
            if self.unix_path.stat().st_ino == self._unix_inode:
                self.unix_path.unlink()
        except OSError:
            pass
        self._unix_inode = None

    # -- connections ---------------------------------------------------------------------

    def _bind_tcp(self, host: str, port: int) -> socket.socket:
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise SocketError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError as exc:
            sock.close()
            raise SocketError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        return sock

    def _serve(self, listener: socket.socket, *, tcp: bool) -> None:
        listener.listen(LISTEN_BACKLOG)
        listener.setblocking(False)
        self._listeners.append(listener)
        self._acceptors.append(asyncio.create_task(self._accept_loop(listener, tcp), name="loopwatch-accept"))

    async def _accept_loop(self, listener: socket.socket, tcp: bool) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _address = await loop.sock_accept(listener)
            except OSError as exc:  # out of file descriptors, a client that left at once…
                log.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(0.05)
                continue
            sock.setblocking(False)
            if tcp:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.create_task(self._handle(sock, tcp))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _handle(self, sock: socket.socket, tcp: bool) -> None:
        self._numbers += 1
        connection = Connection(self, sock, self._numbers, tcp)
        connection.task = asyncio.current_task()
        try:
            refusal = self._over_limit(tcp) or (self._make_room(connection) if tcp else "")
            if refusal:
                await connection.refuse(0, refusal)
                return
            self.connections.add(connection)
            await connection.run()
        except asyncio.CancelledError:
            pass  # the server is stopping
        except Exception:  # a bug here must cost one connection, not the monitor
            log.exception("%s: connection handler failed", connection.source)
        finally:
            self.connections.discard(connection)
            for session in connection.sessions:
                channel = self.socket_channels.get(session)
                if channel is not None and channel.connection is connection:
                    del self.socket_channels[session]
            await connection.close()

    def _over_limit(self, tcp: bool) -> str:
        """Why a new connection must be refused ("" if it may come in).  Unix and
        TCP connections have caps of their own, and TCP clients that have not
        said hello yet a smaller one, so strangers on the network can never
        lock local agents and hooks out."""
        same = sum(1 for c in self.connections if c.tcp == tcp)
        if same >= self.max_connections:
            kind = "TCP" if tcp else "Unix-socket"
            return f"too many connections (the limit is {self.max_connections} {kind} connections)"
        return ""

    def _make_room(self, new: Connection) -> str:
        """Room among the TCP connections waiting for their hello, or why not.

        A full waiting room closes its oldest stranger's connection rather
        than turning the newcomer away: an agent says hello at once, so
        clients that hold a slot without one (and reconnect when closed) can
        no longer keep every agent out.  One address holds at most
        ``per_address`` waiting slots, and addresses that never sent a valid
        token at most three quarters of them: the rest stays for addresses
        that authenticated before."""
        # Oldest first; but one whose next bytes (its hello, likely) are already
        # waiting to be read goes last: it is not the idle one.
        waiting = sorted(
            (c for c in self.connections if c.tcp and not c.authed),
            key=lambda c: (_has_input(c.sock), c.number),
        )
        # Loopback peers cannot be told apart (every local user is 127.0.0.1):
        # for them only the oldest-stranger rule below applies.
        same = [] if _loopback(new.host) else [c for c in waiting if c.host == new.host]
        if len(same) >= self.per_address:
            self._evict(same[0], f"more than {self.per_address} connections from {new.host} without a hello")
            waiting.remove(same[0])
        known = new.host in self.known_hosts
        strangers = [c for c in waiting if c.host not in self.known_hosts]
        stranger_share = self.max_unauthenticated - self.max_unauthenticated // 4
        if not waiting and self.max_unauthenticated < 1:
            return "TCP connections without a hello are not accepted (max_unauthenticated = 0)"
        if strangers and not known and len(strangers) >= stranger_share:
            self._evict(strangers[0], "too many TCP connections without a hello from new addresses")
            return ""
        if len(waiting) >= self.max_unauthenticated:
            if strangers or (known and waiting):
                victim = strangers[0] if strangers else waiting[0]
                self._evict(victim, "too many TCP connections without a hello")
                return ""
            return f"too many TCP connections without a hello (the limit is {self.max_unauthenticated})"
        return ""

    def _evict(self, connection: Connection, why: str) -> None:
        """Close a connection still waiting for its hello, to make room for a newer one."""
        self.connections.discard(connection)
        self.evicted += 1
        self.refused += 1
        reason = f"connection refused: {why}"
        connection.error(connection.splitter.lineno, reason)
        if connection.task is not None:
            connection.task.cancel()
        said = quiet_refusal(self, why)
        if said is not None:  # else the same refusal was reported moments ago: counted only
            log.warning("%s: %s%s", connection.source, reason, said)
            task = asyncio.get_running_loop().create_task(
                self.report([Problem(connection.source, 0, reason + said)])
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def authenticated(self, host: str) -> None:
        """A client at ``host`` sent a valid token: its address gets the reserved share."""
        self.known_hosts[host] = None
        self.known_hosts.move_to_end(host)
        while len(self.known_hosts) > 4096:
            self.known_hosts.popitem(last=False)

    # -- channels -----------------------------------------------------------------------

    def bind_socket(self, session: str, channel: SocketChannel) -> None:
        self.socket_channels[session] = channel
        self.hub.register_channel(session, channel)

    def bind_mailbox(self, session: str) -> HookMailbox:
        mailbox = self.mailboxes.get(session)
        if mailbox is None:
            mailbox = self.mailboxes[session] = HookMailbox(session)
            while len(self.mailboxes) > MAX_MAILBOXES:
                self.mailboxes.popitem(last=False)
            self.socket_channels.pop(session, None)
            self.hub.register_channel(session, mailbox)
        else:
            self.mailboxes.move_to_end(session)
        return mailbox

    async def report(self, problems: list[Problem]) -> None:
        await self.hub.submit([], problems)

    async def settle(self, lane: Lane) -> None:
        """Wait (bounded) until the hub has processed what ``lane`` held so far."""
        try:
            async with asyncio.timeout(POLL_SETTLE_TIMEOUT):
                await self.ingest.flushed(lane)
                await self.hub.join()
        except TimeoutError:
            return
        # Automatic responses to those events run as tasks the hub just
        # spawned; let them reach their mailbox before it is drained.
        for _ in range(3):
            await asyncio.sleep(0)

    def _on_update(self, update: object) -> None:
        """Hub subscriber: push each detection to its session's connection."""
        if not isinstance(update, DetectionRaised):
            return
        detection = update.detection
        channel = self.socket_channels.get(detection.session)
        if channel is None:
            return
        fields = detection.to_dict()
        fields.pop("session", None)
        fields["event_ts"] = detection.ts
        channel.connection.push(control_message("detection", detection.session, **fields))


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _has_input(sock: socket.socket) -> bool:
    """Bytes are waiting to be read on ``sock`` (or it was closed)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _listening(path: Path) -> bool:
    """True if something accepts connections on the Unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True
