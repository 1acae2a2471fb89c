"""One agent connection of the socket server: event lines in, control messages out.

:class:`Connection` works on the raw non-blocking socket (``loop.sock_recv``
and its own small write buffer) rather than asyncio streams, for one reason:
when a client exits right after sending, a control message written to it
fails (EPIPE), and a stream transport would then drop everything the client
sent that was not read yet.  Here a failed write only stops the writing;
reading goes on to the end of the stream, so nothing complete is lost.

Lines are split with bounded memory (:class:`~monitor.framing.LineSplitter`),
decoded by a :class:`~monitor.formats.lines.LineDecoder` forced to the native
format, and submitted to the hub one read at a time, a few connections at a
time (back-pressure with bounded memory, see :meth:`Connection.run`).  Protocol
lines (``hello``, ``poll``, ``ping``) are answered here; see
:mod:`monitor.sources.sockets` for the protocol.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import os
import socket
import struct
import time
from typing import TYPE_CHECKING, Any, Sequence

import orjson

from monitor import __version__
from monitor.control import (DELIVERED, FAILED, Outcome, ProcessIdentity, ancestors, encode_line,
                             same_pid_namespace)
from monitor.events import KINDS, Event
from monitor.formats.base import Problem
from monitor.formats.lines import LineDecoder
from monitor.sources.fair import Usage
from monitor.framing import LineSplitter

if TYPE_CHECKING:
    from monitor.sources.sockets import SocketServer

log = logging.getLogger("loopwatch.sockets")

#: Lines the server answers itself instead of decoding them as events.
PROTOCOL_TYPES = frozenset({"hello", "poll", "ping"})
#: Bytes read per turn: bounds the decoding one connection does before others get a turn.
READ_CHUNK = 32 * 1024
#: How long a control message may wait for the agent to read its socket.
SEND_TIMEOUT = 2.0
#: Non-essential pushes (detections, error replies) are dropped, not queued,
#: once this much is waiting for a client that does not read.
PUSH_BUFFER_LIMIT = 1 << 20
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)  # EPIPE as an error, never SIGPIPE


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


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return None
    return (pid, uid) if pid else None


def peer_pid(sock: socket.socket) -> int | None:
    """The connecting process's pid (Linux SO_PEERCRED), for naming the source."""
    credentials = peer_credentials(sock)
    return credentials[0] if credentials else None


class PeerPids:
    """What the kernel says about a Unix-socket peer, and the pids it may report.

    ``judge`` says whether a reported pid may name the agent's process (the
    peer, an ancestor or a child, in our pid namespace); ``confirmation`` is
    what the hub needs to treat it as confirmed by the agent (what
    ``auto_kill`` requires): the peer's credentials were read while it ran,
    and it runs as our user.
    """

    def __init__(self, pid: int | None, uid: int | None):
        self.pid = pid
        self.uid = uid
        self.family: frozenset[int] = frozenset()
        self.namespace_ok: bool | None = None
        if pid:
            self.namespace_ok = same_pid_namespace(pid)
            if self.namespace_ok:
                self.family = frozenset([pid, *ancestors(pid)])
        self._verdicts: dict[int, str | None] = {}
        self._confirmed: set[tuple[str, int]] = set()

    def judge(self, pid: int) -> str | None:
        """None if ``pid`` is trusted, else why not (remembered for 256 pids)."""
        verdict = self._verdicts.get(pid, "")
        if verdict == "":
            verdict = self._judge(pid)
            if len(self._verdicts) < 256:
                self._verdicts[pid] = verdict
        return verdict

    def _judge(self, pid: int) -> str | None:
        if self.namespace_ok is None:
            return None  # the peer is unknown or gone: the kill-time checks still apply
        if not self.namespace_ok:
            return f"pid {pid} comes from a process in another pid namespace (a container?)"
        if pid in self.family or self.pid in ancestors(pid):
            return None
        return (f"pid {pid} is not the connecting process (pid {self.pid}), "
                f"one of its ancestors or one of its children")

    def confirmation(self, session: str, pid: int, what: str) -> tuple[ProcessIdentity, str] | None:
        """(identity, how) the first time a judged pid of ``session`` counts as
        confirmed by the agent; None when it does not (or was already sent)."""
        if not self.namespace_ok or self.uid not in (os.getuid(), 0):
            return None  # the peer left before we could look, or is not our user
        if (session, pid) in self._confirmed or len(self._confirmed) >= 256:
            return None
        identity = ProcessIdentity.capture(pid)
        if identity is None:
            return None
        self._confirmed.add((session, pid))
        return identity, f"socket peer credentials (the connecting {what} is pid {self.pid}, uid {self.uid})"


class Connection:
    """One client connection: reads events, writes control messages."""

    def __init__(self, server: SocketServer, sock: socket.socket, number: int, tcp: bool):
        self.server = server
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.number = number
        self.tcp = tcp
        self.authed = not tcp  # Unix peers passed the 0600 socket's permission check
        self.hook = False
        self.closed = False
        self.sessions: set[str] = set()
        self.pushes_dropped = 0
        self.peer_pid: int | None = None
        peer_uid: int | None = None
        if tcp:
            try:
                host, port = sock.getpeername()[:2]
            except OSError:
                host, port = "?", 0
            self.source = f"socket:{host}:{port}"
        else:
            self.peer_pid, peer_uid = peer_credentials(sock) or (None, None)
            tag = f"pid{self.peer_pid}" if self.peer_pid else "unix"
            self.source = f"socket:{tag}#{number}"
        # Who is connecting, read now while the peer surely runs (a hook may
        # exit before its lines are processed): used to vet reported pids.
        self.peer = PeerPids(self.peer_pid, peer_uid)
        self.splitter = LineSplitter(server.max_line_bytes)
        self.decoder = self._decoder(self.source.removeprefix("socket:"))
        self._out = bytearray()
        self._writing = False  # a writer callback is registered
        self._write_error: str | None = None
        self._drained: list[asyncio.Future] = []
        self._slot = False  # holding one of the server's ingest slots
        # Before its hello a TCP client gets a deadline counted from now (no
        # read extends it) and a few bytes, however slowly they trickle in.
        self.hello_deadline = self.loop.time() + min(server.hello_timeout, server.idle_timeout or math.inf)
        self.preauth_read = 0
        self.usage = Usage()  # bytes read lately: the lightest reader gets the next slot

    def _decoder(self, default_session: str) -> LineDecoder:
        return LineDecoder(self.source, fmt="native", session=default_session,
                           max_line_bytes=self.server.max_line_bytes)

    # -- writing ------------------------------------------------------------------------

    def _write(self, data: bytes) -> bool:
        """Send now what the socket takes, buffer the rest; False if the write side is gone."""
        if self.closed or self._write_error is not None:
            return False
        if not self._out:
            try:
                sent = self.sock.send(data, _SEND_FLAGS)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._write_failed(exc)
                return False
            data = data[sent:]
            if not data:
                return True
        self._out += data
        if not self._writing:
            self.loop.add_writer(self.sock.fileno(), self._on_writable)
            self._writing = True
        return True

    def _on_writable(self) -> None:
        try:
            sent = self.sock.send(self._out, _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._write_failed(exc)
            return
        del self._out[:sent]
        if not self._out:
            self._stop_writing()

    def _write_failed(self, exc: OSError) -> None:
        # The client stopped reading for good (it exited or shut down): keep
        # reading what it sent, just stop writing to it.
        self._write_error = exc.strerror or str(exc)
        self._out.clear()
        self._stop_writing()

    def _stop_writing(self) -> None:
        if self._writing:
            self.loop.remove_writer(self.sock.fileno())
            self._writing = False
        for future in self._drained:
            if not future.done():
                future.set_result(None)
        self._drained.clear()

    async def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until everything written has left our buffer."""
        if not self._out:
            return self._write_error is None
        future = self.loop.create_future()
        self._drained.append(future)
        try:
            async with asyncio.timeout(timeout):
                await future
        except TimeoutError:
            return False
        return self._write_error is None and not self.closed

    def push(self, message: dict) -> bool:
        """Queue a line without waiting; dropped if the client is not reading."""
        if len(self._out) > PUSH_BUFFER_LIMIT:
            self.pushes_dropped += 1
            return False
        return self._write(encode_line(message))

    async def send(self, message: dict) -> Outcome:
        """Write a control message and wait (bounded) until it left our buffer."""
        if self.closed:
            return Outcome(FAILED, "the agent's socket connection is closed")
        if not self._write(encode_line(message)):
            return Outcome(FAILED, f"the agent's socket connection is closed for writing ({self._write_error})")
        if not await self.drain(SEND_TIMEOUT):
            if self._write_error is not None or self.closed:
                return Outcome(FAILED, f"the agent's socket connection broke ({self._write_error or 'closed'})")
            return Outcome(FAILED, f"the agent has not read its socket for {SEND_TIMEOUT:g}s")
        return Outcome(DELIVERED, f"sent on the agent's socket ({self.source})")

    def error(self, line: int, reason: str) -> None:
        self.push({"type": "error", "line": line, "reason": reason})

    async def close(self) -> None:
        """Flush the last replies (a refusal, errors) briefly, then close the socket."""
        if self.closed:
            return
        try:
            await self.drain(1.0)
        finally:
            self.closed = True
            self._stop_writing()
            self.sock.close()

    # -- reading ------------------------------------------------------------------------

    async def run(self) -> None:
        """Read until the client hangs up, is idle too long, or must be refused.

        Each turn waits until the socket is readable, then takes one of the
        server's ingest slots for the read, the decoding and the hand-over
        to the hub.  However many clients are connected, only a few chunks
        are being decoded or waiting for the hub; the rest of a backlog stays
        in the clients' socket buffers, and one turn of the event loop never
        does more than a few chunks' worth of work.
        """
        server = self.server
        while not self.closed:
            if self.authed:
                timeout = server.idle_timeout
            else:
                timeout = self.hello_deadline - self.loop.time()
                if timeout <= 0 or self.preauth_read >= server.preauth_bytes:
                    await self.refuse(self.splitter.lineno, self._preauth_failure())
                    return
            try:
                await self._readable(timeout)
            except TimeoutError:
                if not self.authed:  # a refusal: logged like the others
                    await self.refuse(self.splitter.lineno, self._preauth_failure())
                else:  # an agent gone quiet is not bad input: tell it, and log it quietly
                    self.error(self.splitter.lineno, f"idle for {timeout:g}s; closing the connection")
                    log.info("%s: idle for %gs; closed", self.source, timeout)
                return
            await self._take_slot()
            try:
                size = READ_CHUNK if self.authed else server.preauth_bytes - self.preauth_read
                try:
                    chunk = self.sock.recv(size)
                except (BlockingIOError, InterruptedError):
                    continue  # woken without data after all
                except OSError:
                    chunk = b""
                if not self.authed:
                    self.preauth_read += len(chunk)
                self.usage.add(len(chunk))
                lines = self.splitter.feed(chunk) if chunk else self.splitter.flush()
                if lines and not await self.handle_lines(lines, at_eof=not chunk):
                    return
                if not chunk:
                    return
            finally:
                self._give_slot()

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
        self.loop.add_reader(fd, lambda: future.done() or future.set_result(None))
        try:
            async with asyncio.timeout(timeout or None):
                await future
        finally:
            self.loop.remove_reader(fd)

    async def _take_slot(self) -> None:
        await self.server.ingest.acquire(self.usage.now())
        self._slot = True

    def _give_slot(self) -> None:
        if self._slot:
            self._slot = False
            self.server.ingest.release()

    async def handle_lines(self, lines: Sequence[tuple[int, bytes | None, int]], at_eof: bool = False) -> bool:
        """Decode a batch of lines and submit it; False when the connection must close."""
        server = self.server
        events: list[Event] = []
        problems: list[Problem] = []
        now = time.time()
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
                # Protocol lines act on what came before them: submit that first,
                # and do not hold an ingest slot while a poll waits for the hub.
                await self.submit(events, problems)
                events, problems = [], []
                self._give_slot()
                keep_open = await self.protocol(kind, record, lineno)
                await self._take_slot()
                if not keep_open:
                    return False
                continue
            if record is None or not isinstance(record, dict):
                new, problem = self.decoder.feed(raw, lineno, now)  # says why; repairs bad UTF-8
            elif isinstance(kind, str) and kind not in KINDS:
                expected = ", ".join(sorted(KINDS | PROTOCOL_TYPES))
                new, problem = [], self.decoder.problem(
                    lineno, f"unknown type {kind!r} (expected one of: {expected})")
            else:
                new, problem = self.decoder.feed_record(record, lineno, now)
            if problem is not None:
                if at_eof and lineno == self.splitter.lineno and not new:
                    problem = Problem(problem.source, problem.line,
                                      f"connection closed in the middle of this line; {problem.reason}")
                self.error(lineno, problem.reason)
                problems.append(problem)
            events.extend(new)
        await self.submit(events, problems)
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

    async def submit(self, events: list[Event], problems: list[Problem]) -> None:
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
        await self.server.hub.submit(events, problems)

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
                    token.encode("utf-8", "replace"), self.server.token.encode()):
                await self.refuse(lineno, "missing or invalid token")
                return False
            self.authed = True
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
        await self.server.settle()
        for message in mailbox.drain():
            self._write(encode_line(message))  # never dropped: the hook is waiting for them
        self._write(encode_line({"type": "poll_done", "session": session}))

    async def refuse(self, lineno: int, why: str) -> None:
        reason = f"connection refused: {why}"
        self.error(lineno, reason)
        self.server.refused += 1
        said = quiet_refusal(self.server, why)
        if said is None:  # the same refusal was reported moments ago: counted only
            return
        log.warning("%s: %s%s", self.source, reason, said)
        await self.server.report([Problem(self.source, lineno, reason + said)])
