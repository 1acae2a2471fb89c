"""The outgoing side of an agent connection: control messages, replies and pushes.

:class:`Outbox` writes on the raw non-blocking socket with its own small
buffer rather than an asyncio stream, for one reason: when a client exits
right after sending, a write to it fails (EPIPE), and a stream transport
would then drop everything the client sent that was not read yet.  Here a
failed write only stops the writing; the connection goes on reading to the
end of the stream, so nothing complete is lost.
"""

from __future__ import annotations

import asyncio
import socket

from monitor.control import DELIVERED, FAILED, Outcome, encode_line

#: How long a control message may wait for the agent to read its socket.
SEND_TIMEOUT = 2.0
#: Non-essential pushes (detections, error replies) are dropped, not queued,
#: once this much is waiting for a client that does not read.
PUSH_BUFFER_LIMIT = 1 << 20
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)  # EPIPE as an error, never SIGPIPE


class Outbox:
    """Buffered writes to one client socket, and how they went."""

    def __init__(self, sock: socket.socket, source: str):
        self.sock = sock
        self.source = source
        self.loop = asyncio.get_running_loop()
        self.closed = False
        #: Pushes dropped because the client did not read (each one counted).
        self.pushes_dropped = 0
        self.error: str | None = None  # why writing stopped
        self._out = bytearray()
        self._writing = False  # a writer callback is registered
        self._drained: list[asyncio.Future] = []

    def write(self, data: bytes) -> bool:
        """Send now what the socket takes, buffer the rest; False if the write side is gone."""
        if self.closed or self.error is not None:
            return False
        if not self._out:
            try:
                sent = self.sock.send(data, _SEND_FLAGS)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._failed(exc)
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
            self._failed(exc)
            return
        del self._out[:sent]
        if not self._out:
            self._stop_writing()

    def _failed(self, exc: OSError) -> None:
        # The client stopped reading for good (it exited or shut down): the
        # connection keeps reading what it sent, we just stop writing to it.
        self.error = exc.strerror or str(exc)
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
            return self.error is None
        future = self.loop.create_future()
        self._drained.append(future)
        try:
            async with asyncio.timeout(timeout):
                await future
        except TimeoutError:
            return False
        return self.error is None and not self.closed

    def push(self, message: dict) -> bool:
        """Queue a line without waiting; dropped (and counted) if the client is not reading."""
        if len(self._out) > PUSH_BUFFER_LIMIT:
            self.pushes_dropped += 1
            return False
        return self.write(encode_line(message))

    async def send(self, message: dict) -> Outcome:
        """Write a control message and wait (bounded) until it left our buffer."""
        if self.closed:
            return Outcome(FAILED, "the agent's socket connection is closed")
        if not self.write(encode_line(message)):
            return Outcome(FAILED, f"the agent's socket connection is closed for writing ({self.error})")
        if not await self.drain(SEND_TIMEOUT):
            if self.error is not None or self.closed:
                return Outcome(FAILED, f"the agent's socket connection broke ({self.error or 'closed'})")
            return Outcome(FAILED, f"the agent has not read its socket for {SEND_TIMEOUT:g}s")
        return Outcome(DELIVERED, f"sent on the agent's socket ({self.source})")

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
