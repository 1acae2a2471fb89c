"""Cursor agent transcripts.

No real transcript was found in public repositories and Cursor is closed source, so these records are
written in the shape several independent public readers of real transcripts describe
(tenequm/pond#207, AgentWorkforce/relayhistory#198, caura-ai/caura#612,
Dicklesworthstone/coding_agent_session_search#306): ``{role, message: {content}}`` lines and
``turn_ended`` markers, no times, tool results mostly left out.
"""

from __future__ import annotations

from pathlib import Path

from monitor.events import Kind
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

TRANSCRIPT = [
    {
        "role": "user",
        "message": {
            "content": [
                {
                    "type": "text",
                    "text": "<timestamp>Monday, Jul 27, 2026</timestamp>\n<user_query>\nlist the files here\n</user_query>",
                }
            ]
        },
    },
    {
        "role": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "I'll run ls."},
                {"type": "tool_use", "name": "Shell", "input": {"command": "ls", "working_directory": "/w"}},
            ]
        },
    },
    {"role": "assistant", "message": {"content": [{"type": "text", "text": "There are two entries."}]}},
    {"type": "turn_ended", "status": "success"},
    {"role": "user", "message": {"content": "<user_query>\nnow run the tests\n</user_query>"}},
    {
        "role": "assistant",
        "message": {
            "content": [
                {"type": "redacted"},
                {"type": "tool_use", "id": "t9", "name": "Shell", "input": {"command": "pytest"}},
                {"type": "tool_result", "tool_use_id": "t9", "content": "1 failed", "is_error": True},
            ]
        },
    },
    {"type": "turn_ended", "status": "error", "error": "User aborted request"},
]


def test_a_transcript_its_prompts_calls_and_aborted_turn(tmp_path: Path):
    path = write_jsonl(tmp_path / "0b6c9e4e-1f8a-4c44-9c3b-6f2f5b1d2a10.jsonl", TRANSCRIPT)
    events, decoder = decode_file(path)
    assert decoder.format == "cursor" and decoder.problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 2,
        "assistant_messages": 2,
        "tool_calls": 2,
        "tool_results": 1,
        "system_messages": 1,
    }
    assert events[0].agent == "cursor" and events[0].session == "0b6c9e4e-1f8a-4c44-9c3b-6f2f5b1d2a10"
    users = [e.content for e in events if e.role == "user"]
    assert users == ["list the files here", "now run the tests"]
    calls = [(e.line, e.tool, e.call_id) for e in events if e.kind is Kind.TOOL_CALL]
    assert calls == [(2, "Shell", "cursor-2-1"), (6, "Shell", "t9")]
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert (result.call_id, result.is_error) == ("t9", True)
    assert events[-1].content == "User aborted request"


def test_bad_records_are_one_problem_each(tmp_path: Path):
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            TRANSCRIPT[0],
            {"role": "assistant", "message": "text"},
            {"type": "summary"},
            "not json",
            TRANSCRIPT[2],
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.format == "cursor"
    assert [p.line for p in decoder.problems] == [2, 3, 4]
    assert counts(events)["assistant_messages"] == 1
    report = scan([str(path)])
    assert all("Traceback" not in str(p) for p in report.problems)


#: Records in the shapes public readers quote from real transcripts on their disks: ``[REDACTED]`` text blocks
#: beside tool calls with no ids (agentgrep's cursor-cli backend notes; a trimmed real transcript quoted in
#: tests of public readers), and the ``aborted`` turn end a single Escape writes (ctxrs/ctx#56 repro:
#: ``{"type":"turn_ended","status":"aborted","error":"User aborted/interrupted manually."}``).
OBSERVED = [
    {
        "role": "user",
        "message": {"content": [{"type": "text", "text": "<user_query>\nfix the build\n</user_query>"}]},
    },
    {
        "role": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "[REDACTED]"},
                {"type": "tool_use", "name": "Grep", "input": {"path": "/w/server.js", "pattern": "handle"}},
                {
                    "type": "tool_use",
                    "name": "Shell",
                    "input": {"command": "node --check /w/server.js", "description": "Verify syntax"},
                },
            ]
        },
    },
    {"role": "assistant", "message": {"content": [{"type": "text", "text": "[REDACTED]"}]}},
    {"type": "turn_ended", "status": "aborted", "error": "User aborted/interrupted manually."},
]


def test_redacted_text_is_no_message_and_an_aborted_turn_is_one(tmp_path: Path):
    path = write_jsonl(tmp_path / "5e12d300-1f90-4409-b098-1f5da9ca345d.jsonl", OBSERVED)
    events, decoder = decode_file(path)
    assert decoder.format == "cursor" and decoder.problems == []
    assert counts(events) == {"session_start": 1, "user_messages": 1, "tool_calls": 2, "system_messages": 1}
    assert [e.content for e in events if e.kind is Kind.MESSAGE] == [
        "fix the build",
        "User aborted/interrupted manually.",
    ]
    # Repeated "[REDACTED]" placeholders are not the agent saying the same thing again and again.
    assert not any(e.content == "[REDACTED]" for e in events)
