"""One bad record costs that record, never its OTLP request (issue 32, item 6).

``input_tokens: "inf"`` (was 413: exporters do not retry), ``"nan"`` (was
400) and a ``tool_input`` string nested 5,000 deep (was a RecursionError and
a connection closed without an answer: exporters resend the poisoned batch
for ever) sit among 50 good records.  Sent with the real OpenTelemetry SDK
exporter and as raw OTLP/JSON: the good records arrive, the bad ones are
dropped one by one and counted in an OTLP partial-success response.
"""

from __future__ import annotations

import asyncio
import json

from tests.test_otlp import post, receiver

SESSION = "3a9c1f7e-5b2d-4e8a-9f10-6c4d2b8e7a15"
DEEP = "[" * 5000 + "]" * 5000
BAD = (
    {"event.name": "api_request", "input_tokens": "inf", "output_tokens": "3"},
    {"event.name": "api_request", "input_tokens": "nan", "output_tokens": "3"},
    {"event.name": "tool_result", "tool_name": "Bash", "success": "true", "tool_input": DEEP},
)


def _good(i: int) -> dict:
    return {
        "event.name": "tool_result",
        "tool_name": "Bash",
        "success": "true",
        "tool_use_id": f"toolu_good_{i}",
        "tool_input": json.dumps({"command": f"echo {i}"}),
    }


def _records() -> list[dict]:
    records = [_good(i) for i in range(50)]
    for k, bad in enumerate(BAD):
        records.insert(10 + 15 * k, bad)
    return [dict(r, **{"session.id": SESSION, "event.sequence": n + 1}) for n, r in enumerate(records)]


def _json_body() -> bytes:
    def value(v):
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}

    logs = [
        {
            "timeUnixNano": str(1_796_000_000_000_000_000 + n),
            "attributes": [{"key": k, "value": value(v)} for k, v in record.items()],
        }
        for n, record in enumerate(_records())
    ]
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]}
    return json.dumps(
        {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": logs}]}]}
    ).encode()


def _send_with_the_sdk(endpoint: str) -> None:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(resource=Resource.create({"service.name": "claude-code"}))
    provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=20))
    )
    logger = provider.get_logger("com.anthropic.claude_code.events")
    for record in _records():
        logger.emit(body="claude_code." + record["event.name"], attributes=record)
    provider.force_flush()
    provider.shutdown()


async def test_bad_records_are_dropped_one_by_one_with_a_partial_success():
    async with receiver() as (hub, otlp):
        status, _headers, body = await post(otlp, "/v1/logs", _json_body())
        assert status == 200, body
        answer = json.loads(body)
        assert answer["partialSuccess"]["rejectedLogRecords"] == "3"
        message = answer["partialSuccess"]["errorMessage"]
        assert "not a finite number: 'inf'" in message and "nested too deep" in message
        await hub.join()
        assert otlp.accepted == 50 * 2 + 1  # each good record a call and its result; the session_start
        assert hub.session(SESSION).events == 50 * 2 + 1


async def test_the_sdk_exporter_delivers_the_good_records_of_a_poisoned_batch():
    async with receiver() as (hub, otlp):
        await asyncio.to_thread(_send_with_the_sdk, otlp.endpoint)
        await hub.join()
        assert otlp.rejected == 3 and otlp.refused == 0
        assert hub.session(SESSION).events == 50 * 2 + 1
