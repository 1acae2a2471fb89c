"""Codex rollouts: the real fixtures decode cleanly, and each record kind maps as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.events import Kind, Level
from monitor.formats import sniff
from monitor.formats.codex import CodexDecoder, parse_arguments, parse_output, rollout_session_id
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

POLLING = "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"

#: Per fixture: tool calls (function + custom), results, user turns (event_msg
#: user_message) and assistant messages, counted by hand from the files.
EXPECTED = {
    POLLING: {"tool_calls": 104, "tool_results": 104, "user_messages": 5, "assistant_messages": 43},
    "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl": {
        "tool_calls": 118,
        "tool_results": 118,
        "user_messages": 1,
        "assistant_messages": 17,
    },
    "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl": {
        "tool_calls": 1,
        "tool_results": 0,
        "user_messages": 1,
        "assistant_messages": 1,
    },
    "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl": {
        "tool_calls": 5,
        "tool_results": 5,
        "user_messages": 1,
        "assistant_messages": 6,
    },
}


def _item(kind: str, payload: dict, ts: str = "2026-02-23T11:00:00Z") -> dict:
    return {"timestamp": ts, "type": kind, "payload": payload}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_with_expected_counts(real_fixtures: Path, name: str):
    """Every Codex fixture decodes with zero problems into the counts read by hand."""
    events, decoder = decode_file(real_fixtures / "codex" / name)
    assert decoder.format == "codex"
    assert decoder.problem_count == 0, [str(p) for p in decoder.problems]
    tally = counts(events)
    for key, value in EXPECTED[name].items():
        assert tally.get(key, 0) == value, (key, tally)
    start = events[0]
    assert start.kind is Kind.SESSION_START and start.agent == "codex"
    assert start.meta["version"] == "0.104.0-alpha.1"
    assert {e.session for e in events} == {rollout_session_id(name)}


def test_session_id_from_meta_and_file_name():
    """The session id is session_meta's payload.id, which the file name repeats."""
    assert (
        rollout_session_id("/x/rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl")
        == "019c8a4c-ed82-79a1-aa28-7738fc5ab61a"
    )
    assert rollout_session_id("notes.jsonl") is None


def test_calls_pair_with_outputs_by_call_id(real_fixtures: Path):
    """function_call and custom_tool_call become calls; their outputs results with the same id."""
    events, _ = decode_file(real_fixtures / "codex" / POLLING)
    calls = {e.call_id: e for e in events if e.kind is Kind.TOOL_CALL}
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert all(r.call_id in calls and r.tool == calls[r.call_id].tool for r in results)
    assert sum(1 for c in calls.values() if c.tool == "apply_patch") == 22
    # The publisher redacted the arguments, so they are not JSON: kept as text.
    write_stdin = [c for c in calls.values() if c.tool == "write_stdin"]
    assert write_stdin[0].args == {"arguments": "[REDACTED_ARGUMENTS len=78 sha=28a0e1d5]"}


def test_polling_stretch_is_seven_identical_calls_with_moving_output(real_fixtures: Path):
    """Lines 127–163 hold seven identical write_stdin calls whose outputs (the last
    one on line 164) all differ."""
    events, _ = decode_file(real_fixtures / "codex" / POLLING)
    calls = [e for e in events if e.kind is Kind.TOOL_CALL and 127 <= e.line <= 163]
    ids = {c.call_id for c in calls}
    results = [e for e in events if e.kind is Kind.TOOL_RESULT and e.call_id in ids]
    assert len(calls) == 7 and {c.tool for c in calls} == {"write_stdin"}
    assert len({json.dumps(c.args) for c in calls}) == 1
    assert len(results) == 7 and len({r.content for r in results}) == 7


def test_polling_stretch_stays_below_warn(real_fixtures: Path):
    """Legitimate polling (same call, moving output) is never flagged at warn or above."""
    report = scan([str(real_fixtures / "codex" / POLLING)])
    in_stretch = [
        (d.detector, d.line, d.level.label)
        for d in report.detections
        if 127 <= d.line <= 165 and d.level >= Level.WARN
    ]
    assert not in_stretch


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_honest_fixtures_do_not_warn(real_fixtures: Path, name: str):
    """The real Codex sessions are honest work: nothing reaches warn."""
    report = scan([str(real_fixtures / "codex" / name)])
    warned = [(d.detector, d.line, d.message) for d in report.detections if d.level >= Level.WARN]
    assert not warned


def test_user_turns_come_from_user_message_events(tmp_path: Path):
    """What the person typed (event_msg user_message) is the user turn; the response-item
    copy, AGENTS.md / environment context and developer messages are not."""
    path = write_jsonl(
        tmp_path / "rollout-x.jsonl",
        [
            _item("session_meta", {"id": "sess-1", "cli_version": "0.50.0", "cwd": "/w"}),
            _item(
                "response_item",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "be careful"}],
                },
            ),
            _item(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "<environment_context>…"}],
                },
            ),
            _item(
                "response_item",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
            ),
            _item("event_msg", {"type": "user_message", "message": "fix it", "images": []}),
            _item(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "On it."}],
                },
            ),
            _item("event_msg", {"type": "agent_message", "message": "On it."}),
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.problem_count == 0
    messages = [(e.line, e.role, e.content) for e in events if e.kind is Kind.MESSAGE]
    assert messages == [(5, "user", "fix it"), (6, "assistant", "On it.")]
    assert {e.session for e in events} == {"sess-1"}


def test_tool_kinds_outputs_and_errors(tmp_path: Path):
    """All call kinds map to tool calls; outputs carry exit codes that make errors."""
    path = write_jsonl(
        tmp_path / "r.jsonl",
        [
            _item("session_meta", {"id": "s"}),
            _item(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "call_id": "c1",
                    "arguments": json.dumps({"command": ["bash", "-lc", "make"]}),
                },
            ),
            _item(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": json.dumps({"output": "make: *** Error 2", "metadata": {"exit_code": 2}}),
                },
            ),
            _item(
                "response_item",
                {
                    "type": "custom_tool_call",
                    "name": "apply_patch",
                    "call_id": "c2",
                    "input": "*** Begin Patch",
                },
            ),
            _item(
                "response_item",
                {
                    "type": "custom_tool_call_output",
                    "call_id": "c2",
                    "output": "Success. Updated the following files",
                },
            ),
            _item(
                "response_item",
                {
                    "type": "local_shell_call",
                    "call_id": "c3",
                    "status": "completed",
                    "action": {"type": "exec", "command": ["ls"]},
                },
            ),
            _item(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "c3",
                    "output": "Chunk ID: 1\nProcess exited with code 1\nOutput:\nls: x",
                },
            ),
            _item(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": "c4",
                    "arguments": '{"cmd": "ls", truncated',
                },
            ),
            _item(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "c4",
                    "output": {"content": "denied", "success": False},
                },
            ),
            _item(
                "response_item",
                {
                    "type": "web_search_call",
                    "status": "completed",
                    "action": {"type": "search", "query": "rust lifetimes"},
                },
            ),
            _item("response_item", {"type": "reasoning", "summary": []}),
            _item("turn_context", {"cwd": "/w"}),
            _item("compacted", {"message": "summary of the work"}),
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.problem_count == 0
    calls = [(e.line, e.tool, e.args) for e in events if e.kind is Kind.TOOL_CALL]
    assert calls == [
        (2, "shell", {"command": ["bash", "-lc", "make"]}),
        (4, "apply_patch", {"input": "*** Begin Patch"}),
        (6, "local_shell", {"type": "exec", "command": ["ls"]}),
        (8, "exec_command", {"arguments": '{"cmd": "ls", truncated'}),
        (10, "web_search", {"type": "search", "query": "rust lifetimes"}),
    ]
    results = [(e.call_id, e.is_error, e.content[:12]) for e in events if e.kind is Kind.TOOL_RESULT]
    assert results == [
        ("c1", True, "make: *** Er"),
        ("c2", False, "Success. Upd"),
        ("c3", True, "Chunk ID: 1\n"),
        ("c4", True, "denied"),
    ]
    assert [e.line for e in events if e.kind is Kind.COMPACTION] == [13]


def test_parse_helpers():
    """Arguments and outputs in every shape, never raising."""
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("[1, 2]") == {"arguments": [1, 2]}
    assert parse_arguments("{oops") == {"arguments": "{oops"}
    assert parse_arguments(None) == {}
    assert parse_output('{"output": "ok", "metadata": {"exit_code": 0}}') == ("ok", False, 0)
    assert parse_output("Exit code: 3\nWall time: 1s") == ("Exit code: 3\nWall time: 1s", True, 3)
    assert parse_output([{"type": "input_text", "text": "a"}, {"type": "input_image"}]) == (
        "a\n[image]",
        False,
        None,
    )
    assert parse_output(None) == ("", False, None)
    assert parse_output('{"output": ') == ('{"output": ', False, None)


def test_usage_once_per_api_call(real_fixtures: Path, tmp_path: Path):
    """Codex writes each token_count twice; usage comes out once per API call, from last_token_usage."""
    count = {
        "total_token_usage": {"total_tokens": 100},
        "last_token_usage": {
            "input_tokens": 90,
            "cached_input_tokens": 60,
            "output_tokens": 10,
            "total_tokens": 100,
        },
    }
    path = write_jsonl(
        tmp_path / "r.jsonl",
        [
            _item("event_msg", {"type": "token_count", "info": None}),
            _item("event_msg", {"type": "token_count", "info": count}),
            _item("event_msg", {"type": "token_count", "info": count}),
        ],
    )
    events, _ = decode_file(path)
    usage = [e for e in events if e.kind is Kind.USAGE]
    assert [(e.line, e.input_tokens, e.output_tokens, e.meta["cached_input_tokens"]) for e in usage] == [
        (2, 90, 10, 60)
    ]
    # A file that starts without session_meta still opens its session.
    assert events[0].kind is Kind.SESSION_START and events[0].line == 2
    real, _ = decode_file(real_fixtures / "codex" / POLLING)
    assert sum(1 for e in real if e.kind is Kind.USAGE) == 81  # 162 token_count records


def test_bad_records_become_problems(tmp_path: Path):
    """Broken records are reported with file:line and decoding goes on; unknown types are skipped."""
    path = write_jsonl(
        tmp_path / "r.jsonl",
        [
            _item("session_meta", {"id": "s"}),
            {"timestamp": "2026-02-23T11:00:00Z", "type": "response_item", "payload": "nope"},
            _item("response_item", {"type": "function_call", "call_id": "x", "arguments": "{}"}),
            _item("event_msg", {"type": "something_new", "x": 1}),
            {"timestamp": "2026-02-23T11:00:00Z", "type": "future_record", "payload": {}},
            "[1, 2]",
            _item(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}],
                },
            ),
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3, 6]
    assert "payload" in decoder.problems[0].reason and "name" in decoder.problems[1].reason
    assert [e.content for e in events if e.kind is Kind.MESSAGE] == ["done"]


def _pre_envelope(tmp_path: Path, items: list[dict]) -> Path:
    """A rollout from before the envelope format: its header line, then bare response items."""
    header = {
        "id": "0196a0b0-1111-2222-3333-444455556666",
        "timestamp": "2025-05-01T10:00:00Z",
        "instructions": "",
    }
    return write_jsonl(
        tmp_path / "rollout-2025-05-01T10-00-00-0196a0b0-1111-2222-3333-444455556666.jsonl", [header, *items]
    )


def test_pre_envelope_rollouts(tmp_path: Path):
    """Older rollouts (a header, then bare response items) decode too; user items count as turns."""
    path = _pre_envelope(
        tmp_path,
        [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>"}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]},
            {"record_type": "state"},
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command": ["pytest"]}',
                "call_id": "c1",
            },
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": '{"output": "2 passed", "metadata": {"exit_code": 0}}',
            },
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.format == "codex" and decoder.problem_count == 0
    assert [(e.kind.value, e.line) for e in events] == [
        ("session_start", 1),
        ("message", 3),
        ("tool_call", 5),
        ("tool_result", 6),
    ]
    assert sniff({"type": "session_meta", "payload": {}}) is CodexDecoder


def test_arbitrary_records_never_crash_the_decoder():
    """Any JSON object shaped roughly like a rollout record decodes or becomes a
    plain problem; no adapter exception ("… while decoding") escapes."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from monitor.formats.lines import LineDecoder
    from tests.test_formats_claude import _json_values

    values = _json_values()
    payload = st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                [
                    "message",
                    "function_call",
                    "function_call_output",
                    "custom_tool_call",
                    "local_shell_call",
                    "web_search_call",
                    "token_count",
                    "user_message",
                    "reasoning",
                ]
            )
            | values
        },
        optional={
            "role": values,
            "content": values,
            "name": values,
            "arguments": values,
            "call_id": values,
            "input": values,
            "action": values,
            "output": values,
            "info": values,
            "message": values,
            "id": values,
        },
    )
    record = st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                [
                    "session_meta",
                    "response_item",
                    "event_msg",
                    "compacted",
                    "turn_context",
                    "message",
                    "function_call",
                ]
            )
            | values
        },
        optional={
            "payload": payload | values,
            "timestamp": values,
            "instructions": values,
            "id": values,
            "call_id": values,
        },
    )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(record, min_size=1, max_size=6))
    def check(records):
        decoder = LineDecoder("rollout-x.jsonl", fmt="codex")
        for line, item in enumerate(records, start=1):
            decoder.feed_record(item, line, 1.0)
        assert not [p for p in decoder.problems if "while decoding" in p.reason]

    check()


def test_a_subagent_rollout_is_the_hooks_session_and_skips_its_parents_copied_history(tmp_path: Path):
    """A subagent rollout as Codex writes one (``source.subagent.thread_spawn``; the parent's
    history copied in first, re-stamped at the spawn instant, then the parent's session_meta)."""
    child, parent = "019c9000-0000-7000-8000-00000000c41d", "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
    spawn = "2026-02-23T19:40:00.000Z"

    def record(ts: str, kind: str, payload: dict) -> dict:
        return {"timestamp": ts, "type": kind, "payload": payload}

    def call(ts: str, call_id: str, command: str) -> list[dict]:
        return [
            record(
                ts,
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "call_id": call_id,
                    "arguments": json.dumps({"command": ["bash", "-lc", command]}),
                },
            ),
            record(ts, "response_item", {"type": "function_call_output", "call_id": call_id, "output": "ok"}),
        ]

    source = {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1, "agent_role": "worker"}}}
    lines = [
        record(spawn, "session_meta", {"id": child, "timestamp": spawn, "source": source, "cwd": "/r"}),
        record(
            "2026-02-23T19:40:00.001Z",
            "session_meta",
            {"id": parent, "timestamp": "2026-02-23T19:34:25.573Z"},
        ),
        *call("2026-02-23T19:40:00.002Z", "call_parent_1", "ls"),  # the parent's, copied in
        *call("2026-02-23T19:40:00.003Z", "call_parent_2", "ls"),
        record("2026-02-23T19:40:03.000Z", "event_msg", {"type": "user_message", "message": "run the tests"}),
        *call("2026-02-23T19:40:05.000Z", "call_child_1", "pytest -q"),
    ]
    path = write_jsonl(tmp_path / f"rollout-2026-02-23T19-40-00-{child}.jsonl", lines)
    events, decoder = decode_file(path)
    assert decoder.problems == []
    assert {e.session for e in events} == {f"{parent}:agent-{child}"}  # as the hook names it
    assert events[0].kind is Kind.SESSION_START and events[0].parent == parent
    assert [e.call_id for e in events if e.kind is Kind.TOOL_CALL] == ["call_child_1"]
    assert decoder.decoder.skipped["replayed from the parent"] == 4


def test_the_code_mode_exec_tools_outputs():
    """Codex's code-mode ``exec`` answers in content items that begin "Script completed"
    or "Script failed" (tests/corpus, doudouqie66/CommonTools): a failed script, or one
    whose command exited non-zero, is an error; one that printed nothing is an
    acknowledgement, not an answer that could come back "the same" after different patches."""
    from monitor.detect.analysis.shell import output_body
    from monitor.detect.analysis.signatures import text_is_acknowledgement

    def items(*texts: str) -> list[dict]:
        return [{"type": "input_text", "text": text} for text in texts]

    failed = items("Script failed\nWall time 0.2 seconds\nOutput:\n", "Script error:\nReferenceError: x")
    assert parse_output(failed)[1] is True
    nonzero = items(
        "Script completed\nWall time 0.2 seconds\nOutput:\n", "Exit code: 1\nWall time: 0.2 seconds"
    )
    assert parse_output(nonzero)[1:] == (True, 1)
    silent = parse_output(items("Script completed\nWall time 0.0 seconds\nOutput:\n", "{}"))
    assert silent[1] is False and text_is_acknowledgement(silent[0])
    printed = items(
        "Script completed\nWall time 0.2 seconds\nOutput:\n",
        "Exit code: 0\nWall time: 0.2 seconds\nOutput:\nRows : 33",
    )
    text = parse_output(printed)[0]
    assert not text_is_acknowledgement(text) and output_body(text) == "Rows : 33"


def test_the_ide_extensions_context_is_not_what_the_person_typed():
    """Codex's IDE extension opens every user message with the editor's state (active
    file, open tabs), the same on each turn, then "## My request for Codex:" and what the
    person typed (tests/corpus, BearTDK6/ba-pro): the request alone is the user turn, so
    three different requests are not "the same message from the user" three times."""
    from monitor.ide_context import typed_request

    context = (
        "# Context from my IDE setup:\n\n## Active file: src/a.ts\n\n## Open tabs:\n- a.ts: src/a.ts\n\n"
    )
    assert typed_request(context + "## My request for Codex:\nrefactor this\n") == (
        "refactor this",
        context.strip(),
    )
    assert typed_request("plain request") == ("plain request", "")
    assert typed_request("# Context from my IDE setup: nothing after") == (
        "# Context from my IDE setup: nothing after",
        "",
    )


def test_an_ide_request_in_a_pre_envelope_rollout_is_stripped_too(tmp_path: Path):
    """Rollouts before the envelope take user turns from response items: the IDE
    extension's context is cut from those as from ``user_message`` events."""
    context = "# Context from my IDE setup:\n\n## Active file: a.py\n\n"
    path = _pre_envelope(
        tmp_path,
        [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": context + "## My request for Codex:\nfix the bug"}
                ],
            },
        ],
    )
    events, _ = decode_file(path)
    (message,) = [e for e in events if e.kind is Kind.MESSAGE]
    assert message.content == "fix the bug"
    assert message.meta["ide_context"] == context.strip()


def test_calls_written_before_any_output_are_one_reply(tmp_path: Path):
    """Codex writes a reply's parallel calls before their outputs; a call after an
    output (or after the person's next turn) is a new reply (``meta["reply"]``), so
    similar_args and fingerprint count the calls one reply made together once."""

    def call(call_id: str) -> dict:
        return _item(
            "response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": call_id}
        )

    def output(call_id: str) -> dict:
        return _item("response_item", {"type": "function_call_output", "call_id": call_id, "output": "ok"})

    records = [
        _item("session_meta", {"id": "0196a0b0-1111-2222-3333-444455556666"}),
        _item("response_item", {"type": "reasoning", "summary": []}),
        call("a"),
        call("b"),
        output("a"),
        output("b"),
        call("c"),
        output("c"),
        _item("event_msg", {"type": "user_message", "message": "go on"}),
        call("d"),
        _item("event_msg", {"type": "user_message", "message": "and again"}),
        call("e"),
    ]
    events, _ = decode_file(write_jsonl(tmp_path / "rollout.jsonl", records))
    replies = [e.meta["reply"] for e in events if e.kind is Kind.TOOL_CALL]
    assert replies[0] == replies[1]
    assert len(set(replies)) == 4
