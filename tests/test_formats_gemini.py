"""Gemini CLI chats: the JSON document (real, tests/fixtures/gemini-cli) and its JSON-lines form."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from monitor.events import Kind
from monitor.formats import documents
from tests.formatkit import counts, decode_file, write_jsonl
from tests.watchkit import scanned, watched

REAL = "gemini-cli/gemini-cli-pomodoro-timer.json"


def test_the_real_chat(real_fixtures: Path):
    path = real_fixtures / REAL
    assert documents.kind_of(path) == "gemini"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 5,
        "assistant_messages": 14,
        "tool_calls": 11,
        "tool_results": 11,
        "usage": 13,
    }
    assert events[0].agent == "gemini-cli"
    assert events[0].meta["session_id"] == "0b23371a-ce2e-4b1c-81a0-44af5d94d9ce"
    failed = [e for e in events if e.kind is Kind.TOOL_RESULT and e.is_error]
    assert [(e.line, e.tool, e.meta) for e in failed] == [(18, "replace", {"status": "error"})]
    first = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert first.content.startswith("Successfully created and wrote to new file")
    assert events[1].ts == 1761077060.819  # the first message's own time


def _as_lines(real_fixtures: Path, tmp_path: Path) -> Path:
    """The real chat in the JSON-lines layout newer Gemini CLI versions append: a header, one
    message a line, a ``$set`` update, and a message appended again once its calls finished."""
    chat = json.loads((real_fixtures / REAL).read_bytes())
    header = {k: v for k, v in chat.items() if k != "messages"}
    records: list[dict] = [header]
    for message in chat["messages"]:
        if message.get("toolCalls"):
            unfinished = dict(
                message, toolCalls=[dict(c, result=None, status="executing") for c in message["toolCalls"]]
            )
            records.append(unfinished)
            records.append({"$set": {"lastUpdated": message["timestamp"]}})
        records.append(message)
    return write_jsonl(tmp_path / "session-2025-10-21T20-04-0b23371a.jsonl", records)


def test_the_json_lines_form_reads_as_the_document(real_fixtures: Path, tmp_path: Path):
    path = _as_lines(real_fixtures, tmp_path)
    events, decoder = decode_file(path)
    assert decoder.format == "gemini" and decoder.problems == []
    document, _ = documents.load(real_fixtures / REAL)
    assert counts(events) == counts(document)
    calls = [e.call_id for e in events if e.kind is Kind.TOOL_CALL]
    assert len(calls) == len(set(calls)) == 11  # a call re-appended is not a new call


def test_bad_records(tmp_path: Path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"sessionId": "s", "projectHash": "h", "startTime": "2025-10-21T20:04:20.819Z"},
            {"id": "1", "timestamp": "2025-10-21T20:05:00Z", "type": "robot", "content": "x"},
            {"id": "2", "timestamp": "yesterday", "type": "user", "content": "x"},
            {"id": "3", "timestamp": "2025-10-21T20:06:00Z", "type": "gemini", "content": [{"text": "ok"}]},
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3]
    assert counts(events) == {"session_start": 1, "assistant_messages": 1}


def test_scan_and_watch_agree(real_fixtures: Path, tmp_path: Path):
    document = tmp_path / "chats" / "session-2025-10-21T20-04-0b23371a.json"
    document.parent.mkdir()
    shutil.copy(real_fixtures / REAL, document)
    assert watched(document, tmp_path) == scanned(document)
    lines = _as_lines(real_fixtures, tmp_path)
    assert watched(lines, tmp_path / "x") == scanned(lines)
