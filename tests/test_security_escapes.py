"""No terminal escape or bidi override from agent data reaches the terminal (issue 32, item 5).

Session ids, agent and tool names, content and file names go through every
text output of the real CLI, run as a subprocess: ``scan`` (report and
bad-line reports on stderr), ``watch --headless`` (detections and its
summary), ``history``, ``history --search``, ``show`` in every format and
``doctor``.  Each carries OSC 52 (sets the clipboard), OSC 0 (sets the
title), CSI 2J (clears the screen), an 8-bit CSI and U+202E; none may come
out raw (``monitor.text.printable``), and the JSON outputs keep the values.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 30.0

#: One of each class: OSC 52 clipboard, OSC 0 title, CSI clear screen, C1 CSI, bidi override.
PAYLOAD = "\x1b]52;c;cm0gLXJmIH4=\x07|\x1b]0;pwned\x07|\x1b[2J|\x9b2J|\u202e|\u2066|\u200f|\x7f"
#: What must never be written raw.
FORBIDDEN = ["\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u2066", "\u200f"]
SESSION = "s" + PAYLOAD


def write_log(directory: Path) -> Path:
    lines = [{"type": "session_start", "session": SESSION, "agent": "ag" + PAYLOAD}]
    for i in range(4):
        call = {"cmd": "ls" + PAYLOAD}
        lines.append(
            {"type": "tool_call", "session": SESSION, "id": f"c{i}", "name": "bash" + PAYLOAD, "args": call}
        )
        lines.append({"type": "tool_result", "session": SESSION, "id": f"c{i}", "content": "out" + PAYLOAD})
    path = directory / ("log\x1b]0;title\x07\u202e.jsonl")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json" + PAYLOAD + "\n")
    return path


def env_for(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOPWATCH_CONFIG_DIR"] = str(tmp_path / "config")
    env["LOOPWATCH_DATA_DIR"] = str(tmp_path / "data")
    env.pop("LOOPWATCH_TOKEN", None)
    return env


def loopwatch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        cwd=ROOT,
        env=env_for(tmp_path),
        timeout=120,
    )


def strings(value):
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def assert_clean(what: str, data: bytes) -> str:
    text = data.decode("utf-8")
    for bad in FORBIDDEN:
        assert bad not in text, f"{what}: {bad!r} written raw: {text[:400]!r}"
    return text


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A log of every class, watched into a database by ``watch --headless``."""
    tmp_path = tmp_path_factory.mktemp("escapes")
    logs = tmp_path / "logs"
    logs.mkdir()
    log = write_log(logs)
    db = tmp_path / "lw.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", "--headless", "--from-start", "--no-socket"]
        + ["--db", str(db), str(logs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env_for(tmp_path),
    )
    try:
        deadline = time.monotonic() + DEADLINE
        first = proc.stdout.readline()  # a detection (blocks until one is printed)
        assert first and time.monotonic() < deadline
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return tmp_path, log, db, first + out, err


def test_scan_text_and_its_bad_line_reports(recorded):
    tmp_path, log, _db, _out, _err = recorded
    done = loopwatch(tmp_path, "scan", str(log))
    out = assert_clean("scan stdout", done.stdout)
    err = assert_clean("scan stderr", done.stderr)
    assert "bash␛]52;c;cm0gLXJmIH4=␇" in out and "\\u202e" in out
    assert "invalid JSON" in err and "log␛]0;title␇\\u202e.jsonl:10" in err


def test_watch_headless_detections_and_summary(recorded):
    _tmp, _log, _db, out, err = recorded
    out_text = assert_clean("watch stdout", out)
    err_text = assert_clean("watch stderr", err)
    assert "exact_repeat" in out_text and "s␛]52;" in out_text
    assert "invalid JSON" in err_text and "stopped after" in err_text


@pytest.mark.parametrize(
    "args",
    [
        ("history",),
        ("history", "--search", "out"),
        ("show", "s"),
        ("show", "s", "--events", "5"),
        ("show", "s", "--format", "markdown"),
    ],
    ids=" ".join,
)
def test_stored_text_outputs(recorded, args):
    tmp_path, _log, db, _out, _err = recorded
    done = loopwatch(tmp_path, *args, "--db", str(db))
    assert done.returncode == 0, done.stderr
    out = assert_clean(" ".join(args), done.stdout)
    assert_clean(" ".join(args) + " stderr", done.stderr)
    assert "s␛]52;c;cm0gLXJmIH4=␇" in out or "s␛]52;c;cm0gLXJmIH4=␇" in out.replace("\\", "")


@pytest.mark.parametrize(
    "args",
    [("history", "--json"), ("show", "s", "--json"), ("show", "s", "--format", "json")],
    ids=" ".join,
)
def test_json_outputs_keep_their_values(recorded, args):
    tmp_path, _log, db, _out, _err = recorded
    done = loopwatch(tmp_path, *args, "--db", str(db))
    assert done.returncode == 0, done.stderr
    out = assert_clean(" ".join(args), done.stdout)
    documents = [json.loads(line) for line in out.splitlines() if line.strip()] if "--json" in args else []
    assert SESSION in set(strings(documents or json.loads(out)))


def test_scan_json_keeps_its_values(recorded):
    tmp_path, log, _db, _out, _err = recorded
    done = loopwatch(tmp_path, "scan", "--json", str(log))
    out = assert_clean("scan --json", done.stdout)
    records = [json.loads(line) for line in out.splitlines()]
    assert records and all(r["session"] == SESSION for r in records)
    assert records[0]["file"] == str(log)


def test_doctor(recorded):
    tmp_path, log, db, _out, _err = recorded
    done = loopwatch(tmp_path, "doctor", "--db", str(db), str(log.parent), str(log))
    assert_clean("doctor stdout", done.stdout)
    assert_clean("doctor stderr", done.stderr)
    assert "title␇" in done.stdout.decode()
