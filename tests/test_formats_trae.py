"""Trae Agent trajectories: a real run from tests/corpus/trae-agent-task2money, and hand-made steps
written as bytedance/trae-agent at commit e839e559 writes them (trae_agent/utils/trajectory_recorder.py;
the harness's messages from trae_agent/agent/base_agent.py and trae_agent.py)."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

from monitor.events import Kind
from monitor.formats import documents
from monitor.scan import scan
from monitor.sources.paths import is_log_name
from tests.formatkit import counts
from tests.test_watch_documents import _follow

REAL = Path(__file__).parent / "corpus" / "trae-agent-task2money" / "trajectory_20260118_211615.json.gz"


def _document() -> dict:
    return json.loads(gzip.decompress(REAL.read_bytes()))


def test_the_real_run_each_step_a_call_and_its_result():
    assert documents.kind_of(REAL) == "trae"
    assert documents.session_of(REAL) == "trajectory_20260118_211615"
    events, problems = documents.load(REAL)
    assert problems == []
    # 28 steps with one call and its result each; step 29 calls task_done, which ends the run.
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 4,
        "usage": 29,
        "tool_calls": 29,
        "tool_results": 28,
        "session_end": 1,
    }
    start = events[0]
    assert start.agent == "trae-agent" and start.meta == {
        "provider": "doubao",
        "model": "deepseek-v3-2-251201",
    }
    assert (
        events[1].role == "user" and events[1].content == "'Create a hello world Python script'"
    )  # quoted, as given
    assert events[-1].kind is Kind.SESSION_END and events[-1].status == "success" and events[-1].line == 29


def test_the_line_is_the_step_and_a_result_is_counted_once():
    steps = _document()["agent_steps"]
    events, _ = documents.load(REAL)
    for event in events:
        if event.kind is Kind.TOOL_CALL:
            step = steps[event.line - 1]
            assert event.call_id in {
                c["call_id"] for c in step["tool_calls"] or step["llm_response"]["tool_calls"]
            }
    results = [e.call_id for e in events if e.kind is Kind.TOOL_RESULT]
    # step 29 records step 28's messages again (the run's last messages): not a second result
    assert len(results) == len(set(results))
    first = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert first.line == 1 and first.content.startswith("Here's the files and directories")


def _step(number: int, calls: list[dict], results: list[dict], messages: list[dict], **extra) -> dict:
    return {
        "step_number": number,
        "timestamp": f"2026-01-18T21:16:{10 + number:02d}.000000",
        "state": "completed",
        "llm_messages": messages or None,
        "llm_response": {
            "content": extra.pop("content", ""),
            "model": "m",
            "finish_reason": "tool_calls",
            "usage": {"input_tokens": 10, "output_tokens": 2},
            "tool_calls": calls or None,
        },
        "tool_calls": extra.pop("recorded_calls", calls) or None,
        "tool_results": results or None,
        "reflection": None,
        "error": extra.pop("error", None),
    }


def _trajectory(path: Path, steps: list, **top) -> Path:
    document = {
        "task": "fix it",
        "start_time": "2026-01-18T21:16:00.000000",
        "end_time": "",
        "provider": "openai",
        "model": "m",
        "max_steps": 20,
        "llm_interactions": [],
        "agent_steps": steps,
        "success": False,
        "final_result": None,
        "execution_time": 0.0,
        **top,
    }
    path.write_text(json.dumps(document, indent=2))
    return path


def _done(call_id: str) -> dict:
    return {"call_id": call_id, "name": "task_done", "arguments": {}, "id": None}


def test_a_refused_task_done_is_a_failed_result_and_the_nudge_a_system_message(tmp_path: Path):
    bash = {"call_id": "c1", "name": "bash", "arguments": {"command": "ls"}, "id": None}
    failed = {"call_id": "c1", "success": False, "result": "", "error": "no such file", "id": None}
    path = _trajectory(
        tmp_path / "trajectory_20260118_211600.json",
        [
            _step(1, [bash], [failed], [{"role": "user", "content": None, "tool_result": failed}]),
            # the model says it is done; the harness finds no patch and says so (the call is not recorded)
            _step(
                2,
                [_done("c2")],
                [],
                [{"role": "user", "content": "ERROR! Your Patch is empty. Please provide a patch."}],
                recorded_calls=[],
            ),
            # a reply without a call: the harness nudges it
            _step(3, [], [], [{"role": "user", "content": "It seems that you have not completed the task."}]),
            _step(4, [], [], [], error="LLM call failed"),
        ],
    )
    events, problems = documents.load(path)
    assert problems == []
    results = [(e.line, e.call_id, e.is_error, e.content) for e in events if e.kind is Kind.TOOL_RESULT]
    assert results == [
        (1, "c1", True, "no such file"),
        (2, "c2", True, "ERROR! Your Patch is empty. Please provide a patch."),
    ]
    system = [(e.line, e.content) for e in events if e.kind is Kind.MESSAGE and e.role == "system"]
    assert system == [(3, "It seems that you have not completed the task."), (4, "LLM call failed")]
    assert not any(e.kind is Kind.SESSION_END for e in events)  # no end_time: still running


def test_bad_steps_are_one_problem_each(tmp_path: Path):
    path = _trajectory(
        tmp_path / "t.json",
        [
            "not a step",
            {"step_number": 2, "timestamp": "never"},
            _step(3, [{"name": 7}], [], []),
            _step(4, [], [], []),
        ],
    )
    events, problems = documents.load(path)
    assert [p.line for p in problems] == [1, 2, 3]
    assert all("\n" not in str(p) and "Traceback" not in str(p) for p in problems)
    assert any(e.kind is Kind.USAGE and e.line == 4 for e in events)


def test_a_broken_trajectory_is_one_clear_problem(tmp_path: Path):
    path = tmp_path / "trajectory_20260101_000000.json"
    path.write_text(
        json.dumps({"task": "x", "start_time": "", "provider": "p", "max_steps": 3, "agent_steps": 5})
    )
    report = scan([str(path)])
    assert len(report.problems) == 1 and "Traceback" not in str(report.problems[0])


def test_watch_reads_the_rewritten_trajectory_and_feeds_only_new_steps(tmp_path: Path):
    assert is_log_name("trajectory_20260118_211615.json")
    full = _document()
    path = tmp_path / "trajectories" / "trajectory_20260118_211615.json"
    path.parent.mkdir()
    partial = {**full, "agent_steps": full["agent_steps"][:10], "end_time": "", "success": False}
    path.write_text(json.dumps(partial, indent=2))

    def rewrite() -> None:
        path.write_text(json.dumps(full, indent=2))  # as the recorder saves after every step

    store, problems = asyncio.run(_follow([str(path.parent)], tmp_path / "w.db", rewrite=rewrite))
    session = "trajectory_20260118_211615"
    expected = scan([str(REAL)])
    assert problems == []
    assert store.count_events(session) == expected.engine.sessions[session].events
    stored = [(r["type"], r["line"], r["call_id"]) for r in store.events(session, limit=10_000)]
    assert len(stored) == len(set(stored))
