"""Whole-document trajectories: SWE-agent ``.traj`` and OpenHands event lists, line = step index."""

from __future__ import annotations

import json
from pathlib import Path

from monitor.events import Kind, Level
from monitor.formats import documents
from monitor.scan import expand_paths, scan
from tests.formatkit import counts

TRAJ = "swe-agent/pydicom__pydicom-1458.traj"


def _openhands_loop(n: int = 4) -> list[dict]:
    """An OpenHands session that runs the same failing command n times."""
    events: list[dict] = [
        {
            "id": 0,
            "timestamp": "2025-01-10T10:00:00",
            "source": "agent",
            "message": "You are OpenHands",
            "action": "system",
            "args": {"content": "system prompt", "tools": []},
        },
        {
            "id": 1,
            "timestamp": "2025-01-10T10:00:01",
            "source": "user",
            "message": "fix the tests",
            "action": "message",
            "args": {"content": "fix the tests", "image_urls": None, "wait_for_response": False},
        },
        {
            "id": 2,
            "timestamp": "2025-01-10T10:00:02",
            "source": "environment",
            "message": "",
            "observation": "agent_state_changed",
            "content": "",
            "extras": {"agent_state": "running"},
        },
    ]
    next_id = 3
    for i in range(n):
        action_id = next_id
        events.append(
            {
                "id": action_id,
                "timestamp": f"2025-01-10T10:01:{i * 2:02d}",
                "source": "agent",
                "message": "Running command: pytest -x",
                "action": "run",
                "tool_call_metadata": {
                    "function_name": "execute_bash",
                    "tool_call_id": f"toolu_{i}",
                    "model_response": {},
                    "total_calls_in_response": 1,
                },
                "llm_metrics": {
                    "accumulated_cost": 0.01 * (i + 1),
                    "accumulated_token_usage": {
                        "prompt_tokens": 1000 * (i + 1),
                        "completion_tokens": 50 * (i + 1),
                    },
                },
                "args": {
                    "command": "pytest -x",
                    "is_input": False,
                    "thought": "Let me run the tests.",
                    "blocking": False,
                    "hidden": False,
                    "confirmation_state": "confirmed",
                },
            }
        )
        events.append(
            {
                "id": action_id + 1,
                "timestamp": f"2025-01-10T10:01:{i * 2 + 1:02d}",
                "source": "agent",
                "message": "Command `pytest -x` executed with exit code 1.",
                "cause": action_id,
                "observation": "run",
                "content": "E   ModuleNotFoundError: No module named 'foo'",
                "extras": {"command": "pytest -x", "metadata": {"exit_code": 1, "pid": -1}, "hidden": False},
                "success": False,
            }
        )
        next_id += 2
    events.append(
        {
            "id": next_id,
            "timestamp": "2025-01-10T10:02:00",
            "source": "agent",
            "message": "",
            "action": "finish",
            "args": {"final_thought": "I could not fix it.", "outputs": {}},
        }
    )
    return events


def test_swe_agent_fixture(real_fixtures: Path):
    """The SWE-agent trajectory: one call, result and thought per step, the task from history."""
    path = real_fixtures / TRAJ
    assert documents.claims(path) and documents.name_of(path) == "swe-agent"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 12,
        "tool_calls": 12,
        "tool_results": 12,
        "usage": 1,
        "session_end": 1,
    }
    calls = [e for e in events if e.kind is Kind.TOOL_CALL]
    assert [c.line for c in calls] == list(range(1, 13))
    assert [c.tool for c in calls[:4]] == ["create", "edit", "python", "find_file"]
    assert calls[-1].args == {"command": "submit"}
    task = next(e for e in events if e.kind is Kind.MESSAGE and e.role == "user")
    assert task.line is None and "Pixel Representation" in task.content
    end = events[-1]
    assert end.kind is Kind.SESSION_END and end.status == "submitted" and end.line == 12
    usage = next(e for e in events if e.kind is Kind.USAGE)
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (122612, 1369, 1.26719)
    assert all(a.ts <= b.ts for a, b in zip(events, events[1:]))


def test_swe_agent_fixture_is_honest(real_fixtures: Path):
    """The SWE-agent run solves its task; nothing reaches warn."""
    report = scan([str(real_fixtures / TRAJ)])
    assert report.problem_count == 0 and report.formats[str(real_fixtures / TRAJ)] == "swe-agent"
    assert not [(d.detector, d.line) for d in report.detections if d.level >= Level.WARN]


def test_swe_agent_loop_is_reported_at_its_step(tmp_path: Path):
    """A .traj that repeats one failing action is caught; the detection's line is the step index."""
    steps = [
        {"thought": "check", "action": "ls /missing\n", "observation": "ls: cannot access"} for _ in range(5)
    ]
    path = tmp_path / "loop.traj"
    path.write_text(json.dumps({"trajectory": steps, "history": [], "info": {}}))
    report = scan([str(path)])
    warned = [d for d in report.detections if d.level >= Level.WARN]
    assert warned and warned[0].source == str(path)
    assert 2 <= warned[0].line <= 3  # the third identical call, or the result before it


def _coder_run(tmp_path: Path) -> Path:
    """A CodeR run (SWE-agent format, several roles): the Programmer runs the check and
    hands over (``succeed``), then the Tester, given the task afresh, runs the same check
    and hands over: tests/corpus coder-gpt4 matplotlib-23476 (read honest)."""
    history: list[dict] = [
        {"role": "system", "agent": "Manager", "content": "You are a Manager"},
        {"role": "user", "agent": "Manager", "content": "Solve the issue"},
        {"role": "assistant", "agent": "Manager", "action": "plan", "content": "plan"},
    ]
    steps = [{"thought": "plan", "action": "plan", "observation": "planned"}]
    for role in ("Programmer", "Tester"):
        history += [
            {"role": "system", "agent": role, "content": f"You are the {role}"},
            {"role": "user", "agent": role, "is_demo": True, "content": "Here is a demonstration"},
            {"role": "user", "agent": role, "content": f"{role}: here is the issue"},
        ]
        for action, seen in (("python reproduce.py", "dpi 200.0"), ("succeed", "")):
            history += [
                {"role": "assistant", "agent": role, "action": action, "content": action},
                {"role": "user", "agent": role, "content": seen},
            ]
            steps.append({"thought": "next", "action": action, "observation": seen})
    path = tmp_path / "coder.traj"
    path.write_text(json.dumps({"trajectory": steps, "history": history, "info": {}}))
    return path


def test_a_role_handing_over_gives_the_next_role_its_task_as_a_user_message(tmp_path: Path):
    events, problems = documents.load(_coder_run(tmp_path))
    assert problems == []
    users = [(e.line, e.content) for e in events if e.kind is Kind.MESSAGE and e.role == "user"]
    assert users == [
        (None, "Solve the issue"),
        (2, "Programmer: here is the issue"),
        (4, "Tester: here is the issue"),
    ]
    report = scan([str(_coder_run(tmp_path))])
    assert not [d for d in report.detections if d.level >= Level.WARN]  # one check by each role


def test_swe_agent_history_only_and_bad_steps(tmp_path: Path):
    """A .traj without trajectory steps is read from history; bad steps are problems, not crashes."""
    history = [
        {"role": "system", "content": "You are"},
        {"role": "user", "content": "Solve issue 7", "message_type": "task"},
        {"role": "assistant", "thought": "look", "action": "ls", "content": "look\nls"},
        {"role": "user", "content": "a.py", "message_type": "observation"},
        {"role": "assistant", "thought": "done", "action": "submit", "content": "submit"},
    ]
    path = tmp_path / "h.traj"
    path.write_text(json.dumps({"trajectory": [], "history": history}))
    events, problems = documents.load(path)
    assert problems == []
    assert [(e.kind.value, e.line) for e in events if e.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT)] == [
        ("tool_call", 3),
        ("tool_result", 3),
        ("tool_call", 5),
    ]
    bad = tmp_path / "bad.traj"
    bad.write_text(json.dumps({"trajectory": [{"action": "ls", "observation": "x"}, "junk", {"action": 5}]}))
    events, problems = documents.load(bad)
    assert [(p.line, p.reason.split(":")[0]) for p in problems] == [(2, "trajectory step"), (3, "action")]
    garbage = tmp_path / "garbage.traj"
    garbage.write_text("{not json")
    events, problems = documents.load(garbage)
    assert events == [] and problems[0].line is None and "invalid JSON" in problems[0].reason


def test_openhands_event_list(tmp_path: Path):
    """OpenHands actions and observations map to calls, results (errors by exit code), messages and usage."""
    path = tmp_path / "oh.json"
    path.write_text(json.dumps(_openhands_loop(2)))
    assert documents.claims(path) and documents.name_of(path) == "openhands"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 3,
        "tool_calls": 2,
        "tool_results": 2,
        "usage": 2,
    }
    call = next(e for e in events if e.kind is Kind.TOOL_CALL)
    assert call.tool == "execute_bash" and call.line == 4
    assert call.args == {"command": "pytest -x", "is_input": False, "action": "run"}
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert result.call_id == call.call_id and result.is_error and result.line == 5
    usage = [e for e in events if e.kind is Kind.USAGE]
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(1000, 50), (1000, 50)]


def test_openhands_loop_detected_at_event_index(tmp_path: Path):
    """A looping OpenHands run is caught, and its line is the 1-based index of the event."""
    items = _openhands_loop(4)
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps({"instance_id": "x", "history": items}))
    report = scan([str(path)])
    assert report.problem_count == 0
    warned = [d for d in report.detections if d.level >= Level.WARN]
    assert warned and warned[0].source == str(path)
    assert items[warned[0].line - 1].get("action") == "run" or "observation" in items[warned[0].line - 1]


def test_openhands_bad_items_and_non_trajectories(tmp_path: Path):
    """Bad events are problems with their index; unrelated .json files are not claimed."""
    path = tmp_path / "oh.json"
    items = _openhands_loop(1)
    items.insert(2, "junk")
    items.insert(3, {"id": 99, "source": "agent"})
    items.insert(4, {"id": 98, "action": "run", "timestamp": "noon", "args": {}})
    path.write_text(json.dumps(items))
    events, problems = documents.load(path)
    assert [(p.line, p.reason[:20]) for p in problems] == [
        (3, "expected an event ob"),
        (4, "event has neither 'a"),
        (5, "timestamp: not an IS"),
    ]
    assert sum(1 for e in events if e.kind is Kind.TOOL_CALL) == 1
    other = tmp_path / "package.json"
    other.write_text(json.dumps({"name": "x", "version": "1"}))
    assert not documents.claims(other)
    assert expand_paths([str(tmp_path)]) == [str(path)]
