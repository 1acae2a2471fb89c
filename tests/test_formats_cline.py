"""Cline / Roo Code task histories: results given as user text ``[tool for '…'] Result:``.

The real task is tests/fixtures/cline/1769053680585 (api_conversation_history.json
and ui_messages.json of one Cline task, Claude Sonnet 4.5).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from monitor.events import Kind
from monitor.formats import documents
from monitor.scan import expand_paths, scan
from tests.formatkit import counts

TASK = "cline/1769053680585"


def _history(real_fixtures: Path) -> Path:
    return real_fixtures / TASK / "api_conversation_history.json"


def test_results_given_as_user_text_are_results_of_the_call_before(real_fixtures: Path):
    """Regression: this file read as 47 calls, 0 results and 47 user messages."""
    path = _history(real_fixtures)
    assert documents.kind_of(path) == "cline"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 7,
        "tool_calls": 47,
        "tool_results": 46,
        "usage": 47,
    }
    calls = {e.call_id: e for e in events if e.kind is Kind.TOOL_CALL}
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    for result in results:  # each answers the call of the message just before it
        call = calls[result.call_id]
        assert result.line == call.line + 1 and result.tool == call.tool
    first = results[0]
    assert first.content.startswith("using System;") and not first.is_error
    assert events[0].session == "1769053680585" and events[0].agent == "cline"
    assert events[0].meta == {"model": "claude-sonnet-4-5-20250929"}
    # Cline's todo list rides along with calls; it is not an argument.
    assert all("task_progress" not in (c.args or {}) for c in calls.values())


def test_times_and_usage_come_from_ui_messages(real_fixtures: Path, tmp_path: Path):
    events, _ = documents.load(_history(real_fixtures))
    assert events[1].ts == 1769053680.628  # the task's first UI record
    times = [e.ts for e in events]
    assert times == sorted(times)
    usage = [e for e in events if e.kind is Kind.USAGE]
    assert usage[0].output_tokens == 595 and round(usage[0].cost_usd, 6) == 0.044854
    # Without ui_messages.json: the history alone, one second a message.
    alone = tmp_path / "t1" / "api_conversation_history.json"
    alone.parent.mkdir()
    shutil.copy(_history(real_fixtures), alone)
    events, problems = documents.load(alone)
    assert problems == [] and counts(events)["tool_results"] == 46
    assert events[2].ts - events[1].ts == 1.0
    usage = next(e for e in events if e.kind is Kind.USAGE)  # metrics.tokens: no cost
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (9583, 595, None)


def test_a_task_folder_is_one_session(real_fixtures: Path):
    folder = real_fixtures / TASK
    assert expand_paths([str(folder)]) == [str(_history(real_fixtures))]
    report = scan([str(folder)])
    assert report.problems == [] and list(report.session_agents()) == ["1769053680585"]


def _run(tmp_path: Path, messages: list[dict]) -> list:
    path = tmp_path / "task9" / "api_conversation_history.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(messages))
    events, problems = documents.load(path)
    assert problems == []
    return events[1:]


def _use(call_id: str, name: str, **args: object) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
    }


def _said(*texts: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


ENV = "<environment_details>\n# Visual Studio Code Visible Files\n</environment_details>"


def test_errors_denials_and_exit_codes(tmp_path: Path):
    events = _run(
        tmp_path,
        [
            _said("<task>\nfix it\n</task>", ENV),
            _use("a", "execute_command", command="npm test"),
            _said(
                "[execute_command for 'npm test'] Result:\nCommand failed with exit code 1.\nOutput:\nboom",
                ENV,
            ),
            _use("b", "read_file", path="x.py"),
            _said(
                "[read_file for 'x.py'] Result:\nThe tool execution failed with the following error:\n<error>\n"
                "no such file\n</error>"
            ),
            _use("c", "write_to_file", path="y.py"),
            _said(
                "[write_to_file for 'y.py'] Result:\nThe user denied this operation.",
                "The user provided the following feedback:\n<feedback>\nuse z.py\n</feedback>",
            ),
            _use("d", "execute_command", command="ls"),
            _said(
                "[execute_command for 'ls'] Result:\nCommand executed successfully (exit code 0).\nOutput:\na"
            ),
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            _said("[ERROR] You did not use a tool in your previous response! Please retry with a tool use."),
        ],
    )
    results = {e.call_id: e for e in events if e.kind is Kind.TOOL_RESULT}
    assert {k: (r.is_error, r.meta.get("exit_code")) for k, r in results.items()} == {
        "a": (True, 1),
        "b": (True, None),
        "c": (True, None),
        "d": (False, 0),
    }
    messages = [(e.role, e.content) for e in events if e.kind is Kind.MESSAGE]
    assert messages == [
        ("user", "<task>\nfix it\n</task>"),
        ("user", "The user provided the following feedback:\n<feedback>\nuse z.py\n</feedback>"),
        ("assistant", "Done."),
        ("system", "[ERROR] You did not use a tool in your previous response! Please retry with a tool use."),
    ]


def test_xml_tool_use_gets_its_call_from_the_header_and_answers_are_the_persons(tmp_path: Path):
    events = _run(
        tmp_path,
        [
            _said("<task>\nread it\n</task>"),
            {"role": "assistant", "content": "<read_file>\n<path>a.py</path>\n</read_file>"},
            _said("[read_file for 'a.py'] Result:\nprint(1)"),
            _use("q", "ask_followup_question", question="which?"),
            _said("[ask_followup_question for 'which?'] Result:\n<answer>\nthe second\n</answer>"),
        ],
    )
    call = next(e for e in events if e.kind is Kind.TOOL_CALL)
    assert (call.tool, call.args, call.line) == ("read_file", {"target": "a.py"}, 3)
    assert [e.call_id for e in events if e.kind is Kind.TOOL_RESULT] == [call.call_id, "q"]
    assert [e.content for e in events if e.role == "user"] == ["<task>\nread it\n</task>", "the second"]


def test_a_loop_of_identical_failures_is_seen(tmp_path: Path):
    messages = [_said("<task>\nbuild\n</task>")]
    for i in range(6):
        messages.append(_use(f"c{i}", "execute_command", command="make"))
        messages.append(
            _said("[execute_command for 'make'] Result:\nCommand failed with exit code 2.\nOutput:\nE1", ENV)
        )
    path = tmp_path / "task5" / "api_conversation_history.json"
    path.parent.mkdir()
    path.write_text(json.dumps(messages))
    report = scan([str(path)])
    assert report.worst.label in ("critical", "terminate")
