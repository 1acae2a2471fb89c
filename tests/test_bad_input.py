"""Bad input is reported with file:line and skipped, never fatal; scan's exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.detect.engine import Engine
from monitor.formats.lines import LineDecoder
from monitor.scan import scan
from tests.eventkit import Script


def line(record: dict) -> bytes:
    return orjson.dumps(record) + b"\n"


GOOD_CALL = {"type": "tool_call", "id": "c1", "name": "bash", "args": {"command": "ls"}}
GOOD_RESULT = {"type": "tool_result", "id": "c1", "content": "a.txt", "is_error": False}


def run_scan_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOOPWATCH_CONFIG_DIR": os.devnull + "-no-config"}
    return subprocess.run(
        [sys.executable, "-m", "monitor", "scan", *args], input=stdin, capture_output=True, env=env
    )


def processed(monkeypatch) -> list:
    """The events the engine is given from now on (it keeps none of them whole)."""
    events: list = []
    process_many = Engine.process_many  # (what process() runs too)

    def recording(self, batch):
        batch = list(batch)
        events.extend(batch)
        return process_many(self, batch)

    monkeypatch.setattr(Engine, "process_many", recording)
    return events


def problems_by_line(report) -> dict[int, str]:
    return {p.line: p.reason for p in report.problems}


def test_malformed_json_is_reported_and_the_rest_is_used(tmp_path):
    """A broken line between good ones is reported as file:line; the good events still count."""
    path = tmp_path / "broken.jsonl"
    path.write_bytes(
        line(GOOD_CALL) + b'{"type": "tool_result", "id": "c1", "content": \n' + line(GOOD_RESULT)
    )
    report = scan([str(path)])
    assert report.events == 2
    (problem,) = report.problems
    assert problem.source == str(path) and problem.line == 2
    assert "invalid JSON" in problem.reason
    assert str(problem).startswith(f"{path}:2: ")


def test_wrong_types_are_reported_per_line(tmp_path):
    """Valid JSON with the wrong types: each line reported with the field at fault."""
    records = [
        {"type": "tool_call", "id": "c1", "name": "bash", "args": ["ls"]},
        {"type": "message", "role": "robot", "content": "hi"},
        {"type": "tool_result", "id": "c1", "content": "x", "is_error": "yes"},
        {"type": "message", "role": "assistant", "content": 42},
        {"type": "usage", "cost_usd": "a lot"},
        {"type": "message", "role": "user", "content": "hi", "ts": True},
        {"type": "tool_call", "id": "c2", "name": "", "args": {}},
        {"type": "session_start", "session": "", "agent": "x"},
        {"type": "message", "role": "user", "content": "fine"},
    ]
    path = tmp_path / "types.jsonl"
    path.write_bytes(b"".join(line(r) for r in records) + b'[1, 2]\n"just a string"\n')
    report = scan([str(path)])
    reasons = problems_by_line(report)
    assert sorted(reasons) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11]
    assert "tool_call.args" in reasons[1]
    assert "message.role" in reasons[2]
    assert "is_error" in reasons[3]
    assert "message.content" in reasons[4]
    assert "cost_usd" in reasons[5]
    assert "ts" in reasons[6]
    assert "tool_call.name" in reasons[7]
    assert "session" in reasons[8]
    assert "expected a JSON object" in reasons[10] and "expected a JSON object" in reasons[11]
    assert report.events == 1


def test_non_utf8_bytes_are_replaced_and_reported(tmp_path, monkeypatch):
    """Invalid UTF-8 inside a record: reported with its line, and the record is still used."""
    events = processed(monkeypatch)
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        line(GOOD_CALL) + b'{"type": "message", "role": "assistant", "content": "caf\xe9 cr\xe8me"}\n'
    )
    report = scan([str(path)])
    assert report.events == 2
    (problem,) = report.problems
    assert problem.line == 2 and "UTF-8" in problem.reason
    message = events[-1]
    assert message.content == "caf\ufffd cr\ufffdme"


def test_binary_garbage_never_raises(tmp_path):
    """A file of random bytes is one problem (binary, not a log), not an exception."""
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(bytes(range(256)) * 40 + b"\n\x00\x01\x02\n{{{{\n")
    report = scan([str(path)])
    assert report.events == 0 and report.problem_count == 1
    assert "not a supported format: binary data" in report.problems[0].reason


def test_a_valid_10_mb_line_is_processed_quickly(tmp_path):
    """One 10 MB message (and a 10 MB tool result) are real events; detection stays cheap."""
    big = "all work and no play makes jack a dull boy " * (10 * 1024 * 1024 // 43)
    path = tmp_path / "big.jsonl"
    path.write_bytes(
        line(GOOD_CALL)
        + line({"type": "tool_result", "id": "c1", "content": big, "is_error": False})
        + line({"type": "message", "role": "assistant", "content": big})
    )
    engine = Engine()
    decoder = LineDecoder(str(path))
    events = []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        got, problem = decoder.feed(raw, n)
        assert problem is None
        events.extend(got)
    assert len(events) == 3 and len(events[2].content) >= 10 * 1024 * 1024 - 64
    costs = []
    for event in events:
        started = time.perf_counter()
        engine.process(event).detections
        costs.append(time.perf_counter() - started)
    # Not a timing assertion on the machine's speed: a linear scan of 10 MB in pure Python
    # would take far longer than this generous bound; the benchmark measures the real cost.
    assert max(costs) < 0.5, costs


def test_a_10_mb_garbage_line_is_reported(tmp_path):
    """A 10 MB line that is not JSON is one problem at its line; the next line still works."""
    path = tmp_path / "junk.jsonl"
    path.write_bytes(line(GOOD_CALL) + b"x" * (10 * 1024 * 1024) + b"\n" + line(GOOD_RESULT))
    report = scan([str(path)])
    assert report.events == 2
    assert list(problems_by_line(report)) == [2]


def test_oversized_line_is_skipped_with_its_size(tmp_path):
    """A line over the decoder's limit is not parsed (nor held in memory); it is reported."""
    from monitor.scan import read_events

    path = tmp_path / "huge.jsonl"
    path.write_bytes(
        line(GOOD_CALL) + line({"type": "message", "role": "user", "content": "y" * 5000}) + line(GOOD_RESULT)
    )
    decoder = LineDecoder(str(path), max_line_bytes=1024)
    events = list(read_events(str(path), decoder))
    assert len(events) == 2
    (problem,) = decoder.problems
    assert problem.line == 2 and "exceeds the 1,024-byte limit" in problem.reason


def test_empty_and_blank_files(tmp_path):
    """An empty file and a file of blank lines are fine: no events, no problems, exit 0."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n   \n\r\n")
    report = scan([str(empty), str(blank)])
    assert report.events == 0 and report.problem_count == 0 and report.exit_code == 0
    result = run_scan_cli(str(empty))
    assert result.returncode == 0 and result.stderr == b""


def test_truncated_last_line_is_reported_with_its_number(tmp_path):
    """A file cut mid-record (an agent killed while writing) reports the last line, keeps the rest."""
    path = tmp_path / "cut.jsonl"
    path.write_bytes(line(GOOD_CALL) + line(GOOD_RESULT) + b'{"type": "message", "role": "assis')
    report = scan([str(path)])
    assert report.events == 2
    assert list(problems_by_line(report)) == [3]


def test_unknown_types_and_extra_fields_are_not_problems(tmp_path, monkeypatch):
    """Unknown record types are counted and skipped; unknown fields go to meta."""
    events = processed(monkeypatch)
    path = tmp_path / "extra.jsonl"
    path.write_bytes(
        line({"type": "session_start", "agent": "a"})
        + line({"type": "heartbeat", "n": 1})
        + line({**GOOD_CALL, "model": "x-1", "cwd": "/repo"})
    )
    report = scan([str(path)])
    assert report.problem_count == 0 and report.events == 2
    call = events[-1]
    assert call.meta == {"model": "x-1", "cwd": "/repo"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=20))
def test_random_bytes_never_raise(lines):
    """Whatever bytes arrive, the decoder returns events or a problem, and the engine copes."""
    decoder = LineDecoder("fuzz.jsonl")
    engine = Engine()
    for n, raw in enumerate(lines, 1):
        events, problem = decoder.feed(raw, n)
        assert problem is None or problem.line == n
        engine.process_many(events)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "type",
                "session",
                "ts",
                "role",
                "content",
                "id",
                "name",
                "args",
                "is_error",
                "cost_usd",
                "pid",
                "agent",
                "status",
                "meta",
            ]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(allow_nan=True),
            st.text(max_size=20),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
            st.sampled_from(
                [
                    "message",
                    "tool_call",
                    "tool_result",
                    "usage",
                    "session_start",
                    "session_end",
                    "compaction",
                    "user",
                    "assistant",
                ]
            ),
        ),
    )
)
def test_random_records_never_raise(record):
    """Records with any mix of fields and types decode to events or a problem, never an exception."""
    decoder = LineDecoder("fuzz.jsonl")
    raw = json.dumps(record).encode()  # NaN and 65-bit integers included: orjson rejects them
    events, problem = decoder.feed(raw, 1)
    Engine().process_many(events)


# -- exit codes of the real command --------------------------------------------------------------


def test_exit_0_for_honest_input_even_with_bad_lines(tmp_path):
    """Honest log with a malformed line: exit 0, and stderr names file:line and why."""
    path = tmp_path / "honest.jsonl"
    path.write_bytes(line(GOOD_CALL) + b"not json\n" + line(GOOD_RESULT))
    result = run_scan_cli(str(path))
    assert result.returncode == 0, result.stderr
    assert f"{path}:2: invalid JSON".encode() in result.stderr


def test_exit_1_when_something_reached_warn(tmp_path):
    """A looping log: exit 1; --json gives one object per episode with file and lines, and
    --json --detections one per detection with file and line."""
    s = Script()
    for _ in range(3):
        s.call("bash", {"command": "ls build/"}, "ls: cannot access 'build/': No such file or directory")
    path = s.write(tmp_path / "loop.jsonl")
    result = run_scan_cli("--json", str(path))
    assert result.returncode == 1
    (episode,) = [orjson.loads(x) for x in result.stdout.splitlines()]
    assert (episode["file"], episode["first_line"], episode["detector"]) == (str(path), 6, "exact_repeat")
    result = run_scan_cli("--json", "--detections", str(path))
    assert result.returncode == 1
    detections = [orjson.loads(x) for x in result.stdout.splitlines()]
    assert detections and {"file", "line", "session", "detector", "level", "score", "message"} <= set(
        detections[0]
    )
    assert detections[0]["file"] == str(path) and detections[0]["line"] == 6


def test_exit_1_from_stdin():
    """`-` reads standard input through the same engine."""
    s = Script()
    for _ in range(3):
        s.call("bash", {"command": "ls build/"}, "nothing")
    result = run_scan_cli("-", stdin=s.jsonl())
    assert result.returncode == 1 and b"exact_repeat" in result.stdout


def test_exit_2_for_bad_usage_and_unreadable_paths(tmp_path):
    """No path, a missing file, an unreadable file, a bad --min-level or --format: exit 2 with a message."""
    missing = run_scan_cli(str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and b"nope.jsonl" in missing.stderr and b"cannot read" in missing.stderr
    assert run_scan_cli().returncode == 2
    assert run_scan_cli("--min-level", "loud", "-", stdin=b"").returncode == 2
    assert run_scan_cli("--format", "klingon", "-", stdin=b"").returncode == 2
    if os.geteuid() != 0:  # root can read anything
        locked = tmp_path / "locked.jsonl"
        locked.write_bytes(line(GOOD_CALL))
        locked.chmod(0)
        result = run_scan_cli(str(locked))
        assert result.returncode == 2 and b"locked.jsonl" in result.stderr


def test_summary_of_arguments_with_an_integer_past_64_bits():
    """orjson cannot write integers past 64 bits: a call's summary still shows them."""
    from monitor.events import Event, Kind

    event = Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": {"n": -(2**63) - 1}})
    assert str(-(2**63) - 1) in event.summary(200)
