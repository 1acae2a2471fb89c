"""Big OTLP batches are answered once decoded, and a resent batch is taken once (issue 32, item 8).

Before, a request was answered only after the hub had queued all of its
events (50,000 spans: 30.8 s, beyond the SDK exporter's 10 s timeout, so
it resent the batch), and the resend was stored again (the engine's
per-session memory of 256 call ids is no match for a whole batch).  Here
the hub is held (not started) while a batch far bigger than its queue is
posted: the answer must come anyway; then the real SDK exporter sends the
same finished spans twice: every span is processed once.
"""

from __future__ import annotations

import asyncio
import contextlib

from monitor.config import build_config
from monitor.hub import Hub
from monitor.sources.otlp import OtlpReceiver
from tests.test_otlp import post

CONVERSATION = "conv-batch"
SPANS = 5_000  # 10,000 events: five times what the hub's queue holds


def _finished_spans(count: int) -> list:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "my-agent", "host.name": "w1"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("my-agent")
    for i in range(count):
        with tracer.start_as_current_span(
            "execute_tool bash",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "bash",
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.conversation.id": CONVERSATION,
                "gen_ai.tool.call.arguments": f'{{"cmd": "echo {i}"}}',
            },
        ):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def _export_twice(endpoint: str, spans: list) -> list:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=10)
    try:
        return [exporter.export(spans), exporter.export(spans)]  # the second: a resend
    finally:
        exporter.shutdown()


def _body(spans: list) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans).SerializeToString()


@contextlib.asynccontextmanager
async def held_hub():
    hub = Hub(build_config({}))  # not started: nothing leaves its queue yet
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), loopback_needs_token=False)
    await otlp.start()
    try:
        yield hub, otlp
    finally:
        if not hub.started:
            await hub.start()
        await otlp.stop()
        await hub.stop()


async def test_a_batch_bigger_than_the_hub_queue_is_answered_before_it_is_processed():
    spans = await asyncio.to_thread(_finished_spans, SPANS)
    async with held_hub() as (hub, otlp):
        status, _headers, _reply = await post(
            otlp, "/v1/traces", await asyncio.to_thread(_body, spans), content_type="application/x-protobuf"
        )
        assert status == 200
        assert hub.events_total == 0 and otlp.backlog_events > 0  # answered first, processed after
        await hub.start()
        await otlp.flushed()
        await hub.join()
        session = next(s for s in hub.sessions() if s.id.endswith("/" + CONVERSATION))
        assert session.events == 2 * SPANS + 1  # every call and result, and the session start


async def test_a_resent_batch_is_processed_once():
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = await asyncio.to_thread(_finished_spans, 2_000)
    async with held_hub() as (hub, otlp):
        await hub.start()
        results = await asyncio.to_thread(_export_twice, otlp.endpoint, spans)
        assert results == [SpanExportResult.SUCCESS, SpanExportResult.SUCCESS]
        await otlp.flushed()
        await hub.join()
        assert otlp.duplicates == 2_000
        session = next(s for s in hub.sessions() if s.id.endswith("/" + CONVERSATION))
        assert session.events == 2 * 2_000 + 1
        assert hub.engine.duplicates == 0  # not even reaching the engine's own check
