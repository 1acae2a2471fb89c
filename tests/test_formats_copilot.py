"""GitHub Copilot CLI session state: two real sessions from tests/fixtures/copilot-cli, and bad records."""

from __future__ import annotations

from pathlib import Path

from monitor.events import Kind
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

STATE = Path(__file__).parent / "fixtures" / "copilot-cli" / "session-state"
FAILING = STATE / "049410b4-c1df-44ee-87a5-caa1c349091e" / "events.jsonl"
GREP = STATE / "f27af309-ccf3-41da-8f07-b3dcbffd4c90" / "events.jsonl"


def test_a_real_session_its_calls_once_and_their_failed_results():
    events, decoder = decode_file(FAILING)
    assert decoder.format == "copilot" and decoder.problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "tool_calls": 2,
        "tool_results": 2,
        "assistant_messages": 1,
        "usage": 1,
        "session_end": 1,
    }
    assert {e.session for e in events} == {"049410b4-c1df-44ee-87a5-caa1c349091e"}
    start = events[0]
    assert start.agent == "copilot-cli" and start.meta == {"copilot_version": "1.0.78", "cwd": "/work"}
    user = next(e for e in events if e.role == "user")
    assert user.content.startswith("In src/orders.py") and "<current_datetime>" not in user.content
    # the calls come from toolRequests (line 6); tool.execution_start (7, 8) adds none
    calls = [(e.line, e.tool, e.call_id) for e in events if e.kind is Kind.TOOL_CALL]
    assert calls == [(6, "view", "call_fpjobf9a"), (6, "view", "call_de798t9c")]
    results = [(e.line, e.is_error, e.content, e.tool) for e in events if e.kind is Kind.TOOL_RESULT]
    assert results == [(9, True, '"path": Required', "view"), (10, True, '"path": Required', "view")]
    usage = next(e for e in events if e.kind is Kind.USAGE)
    assert (usage.input_tokens, usage.output_tokens) == (4100, 978)  # the shutdown's modelMetrics
    assert events[-1].status == "routine"


def test_a_successful_result_is_its_content():
    events, decoder = decode_file(GREP)
    assert decoder.problems == []
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert (result.content, result.is_error, result.tool) == ("No matches found.", False, "grep")


def test_scan_finds_the_session_state_folder():
    report = scan([str(STATE)])
    assert report.files == 2 and set(report.formats.values()) == {"copilot"} and report.problems == []


def test_bad_records_are_one_problem_each(tmp_path: Path):
    start = {
        "type": "session.start",
        "data": {"sessionId": "s"},
        "id": "1",
        "timestamp": "2026-08-05T20:40:13Z",
    }
    path = write_jsonl(
        tmp_path / "events.jsonl",
        [
            start,
            {
                "type": "tool.execution_complete",
                "data": {"success": True},
                "timestamp": "2026-08-05T20:40:14Z",
            },
            {"type": "assistant.message", "data": {"toolRequests": [{"name": "view"}]}, "timestamp": "x"},
            {"type": "tool.execution_start", "data": {"toolCallId": "t", "toolName": "bash"}, "timestamp": 3},
            "not json",
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3, 5]
    assert all("Traceback" not in p.reason for p in decoder.problems)
    assert [e.kind for e in events] == [Kind.SESSION_START, Kind.TOOL_CALL]
