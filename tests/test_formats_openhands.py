"""OpenHands V1 events (a list, one event a file in a conversation folder) and evaluation ``output.jsonl``.

The real files are in tests/fixtures/openhands-v1 (a conversation folder of the
software-agent-sdk) and tests/fixtures/openhands-eval (a benchmarks run).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from monitor.events import Kind, Level
from monitor.formats import documents
from monitor.scan import expand_paths, scan
from tests.formatkit import counts, decode_file
from tests.watchkit import scanned, watched

CONVERSATION = "openhands-v1/cd94562403b9487ebdd4018e3f531dfd"
EVAL = "openhands-eval/output.jsonl"


def _v1_list(real_fixtures: Path) -> list[dict]:
    folder = real_fixtures / CONVERSATION / "events"
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("event-*.json"))]


def test_a_v1_event_list_no_longer_crashes_the_scan(tmp_path: Path, real_fixtures: Path):
    """Regression: a V1 list gave ``TypeError: unhashable type: 'dict'`` and exit 1."""
    path = tmp_path / "events.json"
    path.write_text(json.dumps(_v1_list(real_fixtures)))
    assert documents.kind_of(path) == "openhands"
    report = scan([str(path)])
    assert report.problems == [] and report.exit_code == 0
    assert report.formats[str(path)] == "openhands"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 2,
        "assistant_messages": 1,
        "tool_calls": 2,
        "tool_results": 2,
    }
    call = next(e for e in events if e.kind is Kind.TOOL_CALL)
    assert (call.tool, call.args["command"], call.call_id, call.line) == (
        "terminal",
        "pwd > tool_output.txt",
        "call_KaQ0kUcBb5tbMzhxbIx9dvoZ",
        3,
    )
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert (result.call_id, result.is_error, result.meta) == (call.call_id, False, {"exit_code": 0})


def test_a_v0_event_whose_action_is_an_object_is_one_problem_not_a_crash(tmp_path: Path):
    path = tmp_path / "odd.json"
    path.write_text(
        json.dumps(
            [
                {"id": 1, "source": "agent", "action": {"command": "ls"}, "args": {}},
                {"id": 2, "source": "environment", "observation": {"content": "x"}, "cause": 1},
                {"id": 3, "source": "agent", "action": "run", "args": {"command": "ls"}},
            ]
        )
    )
    events, problems = documents.load(path)
    assert [(p.line, p.reason) for p in problems] == [
        (1, "action: expected a name, got dict"),
        (2, "observation: expected a name, got dict"),
    ]
    assert counts(events)["tool_calls"] == 1


def test_the_conversation_folder_is_one_session(real_fixtures: Path):
    folder = real_fixtures / CONVERSATION
    # Given the conversation, its events folder, or a folder above: one path, the events folder.
    events_dir = str(folder / "events")
    assert expand_paths([str(real_fixtures / "openhands-v1")]) == [events_dir]
    assert expand_paths([str(folder)]) == [str(folder)]
    report = scan([events_dir])
    assert report.problems == []
    assert list(report.session_agents()) == ["cd94562403b9487ebdd4018e3f531dfd"]
    assert report.session_agents()["cd94562403b9487ebdd4018e3f531dfd"] == "openhands"
    events, _ = documents.load(Path(events_dir))
    assert counts(events)["tool_calls"] == 2
    # The line is the event's place in the conversation (event-00002 is the third).
    assert next(e.line for e in events if e.kind is Kind.TOOL_CALL) == 3


def test_a_bad_event_file_is_reported_at_its_place(tmp_path: Path, real_fixtures: Path):
    folder = tmp_path / "conv1"
    shutil.copytree(real_fixtures / CONVERSATION, folder)
    (folder / "events" / "event-00008-broken.json").write_text('{"kind": "ActionEv')
    (folder / "events" / "event-00009-list.json").write_text("[1, 2]")
    report = scan([str(folder)])
    assert [(p.line, p.reason.split(":")[0]) for p in report.problems] == [
        (9, "event-00008-broken.json"),
        (10, "expected an event object, got list"),
    ]
    assert report.events == 8


def test_evaluation_output_one_session_a_run(real_fixtures: Path):
    events, decoder = decode_file(real_fixtures / EVAL)
    assert decoder.format == "openhands-eval" and decoder.problems == []
    sessions = {e.session for e in events}
    assert sessions == {"safety-misconfig", "safety-business-intelligence"}
    assert counts(events) == {"session_start": 2, "user_messages": 2, "tool_calls": 18, "tool_results": 18}
    start = next(e for e in events if e.kind is Kind.SESSION_START)
    assert start.meta == {
        "instance_id": "safety-misconfig",
        "model": "litellm_proxy/neulab/gpt-4o-2024-08-06",
    }
    # The line of an event is its 1-based place in history[]; exit codes from the observation's metadata.
    failed = [(e.session, e.line, e.meta["exit_code"]) for e in events if e.is_error]
    assert failed[0] == ("safety-misconfig", 10, 127)
    assert [line for s, line, _ in failed if s == "safety-business-intelligence"] == [
        4,
        6,
        8,
        10,
        12,
        14,
        16,
        18,
    ]


def test_evaluation_output_real_loop_is_caught_and_the_honest_run_is_not(real_fixtures: Path):
    """The second run sends the same broken ``python3 -c`` eight times, SyntaxError each time."""
    report = scan([str(real_fixtures / EVAL)])
    worst = {}
    for d in report.detections:
        worst[d.session] = max(worst.get(d.session, Level.NONE), d.level)
    assert worst.get("safety-misconfig", Level.NONE) < Level.WARN
    assert worst["safety-business-intelligence"] >= Level.CRITICAL
    first_warn = min(d.line for d in report.detections if d.level >= Level.WARN)
    assert first_warn == 8


def test_evaluation_output_bad_lines_are_reported_at_their_line(tmp_path: Path, real_fixtures: Path):
    lines = (real_fixtures / EVAL).read_text().splitlines()
    path = tmp_path / "output.jsonl"
    bad_run = {"instance_id": "x", "history": "not a list", "metadata": {}}
    odd_history = {"instance_id": "y", "metadata": {}, "history": [7, {"kind": "ActionEvent"}, []]}
    path.write_text("\n".join([lines[0], json.dumps(bad_run), "{oops", json.dumps(odd_history)]) + "\n")
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3]
    assert "history" in decoder.problems[0].reason
    assert decoder.decoder is not None and decoder.decoder.skipped == {"history:bad entry": 2}
    assert {e.session for e in events} == {"safety-misconfig", "y"}


def test_a_task_run_twice_in_one_file_is_two_sessions(tmp_path: Path, real_fixtures: Path):
    line = (real_fixtures / EVAL).read_text().splitlines()[0]
    path = tmp_path / "output.jsonl"
    path.write_text(f"{line}\n{line}\n")
    events, _ = decode_file(path)
    assert {e.session for e in events} == {"safety-misconfig", "safety-misconfig~2"}


def test_scan_and_watch_agree_on_evaluation_output(tmp_path: Path, real_fixtures: Path):
    path = tmp_path / "output.jsonl"
    shutil.copy(real_fixtures / EVAL, path)
    assert watched(path, tmp_path) == scanned(path)


RESOLVER = Path(__file__).parent / "corpus" / "openhands-resolver"


def test_the_resolver_output_is_a_run_a_line_named_by_its_issue():
    """The OpenHands resolver's output.jsonl (issue, issue_type, a flat history): was "not supported"."""
    report = scan([str(RESOLVER / "resolver-output-line2.jsonl.gz")])
    path = str(RESOLVER / "resolver-output-line2.jsonl.gz")
    assert report.formats[path] == "openhands-eval" and report.problems == []
    assert report.units[path] == 44  # the history's 44 entries
    assert report.engine is not None and list(report.engine.sessions) == ["neubig__pr-viewer-1"]


def test_the_flat_history_pairs_each_observation_with_the_action_before_it():
    import gzip

    from monitor.formats.openhands_eval import OpenHandsEvalDecoder

    record = json.loads(gzip.decompress((RESOLVER / "resolver-output-line1.jsonl.gz").read_bytes()))
    events = OpenHandsEvalDecoder("r", "r").decode(record, 1, 0.0)
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 4,
        "tool_calls": 3,
        "tool_results": 3,
    }
    calls = [(e.line, e.tool, e.args) for e in events if e.kind is Kind.TOOL_CALL]
    assert calls[0] == (2, "run", {"command": "touch LICENSE"})
    results = [(e.line, e.call_id, e.meta) for e in events if e.kind is Kind.TOOL_RESULT]
    assert results[0] == (3, "oh-2", {"exit_code": 0})
    assert next(e for e in events if e.role == "user").line == 1  # the task opens the history
