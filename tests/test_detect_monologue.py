"""Monologue: text-only turns and empty replies in a row (the summary loop of note 003)."""

from __future__ import annotations

import json
from pathlib import Path

from monitor.config import build_config
from monitor.events import Level
from monitor.scan import scan
from tests.eventkit import Script, by, only
from tests.formatkit import write_jsonl

MINE = ("output_similarity", "turn_similarity", "chanting", "monologue")


def run(script: Script, **settings):
    return by(script.run(only("monologue", **settings)), "monologue")


def summaries(n: int, usage: bool = True, step: float = 20) -> Script:
    s = Script(step=step)
    s.user("Refactor the storage layer.")
    for i in range(n):
        s.say(f"Summary {i}: so far I have looked at the storage layer; next I will refactor it.")
        if usage:
            s.usage(0.02)
    return s


def test_three_text_only_turns_warn():
    """Three replies without a tool call or a user turn between them warn, on the third."""
    s = summaries(3)
    hits = run(s)
    assert len(hits) == 1 and hits[0].count == 3 and hits[0].level is Level.WARN
    assert hits[0].line == s.line  # the usage that closed the third reply
    assert hits[0].pattern == "monologue:text_only"
    assert "tool" in hits[0].advice


def test_each_further_turn_is_reported_with_rising_count():
    """The 4th and 5th text-only turns are reported again, count rising, one pattern."""
    hits = run(summaries(5))
    assert [d.count for d in hits] == [3, 4, 5]
    assert [d.level for d in hits] == [Level.WARN, Level.WARN, Level.CRITICAL]  # the ladder climbs


def test_turns_without_usage_reports_are_split_by_time():
    """An agent that reports no usage: replies twenty seconds apart are separate turns.
    A reply is only known to have no tool call once the next event arrives, so the third
    is judged when the fourth starts."""
    s = summaries(3, usage=False)
    assert not run(s)
    s.say("Summary 3: still looking at the storage layer.")
    hits = run(s)
    assert [d.count for d in hits] == [3] and hits[0].line == s.line


def test_two_text_only_turns_then_a_tool_call_is_fine():
    """Thinking out loud twice and then acting is how agents work."""
    s = summaries(2)
    s.say("Now reading the module.").call("read", {"path": "store.py"}, "class Store: ...")
    s.say("The Store class mixes I/O and logic; splitting it.").usage(0.02)
    s.say("First the reader part.").usage(0.02)
    assert not run(s)


def test_user_turn_resets():
    """An interactive chat is a string of text-only replies, each answering a person."""
    s = Script(step=20)
    for question in ("What is a monad?", "And a functor?", "And an applicative?", "Examples?"):
        s.user(question).say("Here is an explanation with an example.").usage(0.01)
    assert not run(s)


def test_streamed_chunks_are_one_turn():
    """One reply streamed as twenty chunks a fraction of a second apart is one turn."""
    s = Script(step=0.05)
    s.user("Explain the plan.")
    for i in range(20):
        s.say(f"chunk {i} ")
    s.usage(0.02)
    assert not run(s)


def test_three_empty_replies_warn():
    """Empty or white-space-only replies three times in a row warn as such."""
    s = Script(step=20)
    s.user("Continue.")
    for text in ("", "   ", "\n\n"):
        s.say(text).usage(0.01)
    hits = run(s)
    assert hits and hits[-1].pattern == "monologue:empty" and hits[-1].count == 3
    assert "empty" in hits[-1].message


def test_empty_replies_between_tool_calls_are_not_counted():
    """Turns that call tools are not empty replies, whatever their text."""
    s = Script(step=20)
    for i in range(4):
        s.say("").call("bash", {"command": f"make step{i}"}, "ok")
    assert not run(s)


def _claude_transcript(path: Path, responses: list[list[dict]]) -> Path:
    """A Claude Code transcript: a prompt, then each response as one record per block
    (as Claude Code writes them), each record repeating the message's usage."""
    base = {
        "sessionId": path.stem,
        "version": "2.1.39",
        "cwd": "/w",
        "isSidechain": False,
        "userType": "external",
    }
    records = [
        dict(
            base,
            type="user",
            uuid="u0",
            timestamp="2026-02-10T10:00:00Z",
            message={"role": "user", "content": "Refactor the storage layer."},
        )
    ]
    second = 0
    for n, blocks in enumerate(responses):
        for block in blocks:
            second += 15
            records.append(
                dict(
                    base,
                    type="assistant",
                    uuid=f"a{second}",
                    timestamp=f"2026-02-10T10:{second // 60:02d}:{second % 60:02d}Z",
                    message={
                        "id": f"msg_{n}",
                        "role": "assistant",
                        "model": "claude-opus-4-6",
                        "content": [block],
                        "usage": {"input_tokens": 9, "output_tokens": 40},
                    },
                )
            )
    return write_jsonl(path, records)


def test_claude_code_final_answer_in_several_records_is_one_turn(tmp_path: Path):
    """A final answer written as white space, thinking, text, thinking, text, thinking,
    text records (one API message, minutes long) is one turn, not a monologue."""
    text = {"type": "text", "text": "Part of the answer."}
    think = {"type": "thinking", "thinking": "...", "signature": ""}
    path = _claude_transcript(
        tmp_path / "aaaaaaaa-1111-2222-3333-444444444444.jsonl",
        [[{"type": "text", "text": "\n\n"}, think, text, think, text, think, text]],
    )
    report = scan([str(path)], config=only("monologue"))
    assert report.formats[str(path)] == "claude" and not report.detections


def test_claude_code_text_only_responses_in_a_row_warn(tmp_path: Path):
    """Separate API messages with text only and no person between them: the third is
    judged (and warns) when the fourth begins -- until then a tool_use record could follow."""
    responses = [[{"type": "text", "text": f"Summary {n} of what I did."}] for n in range(4)]
    path = _claude_transcript(tmp_path / "bbbbbbbb-1111-2222-3333-444444444444.jsonl", responses)
    report = scan([str(path)], config=only("monologue"))
    hits = [d for d in report.detections if d.level >= Level.WARN]
    assert [(d.count, d.line) for d in hits] == [(3, 5)]  # line 5: the fourth response


def test_real_transcripts_stay_below_warn(real_fixtures: Path):
    """The real Claude Code, Codex and SWE-agent sessions (honest work) reach no warning
    from the four text detectors."""
    paths = [str(real_fixtures / name) for name in ("claude-code", "codex", "swe-agent")]
    report = scan(paths)
    assert report.events > 1000 and report.problem_count == 0
    mine = [d for d in report.detections if d.detector in MINE and d.level >= Level.WARN]
    assert not mine, [(d.detector, d.where, d.message) for d in mine]


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_format_error_loop_says_the_harness_refused_each_reply():
    """mini-swe-agent answers every reply without exactly one action with a format error
    (a harness message, not a user turn): the reason says so.  Was: "9 assistant turns in a
    row without a tool call or a user turn" (real run, tests/fixtures/README.md)."""
    path = FIXTURES / "mini-swe-agent-gemini3" / "django__django-14349.traj.json"
    hits = by(scan([str(path)], config=only("monologue")).detections, "monologue")
    longest = max(hits, key=lambda d: d.count)
    assert longest.count == 9
    assert longest.message.startswith(
        "9 replies in a row without a tool call the harness would run, each refused: "
    )
    assert "EXACTLY ONE action in triple backticks" in longest.message
    assert "user turn" not in longest.message
    assert longest.summary.startswith("sent 9 replies in a row that the harness refused")
    assert "format it asks for" in longest.advice


def test_replies_with_nothing_between_still_say_no_user_turn():
    """Without a harness answer between the replies the reason stays as it was."""
    hits = run(summaries(3))
    assert hits[0].message == "3 assistant turns in a row without a tool call or a user turn"


def _vorflux(path: Path, requests: bool) -> Path:
    """A Vorflux export: a reply that runs one command, then four replies of an orchestrator
    that dispatches and waits for its subagents (calls the harness handles itself, no span)."""
    command = {"command": "git diff --stat"}
    asked = [
        {"id": "toolu_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps(command)}}
    ]
    replies = [
        "Both agents approve the fix. Let me check on the testing agent, then dispatch the build agent.",
        "The testing agent is still running. Let me send it the setup message while I dispatch the build agent.",
        "I need to evaluate whether this is an intermediate response (a test plan) or the final testing report.",
        "The rules say I must not modify test files. Let me dispatch the build agent with the feedback verbatim.",
    ]
    trajectory: list[dict] = [
        {
            "type": "llm_call",
            "timestamp": "2026-05-04 23:38:10.0",
            "output": {"content": "Checking the diff.", "tool_calls": asked if requests else []},
        },
        {
            "type": "tool_call",
            "tool": "bash_execute",
            "timestamp": "2026-05-04 23:38:11.0",
            "arguments": command,
            "result": {"stdout": " django/db/models/expressions.py | 6 ++++++", "exitCode": 0},
        },
    ]
    for n, text in enumerate(replies):
        trajectory.append(
            {"type": "llm_call", "timestamp": f"2026-05-04 23:38:{20 + 5 * n}.0", "output": {"content": text}}
        )
    document = {"instance_id": "x__y-1", "session_id": "s", "total_spans": 6, "trajectory": trajectory}
    path.write_text(json.dumps(document))
    return path


def test_replies_whose_calls_the_export_does_not_record_are_no_monologue(tmp_path: Path):
    """An export whose replies record no requests (django__django-15930): an orchestrator
    dispatching subagents leaves only its text; the log cannot say it made no call, so its
    replies are never counted as turns without one. Where the export records requests, the
    same replies asked for nothing: still a monologue."""
    blind = scan([str(_vorflux(tmp_path / "blind.json", requests=False))])
    assert [d for d in blind.detections if d.detector == "monologue"] == []
    recorded = scan([str(_vorflux(tmp_path / "recorded.json", requests=True))])
    warned = [d.line for d in recorded.detections if d.detector == "monologue" and d.level >= Level.WARN]
    assert warned == [6]


def _wrap_up(path: Path, restated: int) -> Path:
    """A Vorflux export of a finished run: the agent commits, gives its final answer, and then,
    each time the harness has run its memory hook and reviewed the answer (a ``judge_call``),
    restates it without a call (``restated`` times)."""
    commit = {"command": "git add -A && git commit -m fix"}
    hook = {"command": "test -w /memory && mkdir -p /memory/sessions"}
    asked = [
        {"id": "toolu_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps(commit)}}
    ]
    trajectory: list[dict] = [
        {
            "type": "llm_call",
            "timestamp": "2026-05-05 13:10:00.0",
            "output": {"content": "Committing.", "tool_calls": asked},
        },
        {
            "type": "tool_call",
            "tool": "bash_execute",
            "timestamp": "2026-05-05 13:10:01.0",
            "arguments": commit,
            "result": {"stdout": "[fix add1c67] fix", "exitCode": 0},
        },
        {
            "type": "llm_call",
            "timestamp": "2026-05-05 13:10:10.0",
            "output": {"content": "Here is the final diff: ..."},
        },
    ]
    for n in range(restated):
        minute = 11 + n
        trajectory += [
            {
                "type": "tool_call",
                "tool": "bash_execute",
                "timestamp": f"2026-05-05 13:{minute}:01.0",
                "arguments": hook,
                "result": {"stdout": "", "exitCode": 1},
            },
            {"type": "judge_call", "model": "gpt-5.5-high", "timestamp": f"2026-05-05 13:{minute}:05.0"},
            {
                "type": "llm_call",
                "timestamp": f"2026-05-05 13:{minute}:10.0",
                "output": {
                    "content": f"The work is complete ({n}): the commit is made and the diff shown above."
                },
            },
        ]
    document = {"instance_id": "x__y-2", "session_id": "s", "total_spans": 3, "trajectory": trajectory}
    path.write_text(json.dumps(document))
    return path


def test_a_final_answer_restated_when_the_harness_asks_again_is_wrapping_up(tmp_path: Path):
    """scikit-learn-25232 (read honest): after the final answer, the harness runs its hooks and
    reviews the reply, and the agent says again that it is done. Replies the harness resumed
    warn from the fourth in a row (pylint-4661, read stuck: the deliverable posted four times)."""
    for restated, expected in ((3, []), (4, [15])):  # (a turn is judged when the next one starts)
        path = _wrap_up(tmp_path / f"wrap-{restated}.json", restated)
        warned = [
            d.line
            for d in scan([str(path)]).detections
            if d.detector == "monologue" and d.level >= Level.WARN
        ]
        assert warned == expected, restated


def test_conservative_waits_one_more_resumed_reply(tmp_path: Path):
    """The conservative preset asks one turn more of every monologue count (4 plain, 4 empty),
    and so of a streak the harness resumed too: five restated answers, not four (django-15268,
    read honest: the finished fix restated four times after the harness's reviews)."""
    config = build_config({"preset": "conservative"})
    for restated, expected in ((4, []), (5, [18])):
        path = _wrap_up(tmp_path / f"wrap-{restated}.json", restated)
        warned = [
            d.line
            for d in scan([str(path)], config).detections
            if d.detector == "monologue" and d.level >= Level.WARN
        ]
        assert warned == expected, restated


def test_a_final_answer_given_again_when_resumed_is_no_output_repeat(tmp_path: Path):
    """django-17029 (read honest): the final diff given again after each of the harness's hooks
    and reviews. A resumed reply starts output_similarity over, as a user turn does."""
    path = _wrap_up(tmp_path / "wrap.json", 4)
    warned = [
        d for d in scan([str(path)]).detections if d.detector == "output_similarity" and d.level >= Level.WARN
    ]
    assert warned == []
