"""Anthropic managed-agents event logs: a real session from tests/corpus/managed-agents-openhai, and bad lines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from monitor.events import Kind
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

REAL = (
    Path(__file__).parent
    / "corpus"
    / "managed-agents-openhai"
    / "effect-of-offset-correction-and-cursor-on-mid-b3nz.jsonl.gz"
)


def _plain(tmp_path: Path) -> tuple[Path, list[dict]]:
    raw = gzip.decompress(REAL.read_bytes())
    path = tmp_path / "events.jsonl"
    path.write_bytes(raw)
    return path, [json.loads(line) for line in raw.splitlines()]


def test_the_real_session(tmp_path: Path):
    path, records = _plain(tmp_path)
    events, decoder = decode_file(path)
    assert decoder.format == "managed-agents" and decoder.problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 9,
        "tool_calls": 104,
        "usage": 95,
        "tool_results": 104,
    }
    errors = [e for e in events if e.kind is Kind.TOOL_RESULT and e.is_error]
    assert len(errors) == 4
    # the line is the file's line: a call's record is its tool_use, a result's its tool_result
    for event in events:
        if event.kind is Kind.TOOL_CALL:
            assert records[event.line - 1]["raw"]["id"] == event.call_id
        elif event.kind is Kind.TOOL_RESULT:
            raw = records[event.line - 1]["raw"]
            assert raw["tool_use_id"] == event.call_id and raw["is_error"] is event.is_error
    task = next(e for e in events if e.kind is Kind.MESSAGE)
    assert task.role == "user" and task.line == 3 and task.content.startswith("Audit the reproducibility")


def test_the_compressed_file_scans_the_same(tmp_path: Path):
    path, _ = _plain(tmp_path)
    plain, packed = scan([str(path)]), scan([str(REAL)])
    assert packed.formats[str(REAL)] == "managed-agents"
    assert (packed.events, packed.problem_count) == (plain.events, 0)


def test_scan_and_watch_agree(tmp_path: Path):
    from tests.watchkit import scanned, watched

    path, _ = _plain(tmp_path)
    assert watched(path, tmp_path / "w") == scanned(path)


def test_bad_lines_are_one_problem_each(tmp_path: Path):
    start = {"role": "system", "kind": "status_running", "time": "2026-08-16T09:36:02Z", "raw": {}}
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            start,
            {"role": "agent", "kind": "tool_use", "time": "2026-08-16T09:36:03Z", "raw": {"id": "a"}},
            {"role": "agent", "kind": "tool_result", "raw": {"is_error": True}},
            {"role": "agent", "kind": "message", "time": "later", "raw": {}, "content": "x"},
            {"role": "robot", "kind": "message", "raw": {}},
            "[1, 2",
            {"role": "agent", "kind": "message", "content": "done", "raw": {}},
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3, 4, 5, 6]
    assert all("\n" not in str(p) for p in decoder.problems)
    assert [(e.kind, e.line) for e in events] == [(Kind.SESSION_START, 1), (Kind.MESSAGE, 7)]
