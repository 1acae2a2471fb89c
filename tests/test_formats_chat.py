"""Chat-message lists (OpenAI, Anthropic, both mini-swe-agent shapes), and the
one-line refusal of files that are no supported format (scan exits 2 when
nothing it was given was an agent log)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from monitor.events import Kind, Level
from monitor.formats import documents
from monitor.formats.chat import observation
from monitor.scan import scan
from tests.formatkit import counts, decode_file, write_jsonl

GEMINI = "mini-swe-agent-gemini3"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOOPWATCH_CONFIG_DIR": os.devnull + "-no-config"}
    return subprocess.run(
        [sys.executable, "-m", "monitor", "scan", *args], capture_output=True, env=env, text=True
    )


def openai_messages(command: str = "ls", repeats: int = 1, rc: int = 0, output: str = "a.py") -> list[dict]:
    out: list[dict] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for n in range(repeats):
        out.append(
            {
                "role": "assistant",
                "content": f"Looking ({n}).",
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
                "extra": {"timestamp": 1_763_500_000.0 + 10 * n},
            }
        )
        out.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{n}",
                "content": f"<returncode>{rc}</returncode>\n<output>\n{output}\n</output>",
                "extra": {"timestamp": 1_763_500_005.0 + 10 * n},
            }
        )
    return out


def mini_document(
    messages: list[dict], instance: str = "django__django-1", fmt: str = "mini-swe-agent-1.1"
) -> dict:
    return {
        "info": {"exit_status": "Submitted", "config": {"model": {"model_name": "m-1"}}},
        "messages": messages,
        "trajectory_format": fmt,
        "instance_id": instance,
    }


def write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value))
    return path


def load(path: Path):
    events, problems = documents.load(path)
    assert not problems, problems
    return events


def test_returncode_and_output_are_taken_apart():
    """mini-swe-agent's observation: the exit status, and the text <output> held."""
    assert observation("<returncode>1</returncode>\n<output>\n</output>") == ("", 1)
    assert observation("<returncode>0</returncode>\n<output>\nhi\n</output>") == ("hi", 0)
    assert observation("no tags here") == ("no tags here", None)


def test_openai_document_with_tool_calls(tmp_path: Path):
    """mini-swe-agent-1.1: tool_calls become calls (arguments parsed), role tool the
    results, exit status from <returncode>, times from extra.timestamp, and the
    instance id, format and model in the session's meta."""
    path = write_json(
        tmp_path / "django__django-1.traj.json",
        mini_document(openai_messages("grep -n X f.py", 2, rc=1, output="")),
    )
    assert documents.kind_of(path) == "chat"
    events = load(path)
    start, *rest = events
    assert start.kind is Kind.SESSION_START and start.agent == "mini-swe-agent"
    assert start.meta == {
        "instance_id": "django__django-1",
        "trajectory_format": "mini-swe-agent-1.1",
        "model": "m-1",
    }
    calls = [e for e in rest if e.kind is Kind.TOOL_CALL]
    results = [e for e in rest if e.kind is Kind.TOOL_RESULT]
    assert [(c.tool, c.args, c.call_id, c.line) for c in calls] == [
        ("bash", {"command": "grep -n X f.py"}, "call_0", 3),
        ("bash", {"command": "grep -n X f.py"}, "call_1", 5),
    ]
    assert [(r.call_id, r.content, r.is_error, r.meta, r.ts) for r in results] == [
        ("call_0", "", True, {"exit_code": 1}, 1_763_500_005.0),
        ("call_1", "", True, {"exit_code": 1}, 1_763_500_015.0),
    ]
    assert events[-1].kind is Kind.SESSION_END and events[-1].status == "Submitted"
    assert {e.session for e in events} == {"django__django-1"}


def test_anthropic_blocks_in_a_bare_array(tmp_path: Path):
    """Anthropic Messages: tool_use / tool_result blocks (is_error kept), text blocks as messages."""
    messages = [
        {"role": "user", "content": "Run the tests."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "pytest"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu1",
                    "is_error": True,
                    "content": [{"type": "text", "text": "1 failed"}],
                }
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Done."}],
        },
    ]
    path = write_json(tmp_path / "run.json", messages)
    assert documents.kind_of(path) == "chat"
    events = load(path)
    assert [(e.kind.value, e.role or e.call_id) for e in events] == [
        ("session_start", None),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", "tu1"),
        ("tool_result", "tu1"),
        ("message", "assistant"),
    ]
    result = events[4]
    assert result.is_error and result.content == "1 failed" and events[0].agent == "chat"
    assert events[3].tool == "Bash" and events[3].args == {"command": "pytest"}


def test_legacy_function_call(tmp_path: Path):
    """OpenAI's older function_call / role function pair is a call and its result."""
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {"role": "function", "name": "get_weather", "content": "18C"},
    ]
    events = load(write_json(tmp_path / "legacy.json", messages))
    call, result = [e for e in events if e.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT)]
    assert call.tool == "get_weather" and call.args == {"city": "Paris"}
    assert result.call_id == call.call_id and result.content == "18C" and not result.is_error


def test_jsonl_of_messages_is_sniffed_and_forced(tmp_path: Path):
    """One message a line is the `chat` line format, found from its first record or forced."""
    path = write_jsonl(tmp_path / "chat.jsonl", openai_messages("ls", 2))
    events, decoder = decode_file(path)
    assert decoder.format == "chat" and decoder.problem_count == 0
    assert counts(events) == {
        "system_messages": 1,
        "user_messages": 1,
        "assistant_messages": 2,
        "tool_calls": 2,
        "tool_results": 2,
    }
    forced, decoder = decode_file(path, fmt="chat")
    assert [e.kind for e in forced] == [e.kind for e in events]
    result = run_cli("--format", "chat", str(path))
    assert result.returncode == 0, result.stderr


def test_format_chat_forces_a_document_that_is_not_sniffed(tmp_path: Path):
    """`--format chat` reads a messages document whose first bytes do not say so."""
    padding = {"notes": "x" * 70_000}
    path = write_json(tmp_path / "odd.json", {**padding, **mini_document(openai_messages("ls", 1))})
    assert documents.kind_of(path) is None
    forced = run_cli("--format", "chat", str(path))
    assert forced.returncode == 0 and "1 session(s)" in forced.stdout, forced.stderr
    refused = run_cli(str(path))
    assert (
        refused.returncode == 2
        and "not a supported format: a JSON document with keys notes, info" in refused.stderr
    )


def classic(messages: list[tuple[str, str]]) -> list[dict]:
    out = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>Fix it</pr_description>"},
    ]
    for n, (role, text) in enumerate(messages):
        message: dict = {"role": role, "content": text}
        if role == "assistant":
            message["extra"] = {
                "response": {
                    "created": 1_763_508_900 + n,
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cost": 0.001},
                }
            }
        out.append(message)
    return out


def test_classic_mini_swe_agent_fenced_actions(tmp_path: Path):
    """mini-swe-agent-1: the one ```bash block after THOUGHT is the call, the next user
    message starting <returncode> its result; a format error is the harness talking
    (a system message), a timeout answers the pending call as a failure."""
    messages = classic(
        [
            ("assistant", "THOUGHT: list files.\n\n```bash\nls -F\n```"),
            ("user", "<returncode>0</returncode>\n<output>\na.py\n</output>"),
            ("assistant", "THOUGHT: two at once.\n\n```bash\nls\n```\n```bash\npwd\n```"),
            ("user", "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."),
            ("assistant", "THOUGHT: wait.\n\n```bash\nsleep 999\n```"),
            (
                "user",
                "The last command <command>sleep 999</command> timed out and has been killed.\n"
                "The output of the command was:\n <output>\n\n</output>",
            ),
            ("assistant", "THOUGHT: grep.\n\n```bash\ngrep -n foo a.py\n```"),
            ("user", "<returncode>1</returncode>\n<output>\n</output>"),
        ]
    )
    path = write_json(tmp_path / "t.traj.json", mini_document(messages, fmt="mini-swe-agent-1"))
    events = load(path)
    calls = [e for e in events if e.kind is Kind.TOOL_CALL]
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert [c.args["command"] for c in calls] == ["ls -F", "sleep 999", "grep -n foo a.py"]
    assert [(r.call_id, r.content, r.is_error) for r in results] == [
        (calls[0].call_id, "a.py", False),
        (calls[1].call_id, results[1].content, True),
        (calls[2].call_id, "", True),
    ]
    assert "timed out" in results[1].content and results[2].meta == {"exit_code": 1}
    said = [(e.role, e.content[:14]) for e in events if e.kind is Kind.MESSAGE]
    assert said == [
        ("system", "You are a help"),
        ("user", "<pr_descriptio"),
        ("assistant", "THOUGHT: list "),
        ("assistant", "THOUGHT: two a"),
        ("system", "Please always "),
        ("assistant", "THOUGHT: wait."),
        ("assistant", "THOUGHT: grep."),
    ]
    assert "```" not in events[3].content  # the action is the call, not the message
    assert calls[0].ts == 1_763_508_900 and results[0].ts == calls[0].ts
    usage = [e for e in events if e.kind is Kind.USAGE]
    assert len(usage) == 4 and usage[0].input_tokens == 100 and usage[0].cost_usd == 0.001


def test_text_based_v2_fence(tmp_path: Path):
    """mini-swe-agent 2's text-based models fence the action as mswea_bash_command."""
    messages = classic(
        [
            ("assistant", "THOUGHT: look.\n\n```mswea_bash_command\nls\n```"),
            ("user", "<returncode>0</returncode>\n<output>\na.py\n</output>"),
        ]
    )
    events = load(write_json(tmp_path / "v2.traj.json", mini_document(messages)))
    (call,) = [e for e in events if e.kind is Kind.TOOL_CALL]
    (result,) = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert call.args == {"command": "ls"} and result.call_id == call.call_id and result.content == "a.py"


def test_two_runs_of_one_task_are_two_sessions(tmp_path: Path):
    """Two files with the same instance id (and the same name, in two folders) are never merged."""
    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        write_json(tmp_path / run / "django__django-1.traj.json", mini_document(openai_messages("ls", 2)))
    report = scan([str(tmp_path)])
    assert report.files == 2 and len(report.engine.sessions) == 2
    assert set(report.engine.sessions) == {"django__django-1", "django__django-1~2"}


def test_the_real_gemini_runs_read_without_problems(real_fixtures: Path):
    """The 40 real classic-format runs: every file a session, every action a call
    with its result (but the last, the submission, which ends the run), no problem."""
    paths = sorted((real_fixtures / GEMINI).glob("*.traj.json"))
    assert len(paths) == 40
    report = scan([str(p) for p in paths])
    assert report.problem_count == 0 and len(report.engine.sessions) == 40
    assert set(report.formats.values()) == {"chat"}
    events = load(paths[0])
    calls = [e for e in events if e.kind is Kind.TOOL_CALL]
    answered = {e.call_id for e in events if e.kind is Kind.TOOL_RESULT}
    assert len(calls) == len({c.call_id for c in calls}) == len(answered) + 1
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in calls[-1].args["command"]


def test_the_loop_of_sympy_15976_is_caught_in_its_messages(real_fixtures: Path):
    """The five identical no-op seds of messages 40-48 reach warn there."""
    report = scan([str(real_fixtures / GEMINI / "sympy__sympy-15976.traj.json")])
    assert any(d.level >= Level.WARN and 40 <= (d.line or 0) <= 48 for d in report.detections)


# -- files of no supported format ---------------------------------------------------------------


def test_an_unknown_json_document_is_one_line(tmp_path: Path):
    """A JSON document nobody writes agent logs in: one line naming its keys, exit 2."""
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"info": {}, "messages": "none", "other": 1}, indent=2))
    result = run_cli(str(path))
    assert result.returncode == 2
    refusals = [line for line in result.stderr.splitlines() if "not a supported format" in line]
    (refusal,) = refusals
    assert refusal.startswith(
        f"loopwatch: skipped {path}: not a supported format: a JSON document with keys "
        "info, messages, other; supported: native loopwatch JSONL, Claude Code"
    )
    assert "nothing given could be read as agent events" in result.stderr


def test_a_binary_file_is_one_line_and_exit_2(tmp_path: Path):
    """A binary (an executable) is one line, not one per physical line, and scan exits 2."""
    path = tmp_path / "ls"
    path.write_bytes(Path(sys.executable).read_bytes()[:200_000])
    result = run_cli(str(path))
    assert result.returncode == 2
    assert len([line for line in result.stderr.splitlines() if "skipped" in line]) == 1
    assert "binary data" in result.stderr


def test_pretty_printed_unknown_json_lines_are_one_line(tmp_path: Path):
    """A text file that is not JSON lines at all: one line, with the first reason."""
    path = tmp_path / "notes.jsonl"
    path.write_text("hello\nworld\n" * 300)
    report = scan([str(path)])
    assert report.problem_count == 1 and report.nothing_read
    assert "text that is not JSON lines (invalid JSON" in report.problems[0].reason


def test_an_empty_directory_says_so(tmp_path: Path):
    """Given nothing to scan, scan says so and exits 2."""
    result = run_cli(str(tmp_path))
    assert result.returncode == 2 and "nothing to scan" in result.stderr


def test_a_supported_log_beside_an_unsupported_file_is_scanned(tmp_path: Path):
    """One readable log among unsupported files: the refusals are reported, the exit status is the log's."""
    write_jsonl(tmp_path / "chat.jsonl", openai_messages("ls", 1))
    (tmp_path / "x.json").write_text('{"messages": [], "role": 1}')
    result = run_cli(str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("not a supported format") == 1


def test_a_mini_swe_agent_trajectory_whose_info_fills_the_first_bytes():
    """live-swe-agent's psf__requests-1142: a 909 KB submission in ``info`` comes before ``messages``
    (was "not a supported format"); its ``exit`` message is skipped, its FormatError the harness's."""
    path = Path(__file__).parent / "corpus" / "live-swe-agent-gpt5mini" / "psf__requests-1142.traj.json.gz"
    assert documents.kind_of(path) == "chat"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "system_messages": 2,
        "user_messages": 1,
        "tool_calls": 12,
        "usage": 12,
        "tool_results": 11,
        "session_end": 1,
    }
    assert events[0].agent == "mini-swe-agent"
    harness = [e for e in events if e.role == "system" and e.line == 3]
    assert harness and harness[0].content.startswith("No tool calls found")
    assert events[-1].status == "Submitted"
