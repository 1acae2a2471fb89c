"""``watch --otlp``: the OTLP/HTTP receiver and the adapters, against real clients.

The OpenTelemetry Python SDK's OTLP/HTTP exporters (protobuf, gzip) send logs
and spans to a running :class:`~monitor.sources.otlp.OtlpReceiver` feeding a
real :class:`~monitor.hub.Hub`; recorded Claude-Code- and Codex-shaped OTLP/JSON
payloads (``tests/otlp/``) are posted over real HTTP.  The exporters block, so
they run in a thread while the loop serves the receiver.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import http.client
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from monitor.config import build_config
from monitor.events import Level
from monitor.hub import Hub
from monitor.sources.otlp import OtlpError, OtlpReceiver, parse_address

FIXTURES = Path(__file__).resolve().parent / "otlp"
CLAUDE_SESSION = "5c4e9a1e-8f2b-4c1d-9a7e-0b6f3d2c1a90"
CODEX_SESSION = "0199a6b2-7c3d-7e41-9f20-5a8b1c2d3e4f"


@contextlib.asynccontextmanager
async def receiver(token: str | None = None, **options: Any) -> AsyncIterator[tuple[Hub, OtlpReceiver]]:
    hub = Hub(build_config({}))
    await hub.start()
    options.setdefault("loopback_needs_token", token is not None)
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), token=token, **options)
    try:
        await otlp.start()
        yield hub, otlp
    finally:
        await otlp.stop()
        await hub.stop()


def _post(
    otlp: OtlpReceiver,
    path: str,
    body: bytes,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, dict[str, str], bytes]:
    host, port = otlp.address
    connection = http.client.HTTPConnection(host, port, timeout=20)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": content_type, **(headers or {})})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


async def post(
    otlp: OtlpReceiver, path: str, body: bytes, **kwargs: Any
) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(_post, otlp, path, body, **kwargs)


def _resource(service: str, host: str = "laptop-1") -> Any:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": service, "host.name": host})


def _send_claude_logs_with_the_sdk(endpoint: str, session: str, repeats: int) -> None:
    """What Claude Code's exporter sends: one log event per finished tool call."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=_resource("claude-code"))
    exporter = OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", compression=Compression.Gzip, timeout=20)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    logger = provider.get_logger("com.anthropic.claude_code.events")
    sequence = 0
    for i in range(repeats):
        sequence += 1
        logger.emit(
            body="claude_code.tool_result",
            event_name="claude_code.tool_result",
            attributes={
                "event.name": "tool_result",
                "session.id": session,
                "event.sequence": sequence,
                "tool_name": "Bash",
                "success": "false",
                "tool_use_id": f"toolu_sdk_{i}",
                "error": "Exit code 1\nls: cannot access 'build/': No such file or directory",
                "tool_input": json.dumps({"command": "ls build/"}),
            },
        )
    provider.force_flush()
    provider.shutdown()


def _send_genai_spans_with_the_sdk(endpoint: str, conversation: str, repeats: int) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=_resource("my-agent", "worker-3"))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=20))
    )
    tracer = provider.get_tracer("my-agent")
    for i in range(repeats):
        with tracer.start_as_current_span("execute_tool grep") as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "grep",
                    "gen_ai.tool.call.id": f"call_{i}",
                    "gen_ai.conversation.id": conversation,
                    "gen_ai.tool.call.arguments": json.dumps({"pattern": "fooBar", "path": "src"}),
                    "gen_ai.tool.call.result": "No matches found",
                }
            )
            span.set_status(Status(StatusCode.ERROR, "no matches"))
        with tracer.start_as_current_span("chat gpt-5"):  # not a tool: ignored
            pass
    provider.force_flush()
    provider.shutdown()


async def test_sdk_log_exporter_reaches_detection():
    """The OTel SDK's OTLP/HTTP log exporter (protobuf, gzip) → a running receiver → a loop."""
    async with receiver() as (hub, otlp):
        await asyncio.to_thread(_send_claude_logs_with_the_sdk, otlp.endpoint, CLAUDE_SESSION, 4)
        await hub.join()
        info = hub.session(CLAUDE_SESSION)
        assert info is not None and info.agent == "claude-code"
        assert info.events == 1 + 2 * 4  # session_start, then a call and its result per record
        assert info.level >= Level.WARN, info.reason
        assert otlp.accepted == 9 and otlp.rejected == 0


async def test_sdk_span_exporter_genai_tool_spans_reach_detection():
    """GenAI execute_tool spans from the SDK's OTLP/HTTP span exporter; the conversation id is
    not a UUID, so the session is qualified by service and host."""
    async with receiver() as (hub, otlp):
        await asyncio.to_thread(_send_genai_spans_with_the_sdk, otlp.endpoint, "conv-17", 4)
        await hub.join()
        info = hub.session("my-agent@worker-3/conv-17")
        assert info is not None and info.agent == "my-agent"
        assert info.level >= Level.WARN, info.reason
        assert otlp.adapter.ignored == 4  # the chat spans


@pytest.mark.parametrize(
    "name,session,agent",
    [("claude-code-logs.json", CLAUDE_SESSION, "claude-code"), ("codex-logs.json", CODEX_SESSION, "codex")],
)
async def test_recorded_agent_payloads_over_json_and_gzip(name: str, session: str, agent: str):
    """The recorded payloads, OTLP/JSON, plain and gzip'ed: a response per spec, a loop detected."""
    body = (FIXTURES / name).read_bytes()
    async with receiver() as (hub, otlp):
        status, headers, reply = await post(
            otlp, "/v1/logs", gzip.compress(body), headers={"Content-Encoding": "gzip"}
        )
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(reply) == {}  # a full success: no partial_success
        await hub.join()
        info = hub.session(session)
        assert info is not None and info.agent == agent
        assert info.level >= Level.WARN, info.reason
        events = info.events
        status, _, _ = await post(otlp, "/v1/logs", body)  # the same batch again (an exporter's retry)
        await hub.join()
        # The receiver remembers the records it took: a retried batch adds nothing.
        assert otlp.duplicates >= 4 and hub.engine.duplicates == 0
        assert hub.session(session).events == events


def test_claude_events_map_to_calls_results_usage_and_prompts():
    """The adapter alone: prompt → user message, api_request → usage, tool_result → a call
    (arguments from tool_input) and an error result, tool_decision by a rule ignored (one by
    the user ends a wait: tests/test_waiting_sources.py); sequence order."""
    from monitor.formats.otlp import OtlpAdapter
    from monitor.sources.otlp import parse_body

    request = parse_body("logs", (FIXTURES / "claude-code-logs.json").read_bytes(), json_encoded=True)
    adapter = OtlpAdapter()
    events, rejected, problems = adapter.logs(request)
    assert (rejected, problems, adapter.ignored) == (0, [], 4)
    kinds = [e.kind.value for e in events]
    assert kinds[:3] == ["session_start", "message", "usage"]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 4
    start = events[0]
    assert start.meta == {"origin": "otlp", "service": "claude-code", "host": "build-07"}
    call = next(e for e in events if e.kind.value == "tool_call")
    assert (call.session, call.tool, call.call_id) == (CLAUDE_SESSION, "Bash", "toolu_01P0")
    assert call.args == {
        "command": "python -m pytest tests/test_parser.py",
        "description": "Run the parser tests",
    }
    result = next(e for e in events if e.kind.value == "tool_result")
    assert result.is_error and result.content.startswith("Exit code 1")
    usage = next(e for e in events if e.kind.value == "usage")
    # Claude Code counts cache reads apart; the event counts them within its input.
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (5120 + 4000, 210, 0.0123)
    assert (usage.meta["model"], usage.meta["cache_read_input_tokens"]) == ("claude-sonnet-4-5", 4000)
    again, _, _ = adapter.logs(request)
    assert "session_start" not in [e.kind.value for e in again]  # announced once


async def test_bad_requests_get_the_right_status():
    async with receiver() as (hub, otlp):
        assert (await post(otlp, "/v1/logs", b"{not json"))[0] == 400
        status, headers, body = await post(
            otlp, "/v1/logs", b"\xff\x00garbage", content_type="application/x-protobuf"
        )
        assert status == 400 and headers["Content-Type"] == "application/x-protobuf"
        from google.rpc import status_pb2

        assert "protobuf" in status_pb2.Status.FromString(body).message
        assert (await post(otlp, "/v1/logs", b"{}", content_type="text/plain"))[0] == 415
        assert (await post(otlp, "/v1/metrics", b"{}"))[0] == 404
        assert (await post(otlp, "/v1/logs", b"", method="GET"))[0] == 405
        assert (await post(otlp, "/v1/logs", b"{}", headers={"Content-Encoding": "br"}))[0] == 415
        assert (await post(otlp, "/v1/logs", b"{}", headers={"Content-Encoding": "gzip"}))[0] == 400
        assert (await post(otlp, "/v1/logs", b"{}"))[0] == 200  # an empty export is fine
        await hub.join()
        assert hub.problems_total >= 3  # each unreadable body reported


async def test_unreadable_agent_records_are_a_partial_success():
    """A tool_result without tool_name cannot become a call: rejected and counted; the rest is kept."""
    payload = json.loads((FIXTURES / "claude-code-logs.json").read_text())
    records = payload["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    broken = [
        r
        for r in records
        if any(
            a["key"] == "event.name" and a["value"]["stringValue"] == "tool_result" for a in r["attributes"]
        )
    ][0]
    broken["attributes"] = [a for a in broken["attributes"] if a["key"] != "tool_name"]
    async with receiver() as (hub, otlp):
        status, _, reply = await post(otlp, "/v1/logs", json.dumps(payload).encode())
        assert status == 200
        partial = json.loads(reply)["partialSuccess"]
        assert partial["rejectedLogRecords"] == "1" and "tool_name" in partial["errorMessage"]
        await hub.join()
        assert hub.session(CLAUDE_SESSION).events > 1


async def test_pressure_is_answered_503_with_retry_after():
    """A request is answered once decoded, its events queued behind a busy hub; while that
    backlog is at its limit, or the hub itself is saturated, the receiver asks the exporter
    to retry later."""
    from monitor.sources.fair import IngestMux

    hub = Hub(build_config({}), queue_items=2)  # not started: nothing drains the queue
    ingest = IngestMux(hub, batch_events=2)  # the hub takes 2 events, the rest wait in the lane
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), loopback_needs_token=False, max_backlog=5, ingest=ingest)
    await otlp.start()
    try:
        body = (FIXTURES / "claude-code-logs.json").read_bytes()
        status, _headers, _ = await post(otlp, "/v1/logs", body)
        assert status == 200 and otlp.backlog_events >= 5  # accepted, waiting for the hub
        status, headers, _ = await post(otlp, "/v1/logs", b"{}")
        assert status == 503 and headers["Retry-After"] == "2"
        assert otlp.throttled == 1
        otlp.in_flight = otlp.max_in_flight  # as if that many requests were being decoded
        status, headers, body = await post(otlp, "/v1/logs", b"{}")
        assert status == 429 and headers["Retry-After"] == "2" and b"busy" in body
        otlp.in_flight, otlp.max_backlog = 0, 10**6
        await hub.submit([], [__import__("monitor.formats.base", fromlist=["Problem"]).Problem("x", 1, "y")])
        assert hub.saturated()  # the pump's batch and this problem fill its queue
        status, headers, _ = await post(otlp, "/v1/logs", b"{}")
        assert status == 503 and otlp.throttled == 3  # (the 429 counted too)
    finally:
        await hub.start()  # the backlog drains once the hub runs; the pump's close waits for it
        await otlp.stop()
        await ingest.close()
        await hub.stop()
    assert otlp.backlog_events == 0 and hub.session(CLAUDE_SESSION).events > 10


async def test_token_is_required_when_set_and_for_non_loopback_binds():
    with pytest.raises(OtlpError, match="token"):
        OtlpReceiver(Hub(build_config({})), ("0.0.0.0", 0))
    async with receiver(token="s3cret") as (hub, otlp):
        assert (await post(otlp, "/v1/logs", b"{}"))[0] == 401
        assert (await post(otlp, "/v1/logs", b"{}", headers={"Authorization": "Bearer nope"}))[0] == 401
        assert (await post(otlp, "/v1/logs", b"{}", headers={"Authorization": "Bearer s3cret"}))[0] == 200


async def test_a_session_seen_by_otlp_and_by_a_hook_is_one_session(tmp_path: Path):
    """Claude's hook and its OTLP export report the same call (same tool_use_id, same session
    id): one session, each call counted once."""
    from tests.socketkit import running_monitor
    from tests.test_hooks import PRE_TOOL, run_hook_async

    async with running_monitor(tmp_path) as (hub, server):
        otlp = OtlpReceiver(hub, ("127.0.0.1", 0), loopback_needs_token=False)
        await otlp.start()
        try:
            for i in range(2):
                await run_hook_async(
                    "claude",
                    dict(
                        PRE_TOOL,
                        session_id=CLAUDE_SESSION,
                        tool_use_id=f"toolu_sdk_{i}",
                        tool_input={"command": "ls build/"},
                    ),
                    server.unix_path,
                )
            await asyncio.to_thread(_send_claude_logs_with_the_sdk, otlp.endpoint, CLAUDE_SESSION, 2)
            await hub.join()
        finally:
            await otlp.stop()
        info = hub.session(CLAUDE_SESSION)
        assert info.channel == "hook"  # control goes back through the hook
        assert hub.engine.duplicates == 2  # OTLP's copies of the two calls
        assert info.level < Level.WARN  # two calls, not four


def test_address_parsing_and_the_cli_refuses_an_open_bind_without_token(tmp_path: Path):
    assert parse_address(None) == ("127.0.0.1", 4318)
    assert parse_address("9999") == ("127.0.0.1", 9999)
    assert parse_address("0.0.0.0:4318") == ("0.0.0.0", 4318)
    with pytest.raises(OtlpError):
        parse_address("host:port")
    env = {"PATH": "/usr/bin:/bin", "LOOPWATCH_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "watch",
            "--headless",
            "--no-db",
            "--no-socket",
            "--otlp",
            "0.0.0.0:4318",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert result.returncode != 0 and "token" in result.stderr


def test_collector_example_forwards_exactly_the_agent_events():
    """examples/otel-collector.yaml: its log filter keeps the event names the adapter reads
    (Claude Code's with or without the prefix, Codex's) and drops the rest."""
    import re

    text = (Path(__file__).resolve().parent.parent / "examples" / "otel-collector.yaml").read_text()
    for part in (
        "receivers:",
        "otlp:",
        "batch:",
        "filter/agent-events:",
        "otlphttp/loopwatch:",
        'Authorization: "Bearer ${env:LOOPWATCH_TOKEN}"',
    ):
        assert part in text
    # The OTTL string in a single-quoted YAML scalar: its \\ is one backslash for the regex.
    pattern = re.search(r'IsMatch\(attributes\["event.name"\], "(.*)"\)', text).group(1).replace("\\\\", "\\")
    keep = [
        "tool_result",
        "user_prompt",
        "api_request",
        "compaction",
        "claude_code.tool_result",
        "codex.tool_result",
        "codex.user_prompt",
        "claude_code.assistant_response",
        "api_error",
        "claude_code.api_retries_exhausted",
        "subagent_completed",
        "tool_decision",
        "codex.tool_decision",
        "codex.plugin_install_elicitation_sent",
        "codex.plugin_install_suggestion",
    ]
    drop = [
        "claude_code.api_refusal",
        "codex.sse_event",
        "codex.api_request",
        "http.request",
    ]
    assert all(re.search(pattern, name) for name in keep)
    assert not any(re.search(pattern, name) for name in drop)


async def test_prometheus_metrics_count_sessions_detections_and_drops():
    """--metrics: sessions by level, detections by detector and level, actions, dropped input."""
    from monitor.metrics import Metrics, MetricsServer

    async with receiver() as (hub, otlp):
        server = MetricsServer(Metrics(hub, otlp), ("127.0.0.1", 0))
        await server.start()
        try:
            await post(otlp, "/v1/logs", (FIXTURES / "claude-code-logs.json").read_bytes())
            await post(
                otlp, "/v1/logs", (FIXTURES / "claude-code-logs.json").read_bytes()
            )  # a retry: duplicates
            await post(otlp, "/v1/logs", b"{broken")
            await hub.join()
            await hub.act("ack", CLAUDE_SESSION)
            host, port = server.server.sockets[0].getsockname()[:2]

            def scrape(path: str = "/metrics") -> tuple[int, str]:
                connection = http.client.HTTPConnection(host, port, timeout=20)
                connection.request("GET", path)
                response = connection.getresponse()
                return response.status, response.read().decode()

            status, text = await asyncio.to_thread(scrape)
            assert (await asyncio.to_thread(scrape, "/other"))[0] == 404
        finally:
            await server.stop()
    assert status == 200
    level = hub.session(CLAUDE_SESSION).level.label
    assert f'loopwatch_sessions{{status="live",level="{level}"}} 1' in text
    assert 'loopwatch_detections_total{detector="' in text
    assert 'loopwatch_actions_total{kind="ack",outcome="delivered"} 1' in text
    # Loop episodes, not repeats (issue 33 §1): the loop opened one, the acknowledgement closed it.
    assert 'loopwatch_episodes_total{change="opened"} 1' in text, text
    assert 'loopwatch_episodes_total{change="closed"} 1' in text and "loopwatch_episodes_open 0" in text
    assert 'loopwatch_dropped_events_total{reason="duplicate"} 0' in text
    assert 'loopwatch_dropped_events_total{reason="otlp_resent"} 9' in text  # the retry's records
    assert 'loopwatch_dropped_events_total{reason="bad_input"} 1' in text
    for line in text.splitlines():  # every sample line parses as name{labels} value
        assert line.startswith("#") or line.rsplit(" ", 1)[1].isdigit()


async def test_watch_headless_with_otlp_end_to_end(tmp_path: Path):
    """`loopwatch watch --headless --otlp 127.0.0.1:0 --metrics 127.0.0.1:0` as a real
    subprocess: a recorded Codex export posted to it comes out as a detection; doctor
    finds its OTLP endpoint; the note it left for doctor is gone after it stops."""
    import re

    from monitor.commands import doctor
    from tests.test_watch_headless import Watcher

    watcher = await Watcher.start(
        tmp_path,
        "--json",
        "--no-db",
        "--socket",
        str(tmp_path / "lw.sock"),
        "--otlp",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        env={"LOOPWATCH_TOKEN": "otlp-e2e-token"},
    )
    try:
        said = "".join(watcher.stderr)
        endpoint = re.search(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)", said).group(1)
        assert re.search(r"metrics at http://127\.0\.0\.1:\d+/metrics", said)
        host, port = endpoint[len("http://") :].split(":")

        def send() -> int:
            connection = http.client.HTTPConnection(host, int(port), timeout=20)
            connection.request(
                "POST",
                "/v1/logs",
                body=(FIXTURES / "codex-logs.json").read_bytes(),
                headers={"Content-Type": "application/json", "Authorization": "Bearer otlp-e2e-token"},
            )
            return connection.getresponse().status

        assert await asyncio.to_thread(send) == 200
        record = await watcher.json_until(lambda r: r["session"] == CODEX_SESSION and r["level"] != "notice")
        assert record["file"].startswith("otlp:codex_cli_rs@build-08")
        state = doctor.running_monitor_state()
        assert state["otlp"] == endpoint
        assert [c.status for c in await asyncio.to_thread(doctor.check_otlp, state)] == ["OK"]
        assert await watcher.stop() == 0
        assert doctor.running_monitor_state() == {}
    finally:
        watcher.kill()
        await watcher.proc.wait()
