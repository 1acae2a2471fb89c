"""Gemini CLI ``--output-format stream-json``: the real runs of tests/corpus/gemini-cli-metaphi (whose
harness wrote the prompt as a first, native-looking line), and lines as Gemini CLI writes them."""

from __future__ import annotations

import json
from pathlib import Path

from monitor.events import Kind
from monitor.formats.lines import LineDecoder
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

CORPUS = Path(__file__).parent / "corpus" / "gemini-cli-metaphi"
REAL = CORPUS / "figma-eval-010ac575-1280-41fe-be26-130311bef5ed.jsonl.gz"

#: As google-gemini/gemini-cli at commit 5411f113 writes them (packages/core/src/output/
#: stream-json-formatter.ts; the record types in types.ts, JsonStreamEvent).
OWN = [
    {"type": "init", "timestamp": "2026-01-30T06:18:17.750Z", "session_id": "abc", "model": "gemini-3-pro"},
    {"type": "message", "timestamp": "2026-01-30T06:18:17.751Z", "role": "user", "content": "fix it"},
    {
        "type": "message",
        "timestamp": "2026-01-30T06:18:18.000Z",
        "role": "assistant",
        "content": "I'll",
        "delta": True,
    },
    {
        "type": "message",
        "timestamp": "2026-01-30T06:18:18.100Z",
        "role": "assistant",
        "content": " look",
        "delta": True,
    },
    {
        "type": "tool_use",
        "timestamp": "2026-01-30T06:18:19Z",
        "tool_name": "run_shell_command",
        "tool_id": "t1",
        "parameters": {"command": "ls"},
    },
    {
        "type": "tool_result",
        "timestamp": "2026-01-30T06:18:20Z",
        "tool_id": "t1",
        "status": "error",
        "error": {"type": "shell", "message": "exit 2"},
    },
    {"type": "error", "timestamp": "2026-01-30T06:18:21Z", "severity": "warning", "message": "loop detected"},
    {
        "type": "result",
        "timestamp": "2026-01-30T06:18:22Z",
        "status": "success",
        "stats": {
            "total_tokens": 30,
            "input_tokens": 20,
            "output_tokens": 10,
            "cached": 5,
            "input": 15,
            "duration_ms": 5,
            "tool_calls": 1,
            "models": {},
        },
    },
]


def test_the_real_runs_are_stream_json_not_native():
    for run in sorted(CORPUS.glob("*.jsonl.gz")):
        report = scan([str(run)])
        assert report.formats[str(run)] == "gemini-stream", run
        assert report.problems == [], run
    report = scan([str(REAL)])
    assert report.events == 149  # read as native, 78: the calls (tool_use) were skipped


def test_its_own_output_first_line_init(tmp_path: Path):
    events, decoder = decode_file(write_jsonl(tmp_path / "run.jsonl", OWN))
    assert decoder.format == "gemini-stream" and decoder.problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 2,
        "tool_calls": 1,
        "tool_results": 1,
        "system_messages": 1,
        "usage": 1,
        "session_end": 1,
    }
    assert events[0].meta == {"session_id": "abc", "model": "gemini-3-pro"} and events[0].session == "run"
    chunks = [e.meta for e in events if e.role == "assistant"]
    assert chunks == [{}, {"continues": True}]  # one response in two chunks
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert (result.is_error, result.content, result.tool) == (True, "exit 2", "run_shell_command")


def test_a_native_log_of_bare_messages_stays_native(tmp_path: Path):
    lines = [{"type": "message", "role": "user", "content": f"m{n}"} for n in range(100)]
    lines.append({"type": "tool_use", "tool_name": "x", "tool_id": "1"})  # too late to change its mind
    events, decoder = decode_file(write_jsonl(tmp_path / "n.jsonl", lines))
    assert decoder.format == "native" and len(events) == 100


def test_a_prompt_line_first_is_handed_over_with_the_same_events(tmp_path: Path):
    prompt = {"type": "message", "role": "user", "content": "the task", "ts": "2026-01-30T06:18:17.750897"}
    path = write_jsonl(tmp_path / "p.jsonl", [prompt, *OWN[:1], *OWN[4:6]])
    decoder = LineDecoder(str(path))
    raw = path.read_bytes().splitlines()
    events = [e for n, line in enumerate(raw, 1) for e in decoder.feed(line, n, 0.0)[0]]
    assert decoder.format == "gemini-stream"
    assert [(e.kind.value, e.line) for e in events] == [
        ("message", 1),
        ("session_start", 2),
        ("tool_call", 3),
        ("tool_result", 4),
    ]


def test_bad_records_are_one_problem_each(tmp_path: Path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            OWN[0],
            {"type": "tool_use", "tool_name": 3, "tool_id": "x"},
            {"type": "message", "role": "robot"},
            {"type": "what"},
            {"type": "tool_result", "status": "success"},
            json.dumps([1]),
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3, 4, 5, 6]
    assert all("Traceback" not in p.reason for p in decoder.problems)
