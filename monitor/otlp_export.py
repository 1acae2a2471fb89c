"""Detections out as OpenTelemetry: ``watch --otlp-export URL`` (``[export] otlp_url``).

Each loop detection is sent as an OTel **log event** (``event.name``
``loopwatch.loop_detected``, to ``URL/v1/logs``) and, when the session's trace
is known (its OTLP records came with trace ids: see
:attr:`~monitor.formats.otlp.OtlpAdapter.traces`), as a **span event** of the
same name on that trace (a zero-length ``loopwatch.loop_detected`` span, child
of the session's latest span, to ``URL/v1/traces``), so Langfuse, Phoenix,
openlit or any OTLP backend shows loops beside the agent's own traces.

Attributes: the GenAI semantic conventions where they fit
(``gen_ai.conversation.id`` = the session, ``gen_ai.agent.name``,
``gen_ai.tool.name``), ``loopwatch.*`` for the rest (``detector``, ``level``,
``pattern``, ``count``, ``session``, ``score``, ``message``, ``summary``,
``where`` and ``episode.change``).

What is sent: one event per **loop episode change** (monitor/detect/episodes.py):
``opened``, ``escalated`` (a higher rung) and ``closed`` (the loop stopped, was
acknowledged or marked a false positive, or the session ended), with
``loopwatch.episode.number``, ``.detectors``, ``.peak`` and ``.closed``; the
repeats that only update an episode's count are not sent.  (:meth:`OtlpExporter.offer`
takes single detections too: each rung change of a (session, detector, pattern) once.)

It never holds the hub up: a detection is appended to a bounded queue
(:data:`QUEUE`; the oldest dropped when full, counted in :attr:`lost`) and a
task sends batches (:data:`BATCH`) in a thread, retrying 429 / 502 / 503 / 504
and connection errors with exponential back-off (``Retry-After`` honoured, at
most :data:`MAX_BACKOFF` s, :data:`ATTEMPTS` tries); what still fails, or
gets another 4xx, is counted lost.  At stop it sends what is queued for at
most :data:`STOP_SECONDS`, the rest counted lost.
"""

from __future__ import annotations

import asyncio
import http.client
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from monitor.detect.base import Detection
from monitor.detect.episodes import UPDATED, EpisodeChange
from monitor.events import Level
from monitor.updates import EpisodeChanged

log = logging.getLogger("loopwatch.export")

EVENT = "loopwatch.loop_detected"
QUEUE = 1000
BATCH = 100
ATTEMPTS = 5
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
STOP_SECONDS = 0.5
TIMEOUT = 5.0
#: (session, detector, pattern) rungs remembered (least recently changed dropped first).
MAX_RUNGS = 10_000
RETRYABLE = frozenset({429, 502, 503, 504})
#: OTel severity numbers (logs data model): INFO, WARN, ERROR, FATAL.
SEVERITY = {Level.NOTICE: 9, Level.WARN: 13, Level.CRITICAL: 17, Level.TERMINATE: 21}

#: The session's (trace id, span id) in hex, when known.
TraceLookup = Callable[[str], "tuple[str, str] | None"]


class ExportError(ValueError):
    """A bad ``--otlp-export`` URL."""


def base_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of an OTLP/HTTP endpoint (``/v1/logs`` stripped)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ExportError(f"--otlp-export {url!r}: expected http(s)://HOST[:PORT][/PATH]")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 4318)
    except ValueError:
        raise ExportError(f"--otlp-export {url!r}: bad port") from None
    path = parts.path.rstrip("/")
    for tail in ("/v1/logs", "/v1/traces"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    return parts.scheme, parts.hostname, port, path


def post(url: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, float | None]:
    """POST one export request: (HTTP status, Retry-After seconds); raises OSError when unreachable."""
    scheme, host, port, prefix = base_url(url)
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    connection = cls(host, port, timeout=TIMEOUT)
    try:
        connection.request(
            "POST",
            prefix + path,
            body=body,
            headers={"Content-Type": "application/x-protobuf", **headers},
        )
        response = connection.getresponse()
        response.read()
        retry = response.getheader("Retry-After")
        try:
            after = float(retry) if retry else None
        except ValueError:
            after = None
        return response.status, after
    except http.client.HTTPException as exc:
        raise OSError(str(exc)) from None
    finally:
        connection.close()


def attributes(detection: Detection, change: str, agent: str | None) -> dict[str, Any]:
    """The event's attributes: GenAI where they fit, ``loopwatch.*`` for the rest."""
    values: dict[str, Any] = {
        "event.name": EVENT,
        "gen_ai.conversation.id": detection.session,
        "loopwatch.session": detection.session,
        "loopwatch.detector": detection.detector,
        "loopwatch.level": detection.level.label,
        "loopwatch.pattern": detection.pattern,
        "loopwatch.count": int(detection.count),
        "loopwatch.score": float(detection.score),
        "loopwatch.message": detection.message,
        "loopwatch.episode.change": change,
    }
    if detection.summary:
        values["loopwatch.summary"] = detection.summary
    if detection.source:
        values["loopwatch.where"] = detection.where
    if detection.tool:
        values["gen_ai.tool.name"] = detection.tool
    if agent:
        values["gen_ai.agent.name"] = agent
    return values


def episode_attributes(change: EpisodeChange, agent: str | None) -> dict[str, Any]:
    """An episode change's attributes: those of the detection that made it (a close
    has none: the episode's own), with ``loopwatch.episode.*``."""
    episode = change.episode
    if change.detection is not None:
        values = attributes(change.detection, change.kind, agent)
    else:
        values = {
            "event.name": EVENT,
            "gen_ai.conversation.id": episode.session,
            "loopwatch.session": episode.session,
            "loopwatch.detector": episode.detector,
            "loopwatch.level": episode.level.label,
            "loopwatch.pattern": episode.pattern,
            "loopwatch.message": episode.message,
            "loopwatch.episode.change": change.kind,
            **({"gen_ai.agent.name": agent} if agent else {}),
        }
    values["loopwatch.count"] = int(episode.count)  # the episode's: always true
    values["loopwatch.episode.number"] = episode.number
    values["loopwatch.episode.detectors"] = ",".join(episode.detectors)
    values["loopwatch.episode.peak"] = episode.peak.label
    if episode.closed:
        values["loopwatch.episode.closed"] = episode.closed
    return values


def _key_values(values: dict[str, Any]) -> list[Any]:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            any_value = AnyValue(bool_value=value)
        elif isinstance(value, int):
            any_value = AnyValue(int_value=value)
        elif isinstance(value, float):
            any_value = AnyValue(double_value=value)
        else:
            any_value = AnyValue(string_value=str(value))
        out.append(KeyValue(key=key, value=any_value))
    return out


class Item(NamedTuple):
    """One loop event to send."""

    ts: float  # event time (0: unknown, the send time is used)
    level: Level
    message: str
    values: dict[str, Any]  # its attributes
    trace: tuple[str, str] | None  # the session's (trace id, latest span id), if known


def _resource(message: Any) -> None:
    from monitor import __version__

    message.resource.attributes.extend(
        _key_values({"service.name": "loopwatch", "service.version": __version__})
    )


def logs_request(items: list[Item]) -> bytes:
    """An ``ExportLogsServiceRequest`` with one log event per item."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    _resource(resource)
    scope = resource.scope_logs.add()
    scope.scope.name = "loopwatch"
    now = time.time_ns()
    for item in items:
        trace = item.trace
        record = scope.log_records.add(
            time_unix_nano=int(item.ts * 1e9) if item.ts > 0 else now,
            observed_time_unix_nano=now,
            severity_number=SEVERITY.get(item.level, 9),
            severity_text=item.level.label.upper(),
            event_name=EVENT,
        )
        record.body.string_value = item.message
        record.attributes.extend(_key_values(item.values))
        if trace is not None:
            record.trace_id = bytes.fromhex(trace[0])
            if trace[1]:
                record.span_id = bytes.fromhex(trace[1])
    return request.SerializeToString()


def traces_request(items: list[Item]) -> bytes | None:
    """An ``ExportTraceServiceRequest``: per item with a known trace, a zero-length span
    on that trace (child of its latest span) carrying the detection as a span event."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    known = [item for item in items if item.trace is not None]
    if not known:
        return None
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    _resource(resource)
    scope = resource.scope_spans.add()
    scope.scope.name = "loopwatch"
    now = time.time_ns()
    for _ts, _level, _message, values, trace in known:
        assert trace is not None
        span = scope.spans.add(
            trace_id=bytes.fromhex(trace[0]),
            span_id=os.urandom(8),
            name=EVENT,
            kind=Span.SpanKind.SPAN_KIND_INTERNAL,
            start_time_unix_nano=now,
            end_time_unix_nano=now,
        )
        if trace[1]:
            span.parent_span_id = bytes.fromhex(trace[1])
        span.attributes.extend(_key_values(values))
        event = span.events.add(time_unix_nano=now, name=EVENT)
        event.attributes.extend(_key_values(values))
    return request.SerializeToString()


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a daemon thread: a send still waiting on an endpoint
    when the monitor stops is abandoned, never joined at exit (asyncio.to_thread's are)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = function(*args), None
        except BaseException as exc:  # handed to the awaiting task
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is gone: nobody waits any more

    threading.Thread(target=run, name="loopwatch-otlp-export-send", daemon=True).start()
    return await future


class OtlpExporter:
    """Sends the hub's detections to an OTLP/HTTP endpoint (see the module's docstring)."""

    def __init__(
        self,
        hub: Any,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        traces: TraceLookup | None = None,
        queue: int = QUEUE,
        batch: int = BATCH,
        first_backoff: float = FIRST_BACKOFF,
    ):
        base_url(url)  # a bad URL fails now, not at the first detection
        self.hub = hub
        self.url = url
        self.headers = dict(headers or {})
        self.traces = traces
        self.queue: deque[Item] = deque()
        self.max_queue = max(1, queue)
        self.batch = max(1, batch)
        self.first_backoff = first_backoff
        self.rungs: OrderedDict[tuple[str, str, str], Level] = OrderedDict()
        self.sent = 0  # detections the endpoint accepted
        self.lost = 0  # detections dropped (queue full, not accepted after retries, at stop)
        self.retries = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._closing = False

    def start(self) -> None:
        self._unsubscribe = self.hub.subscribe(self._on_update, (EpisodeChanged,))
        self._task = asyncio.create_task(self._run(), name="loopwatch-otlp-export")

    async def stop(self) -> None:
        """Send what is queued for at most STOP_SECONDS; the rest is counted lost."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._closing = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_SECONDS)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.queue:
            self.lost += len(self.queue)
            self.queue.clear()
        if self.lost:
            log.warning(
                "OTLP export to %s: %d detections could not be sent (%d retries)",
                self.url,
                self.lost,
                self.retries,
            )

    # -- the hub's side: never blocks ---------------------------------------------------------

    def _on_update(self, update: object) -> None:
        if isinstance(update, EpisodeChanged):
            self.offer_change(update.change)

    def offer_change(self, change: EpisodeChange) -> bool:
        """Queue an episode's opening, escalation or close (a repeat that only
        updates its count is not sent)."""
        if change.kind == UPDATED:
            return False
        episode = change.episode
        info = self.hub.session(episode.session)
        values = episode_attributes(change, getattr(info, "agent", None))
        ts = change.detection.ts if change.detection is not None else episode.last_ts
        level = episode.level if change.detection is None else change.detection.level
        self._queue(Item(ts, level, episode.message, values, self._trace(episode.session)))
        return True

    def _trace(self, session: str) -> tuple[str, str] | None:
        return self.traces(session) if self.traces is not None else None

    def _queue(self, item: Item) -> None:
        if len(self.queue) >= self.max_queue:
            self.queue.popleft()
            self.lost += 1
        self.queue.append(item)
        self._wake.set()

    def offer(self, detection: Detection) -> bool:
        """Queue ``detection`` if it changes its (session, detector, pattern)'s rung."""
        if detection.level <= Level.NONE:
            return False
        key = (detection.session, detection.detector, detection.pattern)
        before = self.rungs.get(key)
        if before is not None and detection.level <= before:
            return False
        self.rungs[key] = detection.level
        self.rungs.move_to_end(key)
        if len(self.rungs) > MAX_RUNGS:
            self.rungs.popitem(last=False)
        info = self.hub.session(detection.session)
        values = attributes(
            detection, "opened" if before is None else "escalated", getattr(info, "agent", None)
        )
        self._queue(
            Item(detection.ts, detection.level, detection.message, values, self._trace(detection.session))
        )
        return True

    # -- the sender ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not self.queue:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            items = [self.queue.popleft() for _ in range(min(self.batch, len(self.queue)))]
            if await self._deliver(items):
                self.sent += len(items)
            else:
                self.lost += len(items)

    async def _deliver(self, items: list[Item]) -> bool:
        """Send a batch's log events, then its span events; True when the logs were accepted."""
        accepted = await self._send("/v1/logs", logs_request(items))
        spans = traces_request(items)
        if spans is not None:
            await self._send("/v1/traces", spans)
        return accepted

    async def _send(self, path: str, body: bytes) -> bool:
        backoff = self.first_backoff
        for attempt in range(ATTEMPTS):
            try:
                status, after = await _in_thread(post, self.url, path, body, self.headers)
            except OSError as exc:
                status, after = 0, None
                why = str(exc)
            else:
                if 200 <= status < 300:
                    return True
                why = f"HTTP {status}"
                if status not in RETRYABLE:
                    log.warning("OTLP export to %s%s refused: %s", self.url, path, why)
                    return False
            if attempt + 1 == ATTEMPTS or self._closing:
                break
            self.retries += 1
            await asyncio.sleep(min(MAX_BACKOFF, after if after is not None else backoff))
            backoff *= 2
        log.warning("OTLP export to %s%s failed: %s", self.url, path, why)
        return False

    def describe(self) -> str:
        return f"detections exported to {self.url} (OTLP/HTTP)"


def check(url: str, headers: dict[str, str] | None = None) -> tuple[bool, str]:
    """Whether ``url`` answers an empty OTLP logs export (for ``doctor``): (ok, what it said)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    try:
        status, _ = post(url, "/v1/logs", ExportLogsServiceRequest().SerializeToString(), headers or {})
    except (OSError, ExportError) as exc:
        return False, f"{url} does not answer ({exc})"
    if 200 <= status < 300:
        return True, f"{url}/v1/logs answers (HTTP {status})"
    return False, f"{url}/v1/logs answered HTTP {status}"


__all__ = ["ExportError", "OtlpExporter", "attributes", "base_url", "check", "logs_request", "traces_request"]
