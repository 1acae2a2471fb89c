"""pi-agent session JSONL: a real OpenClaw run from tests/corpus/openclaw-glm5, and bad lines."""

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
    / "openclaw-glm5"
    / "Run1-43__5ce30af3-b828-4ee5-800e-bb5ed0c8f0da.jsonl.gz"
)


def _plain(tmp_path: Path) -> tuple[Path, list[dict]]:
    raw = gzip.decompress(REAL.read_bytes())
    path = tmp_path / "session.jsonl"
    path.write_bytes(raw)
    return path, [json.loads(line) for line in raw.splitlines()]


def test_the_real_session(tmp_path: Path):
    path, records = _plain(tmp_path)
    events, decoder = decode_file(path)
    assert decoder.format == "pi-agent" and decoder.problems == []
    results = [r for r in records if r["type"] == "message" and r["message"]["role"] == "toolResult"]
    calls = [
        b
        for r in records
        if r["type"] == "message" and r["message"]["role"] == "assistant"
        for b in r["message"]["content"]
        if b["type"] == "toolCall"
    ]
    c = counts(events)
    assert c["tool_calls"] == len(calls) and c["tool_results"] == len(results)
    errors = [e for e in events if e.kind is Kind.TOOL_RESULT and e.is_error]
    assert len(errors) == 15
    # the line is the file's line: each result's record is the toolResult of its call
    for event in events:
        if event.kind is Kind.TOOL_RESULT:
            record = records[event.line - 1]["message"]
            assert record["toolCallId"] == event.call_id
            failed = record["isError"] or record.get("details", {}).get("exitCode", 0) not in (0, None)
            assert event.is_error == bool(failed)
    assert events[0].kind is Kind.SESSION_START and events[0].line == 1 and events[0].agent == "pi-agent"


def test_the_compressed_file_scans_the_same(tmp_path: Path):
    path, _ = _plain(tmp_path)
    plain, packed = scan([str(path)]), scan([str(REAL)])
    assert packed.formats[str(REAL)] == "pi-agent"
    assert (packed.events, packed.problem_count) == (plain.events, 0)


def test_bad_lines_are_one_problem_each(tmp_path: Path):
    header = {
        "type": "session",
        "version": 3,
        "id": "s",
        "timestamp": "2026-04-08T21:05:27.437Z",
        "cwd": "/w",
    }
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            header,
            {"type": "message", "message": "text"},
            {"type": "message", "message": {"role": "toolResult", "content": []}},
            {
                "type": "message",
                "message": {"role": "assistant", "content": [{"type": "toolCall", "name": 3}]},
            },
            {"type": "message", "timestamp": "soon", "message": {"role": "user", "content": "hi"}},
            "{not json",
            {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}},
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3, 4, 5, 6]
    assert all("\n" not in str(p) for p in decoder.problems)
    assert [(e.kind, e.line) for e in events] == [(Kind.SESSION_START, 1), (Kind.MESSAGE, 7)]


def test_scan_and_watch_agree(tmp_path: Path):
    from tests.watchkit import scanned, watched

    path, _ = _plain(tmp_path)
    assert watched(path, tmp_path / "w") == scanned(path)
