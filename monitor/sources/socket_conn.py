"""One agent connection of the socket server: event lines in, control messages out.

:class:`Connection` reads the raw non-blocking socket (``sock.recv``, waiting
for readability only when nothing is there), splits lines with bounded memory
(:class:`~monitor.framing.LineSplitter`), decodes them with a
:class:`~monitor.formats.lines.LineDecoder` forced to the native format, and
puts the events in its lane of the server's
:class:`~monitor.sources.fair.IngestMux`, which hands all connections' events
to the hub in fair, coalesced batches.  A connection whose lane is full stops
reading (back-pressure: the backlog waits in the socket, nothing is dropped).
Protocol lines (``hello``, ``poll``, ``ping``) are answered here; writing is
:class:`~monitor.sources.socket_out.Outbox`'s, vetting reported pids
:class:`~monitor.sources.socket_peer.PeerPids`'.  See
:mod:`monitor.sources.sockets` for the protocol.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from monitor import __version__
from monitor.control import Outcome, encode_line
from monitor.events import KINDS, Event
from monitor.formats.base import Problem
from monitor.formats.lines import LineDecoder
from monitor.framing import LineSplitter
from monitor.sources.socket_out import Outbox
from monitor.sources.socket_peer import PeerPids, peer_credentials

if TYPE_CHECKING:
    from collections import OrderedDict

    from monitor.control import HookMailbox
    from monitor.sources import LiveSink
    from monitor.sources.fair import IngestMux, Lane

log = logging.getLogger("loopwatch.sockets")

#: Lines the server answers itself instead of decoding them as events.
PROTOCOL_TYPES = frozenset({"hello", "poll", "ping"})
#: How long a poll's answer may take to leave our buffer before its messages
#: are kept for the hook's next call instead (a hook waits 0.5 s in all).
POLL_DRAIN_SECONDS = 0.25
#: Bytes read per turn: bounds the decoding one connection does before others get a turn.
READ_CHUNK = 16 * 1024

#: A refusal for the same reason (too many connections: clients retry with
#: back-off) is reported at most once per this many seconds, with a count.
REFUSAL_REPORT_SECONDS = 10.0


def quiet_refusal(server: Any, why: str) -> str | None:
    """None when a refusal like this one was reported within the last
    :data:`REFUSAL_REPORT_SECONDS`; else the note to add ("; N more since")."""
    key = why.split("(", 1)[0]
    notes = server.__dict__.setdefault("_refusals", {})
    last, hidden = notes.get(key, (-REFUSAL_REPORT_SECONDS, 0))
    now = time.monotonic()
    if now - last < REFUSAL_REPORT_SECONDS:
        notes[key] = (last, hidden + 1)
        return None
    notes[key] = (now, 0)
    return f" ({hidden:,} more like it since the last report)" if hidden else ""


class SocketChannel:
    """Reaches a session through the connection its agent is using."""

    name = "socket"

    def __init__(self, connection: Connection, session: str):
        self.connection = connection
        self.session = session

    @property
    def closed(self) -> bool:
        return self.connection.closed

    async def send(self, message: dict) -> Outcome:
        return await self.connection.send(message)


class ConnectionServer(Protocol):
    """What a :class:`Connection` uses of its :class:`~monitor.sources.sockets.SocketServer`
    (which passes itself): declared here so that this module need not import that one."""

    hub: LiveSink
    token: str
    max_line_bytes: int
    hello_timeout: float
    idle_timeout: float
    preauth_bytes: int
    mailboxes: OrderedDict[str, HookMailbox]
    ingest: IngestMux
    lines: int
    events: int
    refused: int

    def bind_socket(self, session: str, channel: SocketChannel) -> None: ...

    def bind_mailbox(self, session: str) -> HookMailbox: ...

    async def report(self, problems: list[Problem]) -> None: ...

    def authenticated(self, host: str) -> None: ...

    async def settle(self, lane: Lane) -> None: ...


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Connection:
    """One client connection: reads events, writes control messages."""

    def __init__(self, server: ConnectionServer, sock: socket.socket, number: int, tcp: bool):
        self.server = server
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.number = number
        self.tcp = tcp
        self.authed = not tcp  # Unix peers passed the 0600 socket's permission check
        self.hook = False
        self.sessions: set[str] = set()
        self.peer_pid: int | None = None
        peer_uid: int | None = None
        self.host = ""  # a TCP peer's address (its pre-hello share, and whether it authenticated before)
        self.task: asyncio.Task | None = None  # set by the server: how it is evicted
        if tcp:
            try:
                host, port = sock.getpeername()[:2]
            except OSError:
                host, port = "?", 0
            self.host = str(host)
            self.source = f"socket:{host}:{port}"
        else:
            self.peer_pid, peer_uid = peer_credentials(sock) or (None, None)
            tag = f"pid{self.peer_pid}" if self.peer_pid else "unix"
            self.source = f"socket:{tag}#{number}"
        # Who is connecting, read now while the peer surely runs (a hook may
        # exit before its lines are processed): used to vet reported pids.
        self.peer = PeerPids(self.peer_pid, peer_uid)
        self.out = Outbox(sock, self.source)
        self.splitter = LineSplitter(server.max_line_bytes)
        self.decoder = self._decoder(self.source.removeprefix("socket:"))
        self.lane = server.ingest.lane(self.source)
        # Before its hello a TCP client gets a deadline counted from now (no
        # read extends it) and a few bytes, however slowly they trickle in.
        self.hello_deadline = self.loop.time() + min(server.hello_timeout, server.idle_timeout or math.inf)
        self.preauth_read = 0

    def _decoder(self, default_session: str) -> LineDecoder:
        return LineDecoder(
            self.source, fmt="native", session=default_session, max_line_bytes=self.server.max_line_bytes
        )

    # -- writing (see Outbox) ---------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.out.closed

    @property
    def pushes_dropped(self) -> int:
        return self.out.pushes_dropped

    def push(self, message: dict) -> bool:
        return self.out.push(message)

    async def send(self, message: dict) -> Outcome:
        return await self.out.send(message)

    def error(self, line: int, reason: str) -> None:
        self.out.push({"type": "error", "line": line, "reason": reason})

    async def close(self) -> None:
        await self.out.close()

    # -- reading ------------------------------------------------------------------------

    async def run(self) -> None:
        """Read until the client hangs up, is idle too long, or must be refused.

        Each turn first waits for room in the connection's lane (so a backlog
        stays in the client's socket, not in our memory) and for a turn to read
        (a budget per round, lightest connection first, so the loop never
        decodes every backlog at once), then reads one chunk, decodes it and
        puts the events in the lane; the server's ingest pump hands them to
        the hub, fairly shared with the other connections.
        """
        server = self.server
        mux = server.ingest
        while not self.closed:
            if mux.full(self.lane):
                await mux.room(self.lane)
            if self.authed:
                timeout = server.idle_timeout
            else:
                timeout = self.hello_deadline - self.loop.time()
                if timeout <= 0 or self.preauth_read >= server.preauth_bytes:
                    await self.refuse(self.splitter.lineno, self._preauth_failure())
                    return
            size = READ_CHUNK if self.authed else server.preauth_bytes - self.preauth_read
            if self.authed:  # before its hello: read at once (a few bytes), so a waiting
                await mux.turn(self.lane)  # agent's hello is taken before newcomers need its slot
            try:
                chunk = self._recv(size)
                if chunk is None:  # nothing there yet: wait, then take a turn to read
                    await self._readable(timeout)
                    continue
            except TimeoutError:
                if not self.authed:  # a refusal: logged like the others
                    await self.refuse(self.splitter.lineno, self._preauth_failure())
                else:  # an agent gone quiet is not bad input: tell it, and log it quietly
                    self.error(self.splitter.lineno, f"idle for {timeout:g}s; closing the connection")
                    log.info("%s: idle for %gs; closed", self.source, timeout)
                return
            mux.read(len(chunk))
            if not self.authed:
                self.preauth_read += len(chunk)
            lines = self.splitter.feed(chunk) if chunk else self.splitter.flush()
            if lines and not await self.handle_lines(lines, at_eof=not chunk):
                return
            if not chunk:
                return

    def _recv(self, size: int) -> bytes | None:
        """Up to ``size`` bytes (b"" at the end of the stream), or None if none are there yet.
        Reading first and waiting only when empty spares a poller registration per
        chunk when, under load, data is nearly always waiting."""
        try:
            return self.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""

    def _preauth_failure(self) -> str:
        server = self.server
        if self.preauth_read >= server.preauth_bytes:
            return f"no hello with a valid token in the first {server.preauth_bytes} bytes"
        limit = min(server.hello_timeout, server.idle_timeout or math.inf)
        return f"no hello with a valid token within {limit:g}s of connecting"

    async def _readable(self, timeout: float) -> None:
        """Wait until the socket has data or EOF; TimeoutError after ``timeout`` (0: never)."""
        future = self.loop.create_future()
        fd = self.sock.fileno()
        self.loop.add_reader(fd, _resolve, future)
        try:
            async with asyncio.timeout(timeout or None):
                await future
        finally:
            self.loop.remove_reader(fd)

    async def handle_lines(
        self, lines: Sequence[tuple[int, bytes | None, int]], at_eof: bool = False
    ) -> bool:
        """Decode a batch of lines and queue it for the hub; False when the connection must close."""
        server = self.server
        events: list[Event] = []
        problems: list[Problem] = []
        now = time.time()
        problem: Problem | None
        for lineno, raw, size in lines:
            server.lines += 1
            if raw is None:
                problem = self.decoder.oversized(lineno, size)
                self.error(lineno, problem.reason)
                problems.append(problem)
                continue
            if not raw.strip():
                continue
            try:
                record: Any = orjson.loads(raw)
            except orjson.JSONDecodeError:
                record = None
            kind = record.get("type") if isinstance(record, dict) else None
            if kind is not None and kind.__class__ is not str:
                kind = None  # {"type": []}: the decoder reports it; never hash or compare it here
            if not self.authed and kind != "hello":
                await self.refuse(lineno, "the first line must be a hello with a valid token")
                return False
            if kind in PROTOCOL_TYPES:
                # Protocol lines act on what came before them: queue that first.
                self.submit(events, problems)
                events, problems = [], []
                if not await self.protocol(kind, record, lineno):
                    return False
                continue
            if record is None or not isinstance(record, dict):
                new, problem = self.decoder.feed(raw, lineno, now)  # says why; repairs bad UTF-8
            elif isinstance(kind, str) and kind not in KINDS:
                expected = ", ".join(sorted(KINDS | PROTOCOL_TYPES))
                new, problem = (
                    [],
                    self.decoder.problem(lineno, f"unknown type {kind!r} (expected one of: {expected})"),
                )
            else:
                new, problem = self.decoder.feed_record(record, lineno, now)
            if problem is not None:
                if at_eof and lineno == self.splitter.lineno and not new:
                    problem = Problem(
                        problem.source,
                        problem.line,
                        f"connection closed in the middle of this line; {problem.reason}",
                    )
                self.error(lineno, problem.reason)
                problems.append(problem)
            events.extend(new)
        self.submit(events, problems)
        return True

    def vet_pid(self, event: Event) -> Problem | None:
        """Keep a reported pid only if it can name the agent's process on this machine.

        The hub signals that pid on a kill, so it must be the connecting
        process, one of its ancestors (a wrapper) or one of its children (an
        orchestrator's agents).  A TCP client's pid names a process on another
        machine; one from another pid namespace (a container) names a
        different process here.  Those move to ``meta`` and are never used.
        A pid the peer's credentials prove is confirmed to the hub.
        """
        pid = event.pid
        if pid is None:
            return None  # nothing claimed (the caller only asks about a pid)
        if self.tcp:
            event.meta["remote_pid"], event.pid = pid, None
            return None
        verdict = self.peer.judge(pid)
        if verdict is None:
            how = self.peer.confirmation(event.session, pid, "hook" if self.hook else "process")
            if how is not None:
                self.server.hub.confirm_pid(event.session, *how)
            return None
        event.meta["claimed_pid"], event.pid = pid, None
        return Problem(self.source, event.line, f"{verdict}; it will not be used to stop this session")

    def submit(self, events: list[Event], problems: list[Problem]) -> None:
        """Bind the sessions, vet reported pids, and queue the lot in this connection's lane."""
        if not events and not problems:
            return
        for event in events:
            if event.session not in self.sessions:
                self.bind(event.session)
            if event.pid is not None:
                problem = self.vet_pid(event)
                if problem is not None:
                    self.error(event.line or 0, problem.reason)
                    problems.append(problem)
        self.server.events += len(events)
        self.server.ingest.put(self.lane, events, problems)

    def bind(self, session: str) -> None:
        """This connection speaks for ``session``: make it the session's channel."""
        self.sessions.add(session)
        if self.hook or session in self.server.mailboxes:
            self.server.bind_mailbox(session)
        else:
            self.server.bind_socket(session, SocketChannel(self, session))

    # -- protocol lines -----------------------------------------------------------------------

    async def protocol(self, kind: str, record: dict, lineno: int) -> bool:
        if kind == "hello":
            return await self.hello(record, lineno)
        if kind == "poll":
            await self.poll(record, lineno)
        return True  # ping: reading it already reset the idle timer

    async def hello(self, record: dict, lineno: int) -> bool:
        if self.tcp and not self.authed:
            token = record.get("token")
            if not isinstance(token, str) or not hmac.compare_digest(
                token.encode("utf-8", "replace"), self.server.token.encode()
            ):
                await self.refuse(lineno, "missing or invalid token")
                return False
            self.authed = True
            self.server.authenticated(self.host)
        if record.get("origin") == "hook":
            self.hook = True
        session = record.get("session")
        if isinstance(session, str) and session and self.decoder.events == 0:
            self.decoder = self._decoder(session)
        sessions = record.get("sessions") or []
        if isinstance(sessions, list):
            for name in sessions[:1000]:
                if isinstance(name, str) and name:
                    self.bind(name)
        self.push({"type": "welcome", "server": "loopwatch", "version": __version__})
        return True

    async def poll(self, record: dict, lineno: int) -> None:
        session = record.get("session")
        if not isinstance(session, str) or not session:
            self.error(lineno, f"poll.session: expected a non-empty string, got {session!r}")
            return
        self.hook = True
        self.sessions.add(session)
        mailbox = self.server.bind_mailbox(session)
        # Let the hub finish this hook's events first, so an automatic nudge
        # they trigger is in the mailbox when it is drained.
        await self.server.settle(self.lane)
        # A message leaves the mailbox only once it left for the hook: one the
        # socket could not take waits for the next hook call, never lost.
        written = []
        call_id = record.get("call_id")
        for message in mailbox.pending(call_id if isinstance(call_id, str) else None):
            if not self.out.write(encode_line(message)):  # never dropped: the hook is waiting for them
                break
            written.append(message)
        self.out.write(encode_line({"type": "poll_done", "session": session}))
        if written and await self.out.drain(POLL_DRAIN_SECONDS):
            mailbox.taken(written)

    async def refuse(self, lineno: int, why: str) -> None:
        reason = f"connection refused: {why}"
        self.error(lineno, reason)
        self.server.refused += 1
        said = quiet_refusal(self.server, why)
        if said is None:  # the same refusal was reported moments ago: counted only
            return
        log.warning("%s: %s%s", self.source, reason, said)
        await self.server.report([Problem(self.source, lineno, reason + said)])
