"""Vorflux span exports: a real run from tests/corpus/vorflux-opus46, and hand-made bad ones."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from monitor.config import build_config
from monitor.events import Kind
from monitor.formats import documents
from monitor.scan import scan
from tests.formatkit import counts
from tests.watchkit import scanned, watched

CORPUS = Path(__file__).parent / "corpus" / "vorflux-opus46"
REAL = CORPUS / "astropy__astropy-13398.json.gz"


def _trajectory() -> list[dict]:
    return json.loads(gzip.decompress(REAL.read_bytes()))["trajectory"]


def test_the_real_run_each_span_a_call_and_its_result():
    assert documents.kind_of(REAL) == "vorflux"
    assert documents.session_of(REAL) == "astropy__astropy-13398"
    events, problems = documents.load(REAL)
    assert problems == []
    # 221 tool_call spans, each a call and its result; 14 requests the harness answered
    # itself (add_task, add_todos, wait_any_task_result, …) are calls without a span.
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 119,
        "tool_calls": 235,
        "tool_results": 221,
    }
    assert events[0].agent == "vorflux"
    assert events[0].meta["session_id"] == "ba953ab1-5b19-4139-9417-b9739704e6b5"
    errors = [e for e in events if e.kind is Kind.TOOL_RESULT and e.is_error]
    assert len(errors) == 64


def test_the_line_is_the_place_in_the_trajectory():
    trajectory = _trajectory()
    events, _ = documents.load(REAL)
    for event in events:
        if event.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE):
            entry = trajectory[event.line - 1]
            if event.kind is Kind.TOOL_RESULT:
                assert entry["type"] == "tool_call" and entry["tool"] == event.tool
    first_call = next(e for e in events if e.kind is Kind.TOOL_CALL)
    first_result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    # entry 1 is the llm_call asking for bash_execute, entry 2 the span that ran it
    assert (first_call.line, first_result.line) == (2, 2)
    assert first_call.call_id == first_result.call_id == "toolu_01JLgZmtnfjTjNHv9bH84oR6"
    assert first_result.content == "Need to clone" and first_result.meta == {"exit_code": 0}
    # entry 25: read_text_file of a missing file, asked for as `read` by the llm_call at 24
    missing = next(e for e in events if e.kind is Kind.TOOL_RESULT and e.line == 25)
    assert missing.is_error and missing.content.startswith("Error: file not found")
    asked = [e for e in events if e.kind is Kind.TOOL_CALL and e.line == 21]
    assert [e.tool for e in asked] == ["add_todos"]  # no span ran it: the request is the call
    assert max(e.line for e in events if e.line) == len(trajectory)


def test_every_corpus_run_reads_without_problems():
    runs = sorted(CORPUS.glob("*.json.gz"))
    assert len(runs) >= 37
    for run in runs:
        events, problems = documents.load(run)
        assert problems == [], run
        exported = json.loads(gzip.decompress(run.read_bytes()))["trajectory"]
        # One export of the corpus (django-11400) holds no entries at all: nothing to read, nothing wrong.
        assert any(e.kind is Kind.TOOL_RESULT for e in events) or not exported, run


def test_scan_and_watch_agree(tmp_path: Path):
    assert watched(REAL, tmp_path) == scanned(REAL)


def _export(path: Path, trajectory: object) -> Path:
    document = {"instance_id": "x__y-1", "session_id": "s", "total_spans": 3, "trajectory": trajectory}
    path.write_text(json.dumps(document))
    return path


def test_bad_entries_are_one_problem_each(tmp_path: Path):
    path = _export(
        tmp_path / "run.json",
        [
            "not an entry",
            {"type": "tool_call", "tool": 7, "arguments": {}, "result": ""},
            {"type": "tool_call", "tool": "bash", "timestamp": "yesterday", "result": ""},
            {"type": "tool_call", "tool": "bash", "arguments": {"command": "ls"}, "result": {"exitCode": 2}},
            {"type": 3},
        ],
    )
    assert documents.session_of(path) == "x__y-1"
    events, problems = documents.load(path)
    assert [p.line for p in problems] == [1, 2, 3, 5]
    assert all("\n" not in str(p) for p in problems)
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(e.line, e.is_error, e.meta) for e in results] == [(4, True, {"exit_code": 2})]


def test_a_broken_export_is_one_clear_problem(tmp_path: Path):
    path = _export(tmp_path / "run.json", {"not": "a list"})
    report = scan([str(path)])
    assert report.files == 1 and len(report.problems) == 1
    assert "Traceback" not in str(report.problems[0])
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(
        gzip.compress(json.dumps({"instance_id": "a", "total_spans": 1, "trajectory": []}).encode())[:30]
    )
    report = scan([str(cut)])
    assert len(report.problems) == 1 and "Traceback" not in str(report.problems[0])


HOOK = {"command": "test -w /memory && mkdir -p /memory/sessions"}
NO = {"stdout": "", "stderr": "", "exitCode": 1}


def _span(args: dict, result: object = NO, tool: str = "bash_execute") -> dict:
    return {
        "type": "tool_call",
        "tool": tool,
        "timestamp": "2026-05-04 23:25:04.6",
        "arguments": args,
        "result": result,
    }


def _reply(*calls: dict) -> dict:
    requests = [
        {"id": f"toolu_{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(args)}}
        for i, args in enumerate(calls)
    ]
    return {
        "type": "llm_call",
        "timestamp": "2026-05-04 23:25:04.5",
        "output": {"content": "", "tool_calls": requests},
    }


def _harness_lines(events: list) -> list[tuple[str, int]]:
    return [(e.kind.value, e.line) for e in events if e.meta.get("harness")]


def test_a_span_no_reply_asked_for_is_the_harnesss(tmp_path: Path):
    """The memory hook the harness runs between steps is marked, and no detector counts it."""
    trajectory: list[dict] = []
    for n in range(6):
        step = {"command": f"python -c 'print({n})'"}
        trajectory += [_reply(step), _span(step, {"stdout": str(n), "exitCode": 0}), _span(HOOK), _span(HOOK)]
    events, problems = documents.load(_export(tmp_path / "run.json", trajectory))
    assert problems == []
    hooks = [4 * n + 3 for n in range(6)] + [4 * n + 4 for n in range(6)]
    assert sorted(line for kind, line in _harness_lines(events) if kind == "tool_call") == sorted(hooks)
    assert all(not e.meta.get("harness") for e in events if e.line in (2, 6, 10))
    report = scan([str(tmp_path / "run.json")])
    assert report.detections == []


def test_without_recorded_requests_only_a_repeat_within_one_reply_is_the_harnesss(tmp_path: Path):
    """An export whose replies record no requests: the same call twice after one reply (before the
    next) is the harness re-running it, with other spans between or not; the same call after another
    reply is the model's (and still a loop)."""
    plain = {"type": "llm_call", "timestamp": "2026-05-04 23:25:04.5", "output": {"content": ""}}
    step = {"command": "python repro.py"}
    read = {"filePath": "/code/a.py"}
    trajectory = [
        plain,
        _span(step),
        _span(HOOK),
        _span(HOOK),
        _span(HOOK),
        plain,
        _span(step),
        _span(HOOK),
        _span(read, "x = 1", tool="read_text_file"),
        _span(HOOK),
        plain,
        _span(step),
    ]
    events, _ = documents.load(_export(tmp_path / "run.json", trajectory))
    assert {line for _, line in _harness_lines(events)} == {3, 4, 5, 8, 10}
    report = scan([str(tmp_path / "run.json")])
    assert [(d.detector, d.line) for d in report.detections if d.level.label == "warn"] == [
        ("exact_repeat", 12)
    ]


def test_calls_without_arguments_pair_by_tool_name(tmp_path: Path):
    """`list_tasks` and `list-git-repositories` both take no arguments: a request pairs with a span of
    its own tool, so each call is counted once (it used to be one call left alone, one mispaired)."""
    requests = [
        {"id": "toolu_1", "type": "function", "function": {"name": "list_tasks", "arguments": "{}"}},
        {
            "id": "toolu_2",
            "type": "function",
            "function": {"name": "list-git-repositories", "arguments": "{}"},
        },
    ]
    trajectory = [
        {
            "type": "llm_call",
            "timestamp": "2026-05-04 23:25:04.5",
            "output": {"content": "", "tool_calls": requests},
        },
        _span({}, {"repos": ["/code/django"]}, tool="list-git-repositories"),
    ]
    events, _ = documents.load(_export(tmp_path / "run.json", trajectory))
    calls = [(e.tool, e.call_id, e.line) for e in events if e.kind is Kind.TOOL_CALL]
    assert calls == [("list_tasks", "toolu_1", 1), ("list-git-repositories", "toolu_2", 2)]


def test_a_call_recognised_as_the_harnesss_once_is_the_harnesss_everywhere(tmp_path: Path):
    """An export whose replies record no requests (django__django-15930): the hook run three times
    after one reply is recognised as the harness's; run once after each of three later replies it is
    still the harness's, not the agent repeating a call (it used to warn exact_repeat). A call of the
    model's own, once after each reply, is still the model's."""
    plain = {"type": "llm_call", "timestamp": "2026-05-04 23:25:04.5", "output": {"content": ""}}
    step = {"command": "python repro.py"}
    trajectory = [plain, _span(HOOK), _span(HOOK), _span(HOOK)]
    for n in range(3):
        trajectory += [plain, _span({"command": f"sed -n '{n},+9p' a.py"}, {"stdout": f"{n}", "exitCode": 0})]
        trajectory += [_span(HOOK)]
    trajectory += [plain, _span(step), plain, _span(step), plain, _span(step)]
    events, _ = documents.load(_export(tmp_path / "run.json", trajectory))
    assert {line for _, line in _harness_lines(events)} == {2, 3, 4, 7, 10, 13}
    report = scan([str(tmp_path / "run.json")])
    assert [(d.detector, d.line) for d in report.detections if d.level.label == "warn"] == [
        ("exact_repeat", 19)
    ]


def test_a_reply_after_the_harness_acted_on_its_own_is_marked_resumed():
    """scikit-learn-25232: after the final answer (71) and a reviewer's note (72) the harness
    runs its memory hook (73-75) and the agent answers again (76); after its review of that
    answer (a judge_call, 77) the agent replies once more (78). Those two replies answer the
    harness; replies with nothing of the harness's between are not marked."""
    events, problems = documents.load(CORPUS / "scikit-learn__scikit-learn-25232.json.gz")
    assert problems == []
    resumed = {e.line for e in events if e.kind is Kind.MESSAGE and e.meta.get("resumed") is True}
    assert {76, 78} <= resumed
    assert not {71, 72} & resumed


def test_two_agents_asking_for_the_same_reads_at_once_are_no_cycle(tmp_path: Path):
    """django-12708: the agent and its explore subagent, in one export, each search and
    read the same code; the second search was asked for (its reply) before the first one
    ran. A call asked for before the same call's earlier span ran cannot repeat it: no
    cycle. The same two calls asked again after their results came back are one."""
    grep = {"command": "grep -n 'def _constraint_names' schema.py"}
    read = {"command": "sed -n 1140,1160p schema.py"}
    found, shown = "1142:    def _constraint_names(self, model):", "    def _constraint_names(self, model):\n"
    asks = iter(range(100))

    def ask(args: dict) -> dict:  # a reply asking for one call, its id its own
        reply = _reply(args)
        reply["output"]["tool_calls"][0]["id"] = f"toolu_{next(asks)}"
        return reply

    together = [
        ask(grep),
        ask(grep),  # the subagent asks for the same search before the first one ran
        _span(grep, found),
        ask(read),
        _span(read, shown),
        _span(grep, found),  # the subagent's search
        ask(read),
        _span(read, shown),
    ]
    config = build_config({"detectors": {"cycle": {"min_repetitions": 2}}})
    report = scan([str(_export(tmp_path / "together.json", together))], config)
    assert [d.detector for d in report.detections if d.detector == "cycle"] == []
    events, _ = documents.load(tmp_path / "together.json")
    assert [e.meta.get("asked") for e in events if e.kind is Kind.TOOL_CALL] == [1, 4, 2, 7]
    after = [
        step for _ in range(2) for step in (ask(grep), _span(grep, found), ask(read), _span(read, shown))
    ]
    report = scan([str(_export(tmp_path / "after.json", after))], config)
    assert [d.detector for d in report.detections if d.detector == "cycle"] == ["cycle"]
