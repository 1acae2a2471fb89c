"""Gemini CLI saved histories (Gemini API content lists): the real one of tests/corpus/gemini-cli-history,
and the checkpoint form packages/core/src/core/logger.ts writes ({history, authType})."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from monitor.events import Kind
from monitor.formats import documents
from monitor.scan import scan
from tests.formatkit import counts

REAL = Path(__file__).parent / "corpus" / "gemini-cli-history" / "gemini-cli-2026-04-06-history.json.gz"


def test_the_real_history_calls_results_and_the_compressed_start():
    assert documents.kind_of(REAL) == "gemini"
    events, problems = documents.load(REAL)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "compaction": 1,
        "user_messages": 6,
        "tool_calls": 45,
        "tool_results": 45,
        "assistant_messages": 6,
    }
    assert events[0].agent == "gemini-cli"
    # content 1 is Gemini CLI's <session_context>, 2 the <state_snapshot> it compressed the chat into,
    # 3 its canned reply: the person speaks first at 4
    assert next(e for e in events if e.kind is Kind.COMPACTION).line == 2
    assert next(e for e in events if e.role == "user").line == 4
    denied = next(e for e in events if e.kind is Kind.TOOL_RESULT and e.line == 26)
    assert denied.is_error and "User denied execution" in denied.content
    assert sum(e.is_error for e in events if e.kind is Kind.TOOL_RESULT) == 5
    calls = {e.call_id for e in events if e.kind is Kind.TOOL_CALL}
    assert calls == {e.call_id for e in events if e.kind is Kind.TOOL_RESULT}


def test_a_checkpoint_object_reads_as_the_bare_list(tmp_path: Path):
    history = json.loads(gzip.decompress(REAL.read_bytes()))
    path = tmp_path / "checkpoint-mytag.json"
    path.write_text(json.dumps({"history": history, "authType": "oauth-personal"}, indent=2))
    assert documents.kind_of(path) == "gemini"
    events, problems = documents.load(path)
    plain, _ = documents.load(REAL)
    assert problems == [] and counts(events) == counts(plain)


def test_bad_contents_are_one_problem_each(tmp_path: Path):
    path = tmp_path / "h.json"
    contents = [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
        {"role": "model", "parts": "text"},
        "nothing",
        {"role": "robot", "parts": []},
        {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a"}}}]},
    ]
    path.write_text(json.dumps(contents))
    events, problems = documents.load(path)
    assert [p.line for p in problems] == [3, 4, 5]
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert (result.line, result.content, result.call_id) == (6, "a", "ls-2-0")  # paired by name
    report = scan([str(path)])
    assert report.problem_count == 3 and all("Traceback" not in str(p) for p in report.problems)
