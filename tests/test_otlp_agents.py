"""Claude Code's newer OTel events, its ``claude_code.tool`` spans and OpenInference spans,
sent by the real OpenTelemetry SDK exporters (OTLP/HTTP, protobuf) to a running receiver.

The payloads are built from the documented field names, as no live agent runs here:
Claude Code's from code.claude.com/docs/en/monitoring-usage (events ``tool_result``,
``assistant_response``, ``api_error``, ``api_retries_exhausted``, ``subagent_completed``;
spans ``claude_code.tool`` / ``claude_code.tool.execution`` and the ``tool.output`` span
event), OpenInference's from arize-ai.github.io/openinference/spec/semantic_conventions.html
(``openinference.span.kind``, ``tool.name``, ``input.value``, ``output.value``,
``llm.output_messages.<i>.message.role`` / ``.content``); see tests/otlp/README.md.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from monitor.events import Level
from tests.test_otlp import _resource, receiver

SESSION = "7d1f2c3b-4a5e-4f60-8b7c-9d0e1f2a3b4c"


def _watching(hub: Any) -> list[Any]:
    """Every event the pump hands the (real) hub, in order, as the hub gets it."""
    seen: list[Any] = []
    submit = hub.submit

    async def observed(events: list[Any], problems: list[Any], **kwargs: Any) -> Any:
        seen.extend(events)
        return await submit(events, problems, **kwargs)

    hub.submit = observed
    return seen


def _send_logs(endpoint: str, records: list[dict[str, Any]]) -> None:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=_resource("claude-code"))
    provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=20))
    )
    logger = provider.get_logger("com.anthropic.claude_code.events")
    for sequence, attributes in enumerate(records):
        name = attributes["event.name"]
        logger.emit(
            body=f"claude_code.{name}",
            event_name=f"claude_code.{name}",
            attributes={"session.id": SESSION, "event.sequence": sequence, **attributes},
        )
    provider.force_flush()
    provider.shutdown()


async def test_a_failed_call_without_details_is_a_failure_and_new_events_are_read():
    """``tool_result`` without OTEL_LOG_TOOL_DETAILS: ``success`` "false" and ``error_type``
    only, still a failed call (its content the category) and, repeated, a loop;
    ``assistant_response`` is an assistant message (a redacted one is nothing);
    ``api_error``, ``api_retries_exhausted`` and ``subagent_completed`` are system messages."""
    failing = [
        {
            "event.name": "tool_result",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_nodetail_{i}",
            "success": "false",
            "duration_ms": "41",
            "error_type": "ShellError",
            "decision_type": "accept",
            "decision_source": "config",
        }
        for i in range(5)
    ]
    others = [
        {"event.name": "assistant_response", "response": "Let me run the tests again.", "model": "m"},
        {"event.name": "assistant_response", "response": "<REDACTED>", "response_length": 12},
        {"event.name": "api_error", "error": "Overloaded", "status_code": 529, "attempt": 3},
        {
            "event.name": "api_retries_exhausted",
            "error": "Overloaded",
            "status_code": 529,
            "total_attempts": 10,
        },
        {"event.name": "subagent_completed", "agent_type": "Explore", "total_tool_uses": 7},
    ]
    async with receiver() as (hub, otlp):
        seen = _watching(hub)
        await asyncio.to_thread(_send_logs, otlp.endpoint, failing + others)
        await hub.join()
        results = [e for e in seen if e.kind.value == "tool_result"]
        assert len(results) == 5
        assert all(r.is_error and r.content == "ShellError" for r in results)
        messages = [(e.role, e.content) for e in seen if e.kind.value == "message"]
        assert messages == [
            ("assistant", "Let me run the tests again."),
            ("system", "API error 529 (attempt 3): Overloaded"),
            ("system", "API retries exhausted after 10 attempts 529: Overloaded"),
            ("system", "subagent Explore completed (7 tool uses)"),
        ]
        assert otlp.rejected == 0 and otlp.adapter.ignored == 1  # the redacted response
        info = hub.session(SESSION)
        assert info is not None and info.level >= Level.WARN, info.reason


def _send_claude_tool_spans(endpoint: str, failing: int, headers: dict[str, str] | None = None) -> None:
    """Claude Code's span tree per call: ``claude_code.tool`` with its ``tool.output``
    event (OTEL_LOG_TOOL_CONTENT=1) and a ``claude_code.tool.execution`` child."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=_resource("claude-code"))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", headers=headers)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("com.anthropic.claude_code")
    with tracer.start_as_current_span("claude_code.interaction", attributes={"session.id": SESSION}):
        with tracer.start_as_current_span("claude_code.tool") as tool:
            tool.set_attributes(
                {"session.id": SESSION, "tool_name": "Read", "tool_use_id": "toolu_read", "span.type": "x"}
            )
            tool.add_event("tool.output", {"content": "def main():\n    pass\n", "file_path": "app.py"})
        for i in range(failing):
            with tracer.start_as_current_span("claude_code.tool") as tool:
                call = f"toolu_make_{i}"
                tool.set_attributes(
                    {
                        "session.id": SESSION,
                        "tool_name": "Bash",
                        "tool_use_id": call,
                        "full_command": "make build",
                    }
                )
                with tracer.start_as_current_span("claude_code.tool.execution") as run:
                    run.set_attributes(
                        {
                            "tool_use_id": call,
                            "success": "false",
                            "error": "ShellError",
                            "session.id": SESSION,
                        }
                    )
    provider.force_flush()
    provider.shutdown()


async def test_claude_code_tool_spans_give_calls_with_their_output_and_failures():
    async with receiver() as (hub, otlp):
        seen = _watching(hub)
        await asyncio.to_thread(_send_claude_tool_spans, otlp.endpoint, 5)
        await hub.join()
        calls = [e for e in seen if e.kind.value == "tool_call"]
        results = {e.call_id: e for e in seen if e.kind.value == "tool_result"}
        assert [c.tool for c in calls] == ["Read"] + ["Bash"] * 5
        assert calls[0].args == {"file_path": "app.py"} and calls[1].args == {"command": "make build"}
        assert results["toolu_read"].content.startswith("def main()") and not results["toolu_read"].is_error
        assert all(results[f"toolu_make_{i}"].is_error for i in range(5))
        assert results["toolu_make_0"].content == "ShellError"
        assert hub.session(SESSION).level >= Level.WARN
        # The interaction and execution spans are no calls; the session's trace is remembered.
        assert otlp.adapter.ignored == 6 and SESSION in otlp.adapter.traces


def _send_openinference(endpoint: str, repeats: int) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=_resource("phoenix-agent", "box-2"))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    tracer = provider.get_tracer("openinference.instrumentation.smolagents")
    for _ in range(repeats):
        with tracer.start_as_current_span("ChatModel") as llm:
            llm.set_attributes(
                {
                    "openinference.span.kind": "LLM",
                    "session.id": "conv-9",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": "I will search the web for the weather.",
                }
            )
        with tracer.start_as_current_span("web_search") as tool:
            tool.set_attributes(
                {
                    "openinference.span.kind": "TOOL",
                    "session.id": "conv-9",
                    "tool.name": "web_search",
                    "input.value": json.dumps({"query": "weather in Paris"}),
                    "output.value": "Error: rate limited",
                }
            )
            tool.set_status(Status(StatusCode.ERROR, "rate limited"))
        with tracer.start_as_current_span("Chain") as chain:  # another kind: not an agent event
            chain.set_attribute("openinference.span.kind", "CHAIN")
    provider.force_flush()
    provider.shutdown()


async def test_openinference_tool_and_llm_spans_are_read():
    async with receiver() as (hub, otlp):
        seen = _watching(hub)
        await asyncio.to_thread(_send_openinference, otlp.endpoint, 4)
        await hub.join()
        session = "phoenix-agent@box-2/conv-9"
        calls = [e for e in seen if e.kind.value == "tool_call"]
        assert [(c.session, c.tool, c.args) for c in calls] == [
            (session, "web_search", {"query": "weather in Paris"})
        ] * 4
        results = [e for e in seen if e.kind.value == "tool_result"]
        assert all(r.is_error and r.content == "Error: rate limited" for r in results)
        said = [e.content for e in seen if e.kind.value == "message" and e.role == "assistant"]
        assert said == ["I will search the web for the weather."] * 4
        assert hub.session(session).level >= Level.WARN
        assert otlp.adapter.ignored == 4  # the chain spans


async def test_a_real_watch_otlp_turns_claude_code_tool_spans_into_a_detection(tmp_path):
    """The SDK's span exporter → `loopwatch watch --headless --otlp` (a subprocess) → a loop printed."""
    import re

    from tests.test_watch_headless import Watcher

    watcher = await Watcher.start(
        tmp_path,
        "--json",
        "--no-db",
        "--no-socket",
        "--otlp",
        "127.0.0.1:0",
        env={"LOOPWATCH_TOKEN": "agents-token", "LOOPWATCH_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        endpoint = re.search(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)", "".join(watcher.stderr)).group(1)
        auth = {"Authorization": "Bearer agents-token"}
        await asyncio.to_thread(_send_claude_tool_spans, endpoint, 5, auth)
        record = await watcher.json_until(lambda r: r["session"] == SESSION and r["level"] != "notice")
        assert record["file"].startswith("otlp:claude-code@")
        assert await watcher.stop() == 0
    finally:
        watcher.kill()
        await watcher.proc.wait()
