"""``loopwatch scan`` shows a progress bar on stderr only when stderr is a terminal
(a real pseudo-terminal here), and ``--quiet`` silences it; the report on stdout
is the same either way."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from monitor.progress import Progress

ROOT = Path(__file__).resolve().parent.parent


def write_logs(directory: Path, files: int = 3, calls: int = 400) -> None:
    directory.mkdir()
    for n in range(files):
        records = [{"type": "session_start", "session": f"s{n}", "agent": "a", "ts": 1.0}]
        for i in range(calls):
            records.append(
                {
                    "type": "tool_call",
                    "session": f"s{n}",
                    "id": f"c{i}",
                    "name": "read_file",
                    "args": {"path": f"f{i}.py"},
                    "ts": 2.0 + i,
                }
            )
            records.append(
                {
                    "type": "tool_result",
                    "session": f"s{n}",
                    "id": f"c{i}",
                    "content": f"contents {i}",
                    "ts": 2.5 + i,
                }
            )
        (directory / f"s{n}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def run_scan(*args: str, tty: bool) -> tuple[int, str, str]:
    """Run the CLI; stderr is a pseudo-terminal when ``tty``. Returns (status, stdout, stderr)."""
    if not tty:
        done = subprocess.run(
            [sys.executable, "-m", "monitor", "scan", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", "scan", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
        )
        os.close(slave)
        out = proc.stdout.read()
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        status = proc.wait(timeout=120)
    finally:
        os.close(master)
    return status, out, b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal_only_and_quiet_silences_it(tmp_path):
    logs = tmp_path / "logs"
    write_logs(logs)
    status, out, err = run_scan(str(logs), tty=True)
    assert status == 0 and "files" in err and "events" in err and "left" in err and "█" in err
    assert err.rstrip("\r\n").endswith("\x1b[K")  # the bar is erased at the end
    quiet_status, quiet_out, quiet_err = run_scan(str(logs), "--quiet", tty=True)
    assert quiet_status == 0 and "files" not in quiet_err and quiet_out == out
    piped_status, piped_out, piped_err = run_scan(str(logs), tty=False)
    assert piped_status == 0 and piped_err == "" and piped_out == out


def test_progress_line_counts_files_events_rate_and_time_left():
    stream = io.StringIO()
    times = iter([0.0, 10.0, 10.05, 20.0])
    progress = Progress(stream, enabled=True, clock=lambda: next(times))
    progress.update(1, 4, 250, 1000, 5000)  # at t=10: a quarter in 10 s
    progress.update(1, 4, 260, 1000, 5100)  # 50 ms later: not redrawn
    assert progress.drawn == 1
    line = stream.getvalue()
    assert "25%" in line and "1/4 files" in line and "5,000 events" in line and "500/s" in line
    assert "0:30 left" in line
    progress.finish()
    assert stream.getvalue().endswith("\r\x1b[K")
    assert not Progress(io.StringIO()).enabled  # not a terminal: nothing drawn


def test_a_sharded_scan_counts_every_event_read_in_its_progress(tmp_path):
    """Worker 0 draws the progress line but decodes only its own sessions'
    records: the others' it passed over are counted too, as one process
    counts them."""
    from monitor.scan import scan_sharded

    logs = tmp_path / "logs"
    write_logs(logs, files=1, calls=400)
    log = next(logs.glob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for n, record in enumerate(records):
        record["session"] = f"s{n % 7}"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    stream = io.StringIO()
    ticks = iter(range(10_000))
    progress = Progress(stream, enabled=True, clock=lambda: float(next(ticks)))
    report = scan_sharded([str(log)], None, None, 2, progress)
    assert report.events == len(records)
    assert f"{len(records):,} events" in stream.getvalue()
