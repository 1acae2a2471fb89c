"""Claude Code transcripts: the real fixtures decode cleanly, and each record kind maps as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.events import Kind, Level
from monitor.formats import LINE_FORMATS, sniff
from monitor.formats.claude import ClaudeDecoder
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

MAIN = "258c7280-ae70-4798-800f-63464d01a85d"

#: Per fixture: tool calls, results, user and assistant messages, as read by hand
#: (user turns are only what a person typed; see test_user_turns_are_only_typed_text).
EXPECTED = {
    "short.jsonl": {"tool_calls": 2, "tool_results": 2, "user_messages": 1, "assistant_messages": 1},
    "tool_heavy.jsonl": {"tool_calls": 6, "tool_results": 6, "user_messages": 3, "assistant_messages": 1},
    "subagent.jsonl": {"tool_calls": 16, "tool_results": 16, "user_messages": 2, "assistant_messages": 7},
    f"{MAIN}.jsonl": {
        "tool_calls": 186,
        "tool_results": 186,
        "user_messages": 2,
        "assistant_messages": 85,
        "compaction": 1,
    },
    f"{MAIN}/subagents/agent-a881341.jsonl": {
        "tool_calls": 2,
        "tool_results": 2,
        "user_messages": 1,
        "assistant_messages": 3,
    },
    f"{MAIN}/subagents/agent-acompact-fffbd0.jsonl": {"user_messages": 1, "assistant_messages": 1},
}


def _record(kind: str, line_extra: dict | None = None, **message) -> dict:
    record = {
        "type": kind,
        "sessionId": "s-1",
        "uuid": "u",
        "timestamp": "2026-02-10T21:12:00Z",
        "version": "2.1.39",
    }
    if message:
        record["message"] = message
    record.update(line_extra or {})
    return record


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_with_expected_counts(real_fixtures: Path, name: str):
    """Every Claude fixture decodes with zero problems into the counts read by hand."""
    path = real_fixtures / "claude-code" / name
    events, decoder = decode_file(path)
    assert decoder.format == "claude"
    assert decoder.problem_count == 0, [str(p) for p in decoder.problems]
    tally = counts(events)
    for key, value in EXPECTED[name].items():
        assert tally.get(key, 0) == value, (key, tally)
    assert tally.get("message", 0) == 0
    assert tally["session_start"] == 1
    starts = [e for e in events if e.kind is Kind.SESSION_START]
    assert starts[0].agent == "claude-code" and starts[0].meta["version"].startswith("2.1.")


def test_every_event_carries_its_records_line(real_fixtures: Path):
    """Each event's line is the 1-based line of the record it came from."""
    path = real_fixtures / "claude-code" / "short.jsonl"
    lines = path.read_text().splitlines()
    events, _ = decode_file(path)
    for event in events:
        assert 1 <= event.line <= len(lines)
        assert event.source == str(path)
        if event.kind is Kind.TOOL_CALL:
            assert event.call_id in lines[event.line - 1]
        if event.kind is Kind.TOOL_RESULT:
            assert f'"tool_use_id":"{event.call_id}"' in lines[event.line - 1]


def test_sessions_and_subagents(real_fixtures: Path):
    """A main transcript is its session; a subagent file is its own session linked to the parent."""
    main, _ = decode_file(real_fixtures / "claude-code" / f"{MAIN}.jsonl")
    assert {e.session for e in main} == {MAIN}
    assert all(e.parent is None for e in main)
    sub, _ = decode_file(real_fixtures / "claude-code" / MAIN / "subagents" / "agent-a881341.jsonl")
    assert {e.session for e in sub} == {f"{MAIN}:agent-a881341"}
    assert {e.parent for e in sub} == {MAIN}
    assert sub[0].kind is Kind.SESSION_START and sub[0].parent == MAIN
    short, _ = decode_file(real_fixtures / "claude-code" / "short.jsonl")
    # A file not named after its session takes the id its records carry.
    assert {e.session for e in short} == {"55604662-cf2a-4331-851a-ec234028f8ca"}


def test_tool_results_errors_and_list_content(real_fixtures: Path):
    """tool_result blocks keep is_error, and list content is flattened to text."""
    events, _ = decode_file(real_fixtures / "claude-code" / "short.jsonl")
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert all(r.is_error for r in results)
    assert "doesn't want to proceed" in results[0].content
    calls = [e for e in events if e.kind is Kind.TOOL_CALL]
    assert calls[0].tool == "Bash" and calls[0].args["command"].startswith("mix phx.server")


def test_compaction_and_usage(real_fixtures: Path):
    """compact_boundary becomes a compaction; usage is reported once per API message."""
    events, _ = decode_file(real_fixtures / "claude-code" / f"{MAIN}.jsonl")
    compactions = [e for e in events if e.kind is Kind.COMPACTION]
    assert compactions[0].line == 1256 and compactions[0].meta["trigger"] == "auto"
    usage = [e for e in events if e.kind is Kind.USAGE and not e.meta.get("delta")]
    ids = [e.meta["message_id"] for e in usage]
    assert len(ids) == len(set(ids))
    assert all(e.input_tokens > 0 for e in usage)


def test_streamed_usage_is_not_counted_twice(tmp_path: Path):
    """Records of one streamed message repeat its usage: only growth is reported again."""
    usage = {
        "input_tokens": 3,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
        "output_tokens": 11,
    }
    grown = dict(usage, output_tokens=173)
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            _record(
                "assistant", id="m1", role="assistant", content=[{"type": "text", "text": "hi"}], usage=usage
            ),
            _record(
                "assistant",
                id="m1",
                role="assistant",
                content=[{"type": "thinking", "thinking": "x"}],
                usage=usage,
            ),
            _record(
                "assistant",
                id="m1",
                role="assistant",
                content=[{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}],
                usage=grown,
            ),
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.problem_count == 0
    usage_events = [e for e in events if e.kind is Kind.USAGE]
    assert [(e.input_tokens, e.output_tokens) for e in usage_events] == [(110, 11), (0, 162)]
    assert sum(e.output_tokens for e in usage_events) == 173
    assert decoder.decoder.skipped["assistant:thinking"] == 1


def test_user_turns_are_only_typed_text(tmp_path: Path):
    """Only what a person typed is a user message: not tool results, isMeta, command
    output, task notifications, compaction summaries or interruption markers."""
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            _record("user", role="user", content="fix the build"),  # 1 yes
            _record(
                "user", {"isMeta": True}, role="user", content=[{"type": "text", "text": "skill prompt"}]
            ),
            _record("user", role="user", content="<local-command-stdout>ok</local-command-stdout>"),
            _record("user", role="user", content="<task-notification>\n<task-id>b1</task-id>"),
            _record("user", role="user", content=[{"type": "text", "text": "[Request interrupted by user]"}]),
            _record(
                "user", {"isCompactSummary": True}, role="user", content="This session is being continued"
            ),
            _record(
                "user",
                role="user",
                content=[
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "out"}],
                    },
                    {"type": "text", "text": "[Request interrupted by user for tool use]"},
                ],
            ),
            _record(
                "user",
                role="user",
                content="<command-name>/review</command-name>\n<command-args>pr 12</command-args>",
            ),  # 8 yes
            _record(
                "user",
                role="user",
                content=[{"type": "text", "text": "and the tests"}, {"type": "image", "source": {}}],
            ),  # 9 yes
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.problem_count == 0
    users = [(e.line, e.content) for e in events if e.kind is Kind.MESSAGE and e.role == "user"]
    assert users == [(1, "fix the build"), (8, "/review pr 12"), (9, "and the tests\n[image]")]
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(r.line, r.call_id, r.content, r.is_error) for r in results] == [(7, "t1", "out", False)]


def test_assistant_record_with_several_blocks(tmp_path: Path):
    """One record may give several events, in block order; thinking is not a message."""
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            _record(
                "assistant",
                id="m1",
                role="assistant",
                content=[
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "b", "name": "Read", "input": {"file_path": "x"}},
                    {"type": "text", "text": "  "},
                ],
            ),
        ],
    )
    events, _ = decode_file(path)
    kinds = [(e.kind.value, e.role or e.tool) for e in events]
    assert kinds == [
        ("session_start", None),
        ("message", "assistant"),
        ("tool_call", "Bash"),
        ("tool_call", "Read"),
    ]
    assert all(e.line == 1 for e in events)


def test_skipped_records_and_bad_input_never_crash(tmp_path: Path):
    """Known noise and unknown types are skipped silently; broken records become
    problems naming file:line, and decoding goes on."""
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
            _record("progress", {"data": {"type": "hook_progress"}}),
            {"type": "queue-operation", "operation": "enqueue", "sessionId": "s-1"},
            {"type": "summary", "summary": "old", "leafUuid": "u"},
            _record("brand-new-type", {"whatever": [1, 2]}),
            _record("system", {"subtype": "turn_duration", "durationMs": 5}),
            _record("assistant", {"message": "not an object"}),
            "{not json",
            _record("user", {"timestamp": "yesterday-ish"}, role="user", content="hello"),
            _record("assistant", id="m2", role="assistant", content=[{"type": "tool_use", "id": "q"}]),
            _record("user", role="user", content="still here", extraField={"new": True}),
        ],
    )
    events, decoder = decode_file(path)
    problems = {p.line: p.reason for p in decoder.problems}
    assert sorted(problems) == [7, 8, 9, 10]
    assert "assistant.message" in problems[7]
    assert "invalid JSON" in problems[8]
    assert "timestamp" in problems[9]
    assert "name" in problems[10]
    assert all(str(p).startswith(f"{path}:") for p in decoder.problems)
    assert [e.content for e in events if e.kind is Kind.MESSAGE] == ["still here"]
    assert events[0].kind is Kind.SESSION_START and events[0].line == 2


def test_sniffing_picks_claude():
    """The first record of any Claude transcript identifies the format, not native's."""
    assert "claude" in LINE_FORMATS
    assert sniff({"type": "file-history-snapshot", "messageId": "x"}) is ClaudeDecoder
    assert sniff({"type": "user", "sessionId": "s", "message": {}}) is ClaudeDecoder
    assert sniff({"type": "message", "role": "user", "content": "x"}).name == "native"


def test_detection_names_file_and_line(tmp_path: Path):
    """A loop in a Claude transcript is reported at the file and line of the record that tripped it."""
    records = [_record("user", role="user", content="list the files")]
    for i in range(4):
        records.append(
            _record(
                "assistant",
                id=f"m{i}",
                role="assistant",
                content=[
                    {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls /nope"}}
                ],
            )
        )
        records.append(
            _record(
                "user",
                role="user",
                content=[
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{i}",
                        "content": "ls: /nope: No such file",
                        "is_error": True,
                    }
                ],
            )
        )
    path = write_jsonl(tmp_path / "loop.jsonl", records)
    report = scan([str(path)])
    warned = [d for d in report.detections if d.level >= Level.WARN]
    assert warned, [(d.detector, d.level) for d in report.detections]
    first = warned[0]
    assert first.source == str(path)
    lines = path.read_text().splitlines()
    assert '"type": "tool_use"' in lines[first.line - 1] or '"tool_result"' in lines[first.line - 1]
    assert first.line <= 7  # by the third identical call (line 6) or its result


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_honest_fixtures_do_not_warn(real_fixtures: Path, name: str):
    """The real Claude sessions hold no loop a person would call one: nothing reaches warn."""
    report = scan([str(real_fixtures / "claude-code" / name)])
    warned = [(d.detector, d.line, d.message) for d in report.detections if d.level >= Level.WARN]
    assert not warned


def test_sidechain_records_in_a_main_transcript(tmp_path: Path):
    """Older transcripts hold subagent records inline: they form their own session linked to the main one."""
    main = "0b6f6a52-1111-2222-3333-444455556666"
    path = write_jsonl(
        tmp_path / f"{main}.jsonl",
        [
            _record("user", {"sessionId": main}, role="user", content="research this"),
            _record("user", {"sessionId": main, "isSidechain": True}, role="user", content="subtask prompt"),
            _record(
                "assistant",
                {"sessionId": main, "isSidechain": True},
                id="m1",
                role="assistant",
                content=[{"type": "tool_use", "id": "t1", "name": "WebSearch", "input": {"query": "x"}}],
            ),
            _record(
                "assistant",
                {"sessionId": main},
                id="m2",
                role="assistant",
                content=[{"type": "text", "text": "Found it."}],
            ),
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.problem_count == 0
    assert [(e.kind.value, e.session, e.parent) for e in events] == [
        ("session_start", main, None),
        ("message", main, None),
        ("session_start", f"{main}:sidechain", main),
        ("message", f"{main}:sidechain", main),
        ("tool_call", f"{main}:sidechain", main),
        ("message", main, None),
    ]


def _json_values():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=6,
    )


def test_arbitrary_records_never_crash_the_decoder():
    """Any JSON object shaped roughly like a transcript record decodes or becomes a
    plain problem; no adapter exception ("… while decoding") escapes."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from monitor.formats.lines import LineDecoder

    values = _json_values()
    block = st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "tool_use", "tool_result", "thinking", "x"])},
        optional={
            "text": values,
            "id": values,
            "name": values,
            "input": values,
            "tool_use_id": values,
            "content": values,
            "is_error": values,
        },
    )
    message = st.fixed_dictionaries(
        {},
        optional={
            "role": values,
            "id": values,
            "model": values,
            "content": st.lists(block, max_size=3) | values,
            "usage": values,
        },
    )
    record = st.fixed_dictionaries(
        {"type": st.sampled_from(["user", "assistant", "system", "progress", "summary", "other"]) | values},
        optional={
            "sessionId": values,
            "uuid": values,
            "timestamp": values,
            "isSidechain": values,
            "agentId": values,
            "isMeta": values,
            "subtype": values,
            "message": message | values,
            "compactMetadata": values,
            "costUSD": values,
        },
    )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(record, min_size=1, max_size=6))
    def check(records):
        decoder = LineDecoder("t.jsonl", fmt="claude")
        for line, item in enumerate(records, start=1):
            decoder.feed_record(item, line, 1.0)
        assert not [p for p in decoder.problems if "while decoding" in p.reason]

    check()


def test_a_prompt_queued_while_the_agent_works_is_a_user_turn(tmp_path: Path):
    """``attachment`` records with ``queued_command``, as Claude Code 2.1 writes them (origin and
    commandMode as in public transcripts); a queued task notification is not a person's turn."""
    sid = "0f5e8a4c-1111-4222-8333-944455556666"
    base = {"sessionId": sid, "timestamp": "2026-01-01T00:00:00Z", "parentUuid": None, "cwd": "/r"}

    def attachment(n: int, **queued: object) -> dict:
        return {
            **base,
            "uuid": f"a{n}",
            "type": "attachment",
            "attachment": {"type": "queued_command", **queued},
        }

    note = "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>"
    path = write_jsonl(
        tmp_path / f"{sid}.jsonl",
        [
            {
                **base,
                "uuid": "u1",
                "type": "user",
                "message": {"role": "user", "content": "fix the exporter"},
            },
            {
                **base,
                "uuid": "q1",
                "type": "queue-operation",
                "operation": "enqueue",
                "content": "and the tests",
            },
            attachment(1, prompt="and the tests", commandMode="prompt", origin={"kind": "human"}),
            attachment(2, prompt=note, commandMode="task-notification", origin={"kind": "task-notification"}),
            attachment(3, prompt="also the docs", commandMode="prompt"),
            {**base, "uuid": "a4", "type": "attachment", "attachment": {"type": "deferred_tools_delta"}},
        ],
    )
    events, decoder = decode_file(path)
    assert decoder.problems == []
    users = [(e.line, e.content, e.meta.get("queued", False)) for e in events if e.role == "user"]
    assert users == [(1, "fix the exporter", False), (3, "and the tests", True), (5, "also the docs", True)]
    assert {e.session for e in events} == {sid}


def _edits_that_fail(message_ids: list[str]) -> list[dict]:
    """Edits of one file, each refused "File does not exist", made in the API messages named."""
    records = [_record("user", role="user", content="apply the review")]
    for i, message_id in enumerate(message_ids):
        call = {
            "type": "tool_use",
            "id": f"t{i}",
            "name": "Edit",
            "input": {"file_path": "/notes/draft.md", "old_string": f"line {i}", "new_string": f"line {i}!"},
        }
        records.append(_record("assistant", id=message_id, role="assistant", content=[call]))
        result = {
            "type": "tool_result",
            "tool_use_id": f"t{i}",
            "content": "File does not exist.",
            "is_error": True,
        }
        records.append(_record("user", role="user", content=[result]))
    return records


def test_the_parallel_calls_of_one_reply_are_one_attempt(tmp_path: Path):
    """Claude Code writes one reply's parallel calls as records of their own, a result after
    each: twelve edits of one reply failing alike are one attempt the agent could not
    correct between (a real run: tests/corpus, mlevison/dotfiles e76b8c5a), so nothing
    warns; the same twelve as twelve replies, each after the last refusal, are a loop."""
    calls = tmp_path / "one-reply.jsonl"
    write_jsonl(calls, _edits_that_fail(["msg_1"] * 12))
    events, _ = decode_file(calls)
    assert {e.meta["reply"] for e in events if e.kind is Kind.TOOL_CALL} == {"msg_1"}
    assert not [d for d in scan([str(calls)]).detections if d.level >= Level.WARN]

    replies = write_jsonl(
        tmp_path / "twelve-replies.jsonl", _edits_that_fail([f"msg_{i}" for i in range(12)])
    )
    assert [d for d in scan([str(replies)]).detections if d.level >= Level.WARN]


def test_a_transcript_written_twice_is_read_once(tmp_path: Path):
    """Some transcripts hold the session twice: after a ``summary`` record, the same records
    again with the same uuids and timestamps (tests/corpus, egv/dot-files). The copy is
    skipped and counted, so three replies are not six (no monologue)."""
    ids = [f"0b6c1f3e-0000-4000-8000-00000000000{n}" for n in range(4)]
    first = [_record("user", {"uuid": ids[0]}, role="user", content="set up the project")]
    for n in range(1, 4):
        text = [{"type": "text", "text": f"Step {n}: I will write the file."}]
        first.append(_record("assistant", {"uuid": ids[n]}, id=f"msg_{n}", role="assistant", content=text))
    path = write_jsonl(tmp_path / "twice.jsonl", [*first, {"type": "summary", "summary": "setup"}, *first])
    events, decoder = decode_file(path)
    assert [e.kind for e in events].count(Kind.MESSAGE) == 4
    assert decoder.problem_count == 0
    assert decoder.decoder.skipped["copy of an earlier record"] == 4
