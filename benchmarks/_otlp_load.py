"""OTLP load for bench_overload's ``otlp`` scenario, run as its own process.

    python benchmarks/_otlp_load.py --port PORT --rate RECORDS_PER_S [--batch N] [--idle N]

``--exporters`` threads each post protobuf ``ExportLogsServiceRequest``
batches of ``--batch`` Claude Code ``tool_result`` records (every record new:
its own session among 1,000 per exporter, its own call id, so the
receiver's resend check drops none), paced to ``--rate`` records/s in all;
``--idle`` more connections are opened and held without sending anything
(strangers taking slots).  Runs until killed.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import socket
import threading
import time


def body(exporter: int, start: int, count: int) -> bytes:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.resource.attributes.extend(
        [kv("service.name", "claude-code"), kv("host.name", f"load-{exporter}")]
    )
    records = resource.scope_logs.add().log_records
    now = time.time_ns()
    for n in range(start, start + count):
        record = records.add()
        record.time_unix_nano = now + n
        record.attributes.extend(
            [
                kv("event.name", "tool_result"),
                kv("session.id", f"load-{exporter}-{n % 1000}"),
                kv("tool_name", "Bash"),
                kv("success", "true"),
                kv("tool_use_id", f"toolu_{exporter}_{n}"),
                kv("tool_input", f'{{"command": "echo {n}"}}'),
            ]
        )
    return request.SerializeToString()


def export(port: int, exporter: int, batch: int, interval: float) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    counter = itertools.count(0, batch)
    next_at = time.monotonic()
    while True:
        data = body(exporter, next(counter), batch)
        try:
            connection.request(
                "POST", "/v1/logs", body=data, headers={"Content-Type": "application/x-protobuf"}
            )
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rate", type=float, default=5000.0, help="records/s in all")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--exporters", type=int, default=4)
    parser.add_argument("--idle", type=int, default=200)
    args = parser.parse_args()
    idle = []
    for _ in range(args.idle):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", args.port))
        idle.append(sock)
    interval = args.batch * args.exporters / max(args.rate, 1e-9)
    for exporter in range(args.exporters):
        threading.Thread(target=export, args=(args.port, exporter, args.batch, interval), daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
