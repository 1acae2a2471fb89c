"""Detections out as OpenTelemetry (``--otlp-export``), against real receivers.

A tiny OTLP/HTTP receiver in the test (``http.server`` in a thread) decodes the exporter's
protobuf bodies with the official ``opentelemetry-proto`` messages, and can answer 503 to
make it back off and retry; loopwatch's own ``watch --otlp`` receiver must accept what the
exporter sends too.  Agents' spans reach a real hub through the SDK's exporter, so the
detection lands on the session's own trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from monitor.config import build_config
from monitor.detect.base import Detection
from monitor.events import Level
from monitor.hub import Hub
from monitor.otlp_export import OtlpExporter, check
from monitor.sources.otlp import OtlpReceiver
from tests.test_otlp_agents import SESSION, _send_claude_tool_spans

DEADLINE = 60.0


class Collector:
    """What the tiny receiver was sent: decoded log records and spans, and the statuses it gave."""

    def __init__(self, refuse_first: int = 0):
        self.refuse = refuse_first
        self.records: list[Any] = []
        self.spans: list[Any] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()

    def take(self, path: str, body: bytes, content_type: str) -> int:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        with self.lock:
            if self.refuse > 0:
                self.refuse -= 1
                self.statuses.append(503)
                return 503
            request = ExportLogsServiceRequest() if path == "/v1/logs" else ExportTraceServiceRequest()
            if content_type == "application/json":
                json_format.Parse(body, request)
            else:
                request.ParseFromString(body)
            if path == "/v1/logs":
                for resource in request.resource_logs:
                    for scope in resource.scope_logs:
                        self.records.extend(scope.log_records)
            else:
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        self.spans.extend(scope.spans)
            self.statuses.append(200)
            return 200


@contextlib.contextmanager
def tiny_receiver(collector: Collector) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = collector.take(self.path, body, self.headers.get("Content-Type", ""))
            self.send_response(status)
            if status == 503:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def attrs(item: Any) -> dict[str, Any]:
    from monitor.formats.otlp import attributes

    return attributes(item.attributes)


async def until(predicate, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_each_rung_change_is_a_log_event_and_a_span_event_on_the_sessions_trace():
    """Claude Code tool spans (SDK exporter) → loopwatch's receiver → a loop → the exporter, which
    is refused once (503: it backs off and retries), sends each loop episode's opening, rungs
    and close once, with GenAI and loopwatch attributes, on the session's trace."""
    collector = Collector(refuse_first=1)
    hub = Hub(build_config({}))
    await hub.start()
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), loopback_needs_token=False)
    with tiny_receiver(collector) as url:
        exporter = OtlpExporter(hub, url, traces=otlp.adapter.traces.get, first_backoff=0.01)
        exporter.start()
        try:
            await otlp.start()
            await asyncio.to_thread(_send_claude_tool_spans, otlp.endpoint, 6)
            await hub.join()
            raised = [d for d in hub.recent_detections() if d.session == SESSION and d.level > Level.NONE]
            assert raised, "no loop detected"
            await until(lambda: exporter.sent and not exporter.queue, "nothing exported")
            await until(lambda: len(collector.spans) >= len(collector.records), "no span events")
        finally:
            await otlp.stop()
            await hub.stop()
            await exporter.stop()
    assert collector.statuses[0] == 503 and exporter.retries >= 1 and exporter.lost == 0
    records = [attrs(r) for r in collector.records]
    assert records and all(r["event.name"] == "loopwatch.loop_detected" for r in records)
    first = records[0]
    assert first["gen_ai.conversation.id"] == first["loopwatch.session"] == SESSION
    assert first["gen_ai.agent.name"] == "claude-code" and first["gen_ai.tool.name"] == "Bash"
    assert first["loopwatch.episode.change"] == "opened" and first["loopwatch.count"] >= 1
    assert {"loopwatch.detector", "loopwatch.level", "loopwatch.pattern", "loopwatch.score"} <= set(first)
    # One loop is one episode: its opening, each higher rung once, its close; no repeat.
    changes = [
        (r["loopwatch.episode.number"], r["loopwatch.episode.change"], r["loopwatch.level"]) for r in records
    ]
    assert len(changes) == len(set(changes)), changes
    assert {c for _, c, _ in changes} <= {"opened", "escalated", "closed"}
    episodes = {n for n, _, _ in changes}
    assert sum(c == "opened" for _, c, _ in changes) == len(episodes)
    assert len(records) < len(raised)  # not one event per repeat
    trace_id, span_id = otlp.adapter.traces[SESSION]
    assert {r.trace_id.hex() for r in collector.records} == {trace_id}
    assert {s.trace_id.hex() for s in collector.spans} == {trace_id}
    span = collector.spans[0]
    assert span.parent_span_id.hex() == span_id and span.name == "loopwatch.loop_detected"
    assert [e.name for e in span.events] == ["loopwatch.loop_detected"]
    assert attrs(span.events[0])["loopwatch.session"] == SESSION
    assert collector.records[0].severity_number in (9, 13, 17, 21)


def _detection(n: int, level: Level = Level.WARN) -> Detection:
    return Detection(
        detector="exact_repeat",
        level=level,
        score=1.0,
        message=f"same call {n} times",
        pattern=f"p{n}",
        count=n,
        session="export-session",
        source="t.jsonl",
        line=n,
        ts=time.time(),
    )


async def test_loopwatchs_own_receiver_accepts_what_the_exporter_sends():
    hub = Hub(build_config({}))
    await hub.start()
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), token="t0k", loopback_needs_token=True)
    await otlp.start()
    exporter = OtlpExporter(
        hub, otlp.endpoint, headers={"Authorization": "Bearer t0k"}, traces=lambda s: ("ab" * 16, "cd" * 8)
    )
    exporter.start()
    try:
        for n in range(1, 4):
            assert exporter.offer(_detection(n))
        assert not exporter.offer(_detection(1))  # the same rung again: not sent
        assert exporter.offer(_detection(1, Level.CRITICAL))  # escalated
        await until(lambda: exporter.sent == 4, "the receiver did not accept the exports")
        assert otlp.requests >= 2 and otlp.refused == 0 and otlp.rejected == 0  # logs and traces
        assert otlp.adapter.ignored == 8  # loopwatch's own events are no agent's: not read back
    finally:
        await exporter.stop()
        await otlp.stop()
        await hub.stop()
    assert exporter.lost == 0


async def test_the_queue_is_bounded_and_losses_are_counted():
    """An endpoint that does not answer: offering never waits, the queue keeps the newest,
    what could not be sent is counted lost, and stopping takes at most half a second more."""
    hub = Hub(build_config({}))
    await hub.start()
    exporter = OtlpExporter(hub, "http://127.0.0.1:9", queue=3, first_backoff=0.01)  # port 9: refused
    exporter.start()
    try:
        for n in range(1, 11):
            exporter.offer(_detection(n))
        assert len(exporter.queue) <= 3 and exporter.lost >= 6
    finally:
        await exporter.stop()
        await hub.stop()
    assert exporter.lost == 10 and exporter.sent == 0
    from monitor.metrics import Metrics

    text = Metrics(hub, None, exporter).render()
    assert 'loopwatch_otlp_export_total{outcome="lost"} 10' in text
    assert 'loopwatch_otlp_export_total{outcome="sent"} 0' in text
    ok, said = check("http://127.0.0.1:9")
    assert not ok and "does not answer" in said


async def test_watch_exports_a_files_loop_and_doctor_reports_the_target(tmp_path: Path, monkeypatch):
    """`watch --headless --otlp-export URL` on a looping log sends its detections; doctor names
    the running monitor's export target and checks that it answers."""
    from monitor.commands import doctor
    from tests.test_watch_headless import ROOT, Watcher

    state = tmp_path / "state"
    monkeypatch.setenv("LOOPWATCH_STATE_DIR", str(state))
    collector = Collector()
    log = ROOT / "monitor" / "examples" / "loop-exact-repeat.jsonl"
    with tiny_receiver(collector) as url:
        watcher = await Watcher.start(
            tmp_path,
            "--json",
            "--no-db",
            "--no-socket",
            "--from-start",
            str(log),
            "--otlp-export",
            url,
            env={"LOOPWATCH_STATE_DIR": str(state)},
        )
        try:
            assert any("detections exported to" in line for line in watcher.stderr)
            await until(lambda: collector.records, "watch exported nothing")
            state_seen = doctor.running_monitor_state()
            assert state_seen["otlp_export"] == url
            [found] = await asyncio.to_thread(doctor.check_otlp_export, state_seen)
            assert found.status == "OK" and url in found.detail
            assert await watcher.stop() == 0
        finally:
            watcher.kill()
            await watcher.proc.wait()
    assert attrs(collector.records[0])["loopwatch.session"] == "loop-exact-repeat"
    assert not collector.spans  # a file gives no trace
