"""SIGTERM under an OTLP flood stops ``watch`` without processing the backlog, losing nothing
(issue 32, item 9: what was answered 200 is not sent again by the exporter).

A real ``watch --headless --otlp --db`` is flooded by threads posting protobuf export
requests; it gets SIGTERM once requests were accepted; it stops (a hang guard here, the
time it takes in benchmarks/README.md) leaving what it had not processed in a pending
file (0600) in the state directory; ``doctor`` says so; a second ``watch --otlp`` on the
same database reads it first; then every tool result answered 200 is a row.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.test_watch_headless import ROOT, env_for

TOKEN = "otlp-stop-token"
RECORDS = 2000  # per request


def _request(thread: int, batch: int) -> bytes:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.resource.attributes.append(kv("service.name", "claude-code"))
    scope = resource.scope_logs.add()
    now = time.time_ns()
    for n in range(RECORDS):
        record = scope.log_records.add(time_unix_nano=now + n)
        # Honest work: every call different, so rows are the events, not detections.
        for key, value in (
            ("event.name", "tool_result"),
            ("session.id", f"0000{thread:04d}-0000-4000-8000-{batch:012d}"),
            ("tool_name", "Read"),
            ("tool_use_id", f"toolu_{thread}_{batch}_{n}"),
            ("success", "true"),
            ("tool_input", f'{{"file_path": "src/f{n}.py"}}'),
        ):
            record.attributes.append(kv(key, value))
    return request.SerializeToString()


def _watch(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", "--headless", "--json", "--no-socket"]
        + ["--otlp", "127.0.0.1:0", "--db", str(tmp_path / "lw.db")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
        text=True,
    )


def _endpoint(proc: subprocess.Popen, said: list[str] | None = None) -> tuple[str, int]:
    assert proc.stderr is not None
    for line in proc.stderr:
        if said is not None:
            said.append(line)
        found = re.search(r"OTLP/HTTP on http://(127\.0\.0\.1):(\d+)", line)
        if found:
            return found.group(1), int(found.group(2))
    raise AssertionError("watch did not say where OTLP listens")


def _flood(address: tuple[str, int], thread: int, stop: threading.Event, accepted: list[int]) -> None:
    connection = http.client.HTTPConnection(*address, timeout=30)
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"}
    batch = 0
    try:
        while not stop.is_set():
            connection.request("POST", "/v1/logs", body=_request(thread, batch), headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                accepted.append(RECORDS)
                batch += 1
    except (OSError, http.client.HTTPException):
        pass  # the monitor stopped: what it answered 200 is counted
    finally:
        connection.close()


def _tool_results(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return connection.execute("SELECT COUNT(*) FROM events WHERE type = 'tool_result'").fetchone()[0]


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10  # a hang guard: the time it takes is in benchmarks/README.md
    while proc.poll() is None:
        assert time.monotonic() < deadline, "watch did not stop on SIGTERM during an OTLP flood"
        time.sleep(0.02)
    return proc.communicate()[1]


def test_sigterm_under_an_otlp_flood_leaves_the_backlog_for_the_next_start(tmp_path, monkeypatch):
    from monitor.commands import doctor

    state = tmp_path / "state"
    env = {**env_for(tmp_path), "LOOPWATCH_TOKEN": TOKEN, "LOOPWATCH_STATE_DIR": str(state)}
    proc = _watch(tmp_path, env)
    stop = threading.Event()
    accepted: list[int] = []
    threads: list[threading.Thread] = []
    try:
        address = _endpoint(proc)
        threads = [threading.Thread(target=_flood, args=(address, t, stop, accepted)) for t in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while len(accepted) < 12:  # 24,000 records accepted: more than a loaded hub keeps up with
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        err = _stop(proc)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        for thread in threads:
            thread.join(60)
    assert proc.returncode == 0, err
    answered = sum(accepted)
    assert "accepted events left for the next start" in err, err
    pending = sorted(state.glob("otlp-pending-*.jsonl"))
    assert len(pending) == 1 and stat.S_IMODE(os.lstat(pending[0]).st_mode) == 0o600
    assert _tool_results(tmp_path / "lw.db") < answered  # the rest waits in the pending file

    monkeypatch.setenv("LOOPWATCH_STATE_DIR", str(state))
    [check] = doctor.check_otlp_pending()
    assert check.status == "--" and "watch --otlp" in check.detail and str(pending[0]) in check.detail

    again = _watch(tmp_path, env)
    try:
        said: list[str] = []
        _endpoint(again, said)  # said after the notes of the start
        assert any("OTLP events an earlier run accepted" in line for line in said), said
        deadline = time.monotonic() + 120
        while _tool_results(tmp_path / "lw.db") < answered:
            assert time.monotonic() < deadline and again.poll() is None, "pending records not stored"
            time.sleep(0.1)
        err = _stop(again)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 0, err
    assert _tool_results(tmp_path / "lw.db") == answered  # every record answered 200, once
    assert not list(state.glob("otlp-pending-*.jsonl"))
    assert doctor.check_otlp_pending() == []
