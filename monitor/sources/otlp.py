"""The OTLP/HTTP source: ``watch --otlp [HOST:]PORT`` (default 127.0.0.1:4318).

:class:`OtlpReceiver` is a small asyncio HTTP/1.1 server for the two OTLP
paths loopwatch reads, ``POST /v1/logs`` and ``POST /v1/traces``, in both
encodings (``application/x-protobuf`` and ``application/json``, the latter
with hex trace and span ids as OTLP/JSON specifies), optionally gzip'ed.
The bodies are the official ``opentelemetry-proto`` messages; the records in
them become events through :class:`~monitor.formats.otlp.OtlpAdapter`.

Responses follow the OTLP/HTTP specification:

* 200 with an ``Export…ServiceResponse``; records that were agent events but
  could not be read are counted in its ``partial_success`` (with a message);
  records of other services are ignored, not rejected;
* 400 for a body that does not parse (a ``google.rpc.Status`` saying why),
  404 / 405 / 411 / 413 / 415 for a wrong path, method, a missing length, a
  body over the limit, another content type; 401 without the token;
* 503 with ``Retry-After`` while too many accepted events wait for the hub
  or the store is behind (as a file source pauses), 429 with it while too many requests are in flight, so exporters back off
  and retry instead of losing data.

A request is answered once decoded (an exporter's timeout is 10 s, and a big
batch answered late is resent); its events wait in the receiver's lane of the
fair ingest pump (:mod:`monitor.sources.fair`, shared with the socket
connections and the files when the monitor runs them) and reach the hub in
slices, behind what quieter sources sent, never as one queue-filling block.

At stop, the events accepted (answered 200) but not yet handed to the hub
are written to a pending file in the state directory and read first by the
next start (:mod:`monitor.sources.otlp_pending`) when the receiver is given
``pending``: stopping never waits for a backlog (SIGTERM within 2 s).

Every request needs the token (``Authorization: Bearer <token>``), checked on
the headers before the body is read; on a loopback address the operator may
opt out (``[sources] otlp_loopback_needs_token = false``).  OTLP proves no
identity: its records never drive an automatic action (see
:mod:`monitor.hub.actions`).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from monitor.formats.base import Problem
from monitor.formats.otlp import OtlpAdapter
from monitor.sources import LiveSink
from monitor.sources.fair import IngestMux
from monitor.sources.otlp_http import (
    BODY_SECONDS,
    HEAD_SECONDS,
    IDLE_SECONDS,
    MAX_CONNECTIONS,
    MAX_PER_PEER,
    REASONS,
    BodyBudget,
    Gate,
    HttpError,
    Reply,
    Request,
    Slot,
    read_body,
    read_head,
)

log = logging.getLogger("loopwatch.otlp")

DEFAULT_ADDRESS = ("127.0.0.1", 4318)
#: Largest request body accepted (after decompression too).
MAX_BODY = 16 * 1024 * 1024
#: Requests decoded and submitted at the same time before 503 is answered.
MAX_IN_FLIGHT = 8
#: Events accepted (answered 200) but not yet handed to the hub before new
#: requests are answered 503: a request is answered once decoded, and its
#: events reach the hub behind it (an exporter's timeout is 10 s).
MAX_BACKLOG_EVENTS = 50_000
RETRY_AFTER_SECONDS = 2


class OtlpError(RuntimeError):
    """The receiver cannot start (bad address, port in use, a token missing)."""


def parse_address(value: str | None) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1); empty: 127.0.0.1:4318."""
    if not value:
        return DEFAULT_ADDRESS
    text = value.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or DEFAULT_ADDRESS[0]
    try:
        port = int(port_text)
    except ValueError:
        raise OtlpError(f"--otlp {value!r}: expected [HOST:]PORT with a numeric port") from None
    if not 0 <= port <= 65535:
        raise OtlpError(f"--otlp {value!r}: port must be 0..65535")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_problem(host: str, port: int | str, token: str | None, loopback_needs_token: bool = True) -> str:
    """Why ``--otlp HOST:PORT`` may not listen without a token ("" when it may).

    A loopback port is no boundary between local users: OTLP records name
    any session, so token-less OTLP is only for an operator who opts out
    (``[sources] otlp_loopback_needs_token = false``)."""
    if token:
        return ""
    how = "(--token-file PATH or $LOOPWATCH_TOKEN), sent as 'Authorization: Bearer <token>'"
    if not is_loopback(host):
        return f"--otlp {host}:{port} is not a loopback address: it needs a token {how}"
    if loopback_needs_token:
        return (
            f"--otlp {host}:{port} needs a token {how}: any local user can reach a loopback port; "
            "to accept token-less OTLP on loopback set [sources] otlp_loopback_needs_token = false"
        )
    return ""


def _messages(signal: str) -> tuple[type, type]:
    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

        return logs_service_pb2.ExportLogsServiceRequest, logs_service_pb2.ExportLogsServiceResponse
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    return trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse


_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


def _hex_ids_to_base64(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping wants base64."""
    import base64

    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _ID_KEYS and isinstance(item, str):
                try:
                    item = base64.b64encode(bytes.fromhex(item)).decode()
                except ValueError:
                    pass
            else:
                item = _hex_ids_to_base64(item)
            out[key] = item
        return out
    if isinstance(value, list):
        return [_hex_ids_to_base64(item) for item in value]
    return value


def parse_body(signal: str, body: bytes | bytearray, json_encoded: bool) -> Any:
    """The export request in ``body``; raises ValueError saying why it is not one."""
    request_type, _ = _messages(signal)
    request = request_type()
    if json_encoded:
        from google.protobuf import json_format

        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"not JSON: {exc}") from None
        except RecursionError:
            raise ValueError("not an OTLP request: JSON nested too deep") from None
        try:
            json_format.ParseDict(_hex_ids_to_base64(data), request, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise ValueError(f"not an OTLP {signal} request: {exc}") from None
        except RecursionError:
            raise ValueError(f"not an OTLP {signal} request: nested too deep") from None
    else:
        from google.protobuf.message import DecodeError

        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise ValueError(f"not an OTLP {signal} protobuf message: {exc}") from None
    return request


def _gunzip(body: bytes | bytearray, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"bad gzip body: {exc}") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise OverflowError(f"the decompressed body is over {limit:,} bytes")
    return data


class OtlpReceiver:
    """OTLP/HTTP in: ``/v1/logs`` and ``/v1/traces`` → the hub."""

    def __init__(
        self,
        hub: LiveSink,
        address: str | tuple[str, int] | None = None,
        *,
        token: str | None = None,
        max_body: int = MAX_BODY,
        max_in_flight: int = MAX_IN_FLIGHT,
        loopback_needs_token: bool = True,
        max_connections: int = MAX_CONNECTIONS,
        max_per_peer: int = MAX_PER_PEER,
        max_backlog: int = MAX_BACKLOG_EVENTS,
        ingest: IngestMux | None = None,
        pending: Path | None = None,
    ):
        self.hub = hub
        self.host, self.port = address if isinstance(address, tuple) else parse_address(address)
        self.token = token
        self.max_body = max_body
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.server: asyncio.base_events.Server | None = None
        self.adapter = OtlpAdapter()
        self.requests = 0
        self.accepted = 0  # records that became events
        self.rejected = 0  # agent records that could not be read
        self.refused = 0  # requests answered 4xx
        self.throttled = 0  # requests answered 503
        self.gate = Gate(max_connections, max_per_peer)
        self.max_backlog = max_backlog
        #: The fair pump to the hub (shared with the other sources when given: its owner closes it).
        self.ingest = ingest if ingest is not None else IngestMux(hub)
        self._owns_ingest = ingest is None
        self.lane = self.ingest.lane("otlp", apart=True)
        self.budget = BodyBudget()
        #: Where accepted events left at stop wait for the next start (None: processed at stop).
        self.pending = pending
        self.resumed = 0  # events read from pending files at start
        problem = token_problem(self.host, self.port, token, loopback_needs_token)
        if problem:
            raise OtlpError(problem)
        self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopwatch-otlp")

    @property
    def address(self) -> tuple[str, int]:
        if self.server is not None and self.server.sockets:
            name = self.server.sockets[0].getsockname()
            return name[0], name[1]
        return self.host, self.port

    @property
    def endpoint(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    async def start(self) -> None:
        _messages("logs")  # fail now, not at the first request, if the package is missing
        self.ingest.start()
        if self.pending is not None:
            await self._resume(self.pending)
        try:
            self.server = await asyncio.start_server(self._connection, self.host, self.port, limit=64 * 1024)
        except OSError as exc:
            raise OtlpError(f"--otlp {self.host}:{self.port}: cannot listen: {exc.strerror or exc}") from None

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            tasks = [slot.task for slot in self.gate.slots if slot.task is not None]
            self.gate.close_all()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.server.wait_closed()
            self.server = None
        if self.pending is not None:
            await self._park(self.pending)
        if self._owns_ingest:
            await self.ingest.close()  # answered 200: the exporter will not send them again
        self._decoder.shutdown(wait=False, cancel_futures=True)

    async def _resume(self, directory: Path) -> None:
        """What earlier runs accepted and left (pending files), before any new request."""
        from monitor.sources import otlp_pending

        events, problems, files = await asyncio.to_thread(otlp_pending.take, directory)
        if files:
            self.resumed = len(events)
            log.info("OTLP: %d events accepted by an earlier run read from %s", len(events), directory)
            self.ingest.put(self.lane, events, problems)

    async def _park(self, directory: Path) -> None:
        """Stopping: what was accepted and not handed to the hub goes to a pending
        file (processing it could take seconds under a flood); else it is processed."""
        from monitor.sources import otlp_pending

        events = self.ingest.withdraw(self.lane)
        if not events:
            return
        path, problem = await asyncio.to_thread(otlp_pending.park, directory, events)
        if path is None:
            log.warning("OTLP: %s; processing the %d accepted events now", problem, len(events))
            self.ingest.put(self.lane, events, [])
            return
        log.warning("OTLP: %d accepted events left for the next start in %s", len(events), path)

    async def __aenter__(self) -> OtlpReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- HTTP ------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        slot = Slot(str(peer[0]) if isinstance(peer, tuple) else "local", asyncio.current_task(), writer)
        try:
            if not self.gate.admit(slot):
                self.throttled += 1
                busy = "too many connections; retry later"
                await self._send(writer, Reply(503, busy.encode(), headers={"Retry-After": "2"}), close=True)
                return
            while await self._one_request(reader, writer, slot):
                pass
        except HttpError as exc:
            self.refused += 1
            try:
                await self._send(writer, exc.reply, close=True)
            except (ConnectionError, RuntimeError):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        except (TimeoutError, asyncio.CancelledError):
            pass  # too slow, evicted to make room, or the receiver stops
        finally:
            self.gate.leave(slot)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, asyncio.CancelledError):
                pass

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: Slot
    ) -> bool:
        """Read, check and answer one request; False when the connection is done.

        The head is checked before a byte of the body is read: a stranger
        without the token costs one short head, never a body."""
        async with asyncio.timeout(IDLE_SECONDS if slot.authorized else HEAD_SECONDS):
            request = await read_head(reader)
        if request is None:
            return False
        self.requests += 1
        refusal = self._check_head(request)
        if refusal is not None:
            self.refused += 1
            await self._send(writer, refusal, close=True)  # its body is never read
            return False
        slot.authorized = True
        try:
            async with asyncio.timeout(BODY_SECONDS):
                body = await read_body(reader, request, self.max_body, self.budget)
        except TimeoutError:
            raise HttpError(
                Reply(408, f"the body did not arrive within {BODY_SECONDS:g}s".encode())
            ) from None
        try:
            reply = await self._answer(request, body, slot.peer)
        finally:
            self.budget.give(len(body))
            del body
        if 400 <= reply.status < 500:
            self.refused += 1
        await self._send(writer, reply, close=request.close)
        return not request.close

    def _check_head(self, request: Request) -> Reply | None:
        """The answer for a request refused on its head (path, method, token, type)."""
        path = request.path
        if path not in ("/v1/logs", "/v1/traces"):
            return Reply(404, f"{path}: loopwatch receives /v1/logs and /v1/traces".encode())
        if request.method != "POST":
            return Reply(405, b"POST only", headers={"Allow": "POST"})
        if self.token is not None and not self._authorized(request.headers):
            return Reply(
                401,
                b"missing or invalid token (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in ("application/x-protobuf", "application/json"):
            return Reply(415, b"expected application/x-protobuf or application/json")
        return None

    async def _send(self, writer: asyncio.StreamWriter, reply: Reply, *, close: bool = False) -> None:
        head = [
            f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Error')}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}",
        ]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        if close:
            head.append("Connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)
        await writer.drain()

    # -- OTLP --------------------------------------------------------------------------------

    async def _answer(self, request: Request, body: bytes | bytearray, peer: str) -> Reply:
        signal = "logs" if request.path == "/v1/logs" else "traces"
        headers = request.headers
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        json_encoded = content_type == "application/json"
        if (
            self.in_flight >= self.max_in_flight
            or self.backlog_events >= self.max_backlog
            or self.hub.saturated()
        ):
            # Both are retryable in OTLP/HTTP: too many requests at once is the
            # sender's doing (429), a backlog behind a full hub or a store that
            # is behind is ours (503): the exporter keeps the batch and resends
            # it, so the store's queue and spill file stay for what cannot wait.
            self.throttled += 1
            code = 429 if self.in_flight >= self.max_in_flight else 503
            return self._status(
                code,
                "loopwatch is busy; retry later",
                json_encoded,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        self.in_flight += 1
        try:
            return await self._export(signal, headers, body, json_encoded, peer)
        finally:
            self.in_flight -= 1

    def _authorized(self, headers: dict[str, str]) -> bool:
        given = headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(value.strip().encode(), (self.token or "").encode())

    async def _export(
        self, signal: str, headers: dict[str, str], body: bytes | bytearray, json_encoded: bool, peer: str
    ) -> Reply:
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding not in ("gzip", "identity", ""):
            return self._status(
                415, f"unsupported Content-Encoding {encoding!r} (gzip or none)", json_encoded
            )
        # Decoding a large export takes a while (a 1 MB OTLP/JSON body ~0.5 s): off
        # the loop, one at a time (the adapter remembers the sessions it announced).
        loop = asyncio.get_running_loop()
        try:
            events, rejected, problems = await loop.run_in_executor(
                self._decoder, self._decode, signal, encoding, body, json_encoded, peer
            )
        except OverflowError as exc:
            return self._status(413, str(exc), json_encoded)
        except ValueError as exc:
            await self.hub.submit([], [Problem(f"otlp:{peer}", None, str(exc))])
            return self._status(400, str(exc), json_encoded)
        except Exception as exc:  # a bug costs this request an answer, never the connection silently
            log.exception("OTLP %s request from %s could not be read", signal, peer)
            return self._status(
                500, f"loopwatch could not read this request: {type(exc).__name__}", json_encoded
            )
        self.accepted += len(events)
        self.rejected += rejected
        if events or problems:
            await self._hand_over(events, problems)
        _, response_type = _messages(signal)
        response = response_type()
        if rejected:
            if signal == "logs":
                response.partial_success.rejected_log_records = rejected
            else:
                response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = "; ".join(p.reason for p in problems[:5])
        return self._encode(200, response, json_encoded)

    async def _hand_over(self, events: list[Any], problems: list[Problem]) -> None:
        """Queue a decoded request's events in the receiver's lane: the request is
        answered now, and the pump hands them to the hub in fair slices."""
        self.ingest.put(self.lane, events, problems)

    @property
    def backlog_events(self) -> int:
        """Events accepted (answered 200) and not yet handed to the hub."""
        lane = self.lane
        return len(lane.events) + (lane.taken if lane.in_flight else 0)

    async def flushed(self) -> None:
        """Wait until every accepted request's events were handed to the hub."""
        await self.ingest.flushed(self.lane)

    def _decode(
        self, signal: str, encoding: str, body: bytes | bytearray, json_encoded: bool, peer: str
    ) -> tuple[list[Any], int, list[Problem]]:
        """Body → events, in the decoder thread; raises ValueError / OverflowError."""
        if encoding == "gzip":
            body = _gunzip(body, self.max_body)
        request = parse_body(signal, body, json_encoded)
        self.adapter.peer = peer
        convert = self.adapter.logs if signal == "logs" else self.adapter.spans
        return convert(request)

    def _status(
        self, code: int, message: str, json_encoded: bool, headers: dict[str, str] | None = None
    ) -> Reply:
        from google.rpc import status_pb2

        # google.rpc.Code: INVALID_ARGUMENT, UNAVAILABLE, RESOURCE_EXHAUSTED, else UNKNOWN.
        rpc = {400: 3, 503: 14, 429: 8}.get(code, 2)
        status = status_pb2.Status(code=rpc, message=message)
        return self._encode(code, status, json_encoded, headers)

    @staticmethod
    def _encode(code: int, message: Any, json_encoded: bool, headers: dict[str, str] | None = None) -> Reply:
        if json_encoded:
            from google.protobuf import json_format

            return Reply(
                code, json_format.MessageToJson(message, indent=None).encode(), "application/json", headers
            )
        return Reply(code, message.SerializeToString(), "application/x-protobuf", headers)

    @property
    def duplicates(self) -> int:
        """Records of a resent batch, taken the first time only."""
        return self.adapter.duplicates

    def describe(self) -> str:
        return f"OTLP/HTTP on {self.endpoint} (/v1/logs, /v1/traces)"


__all__ = [
    "DEFAULT_ADDRESS",
    "OtlpError",
    "OtlpReceiver",
    "is_loopback",
    "parse_address",
    "parse_body",
    "token_problem",
]
