"""Aider chat histories (``.aider.chat.history.md``): a session a run, the file's lines as lines.

The real history is tests/fixtures/aider/mozgoslav/.aider.chat.history.md; the
inline ones are written line for line as Aider writes its history (``#### ``
input, ``> `` output ending in two spaces), with Aider's own messages.
"""

from __future__ import annotations

from pathlib import Path

from monitor.events import Kind
from monitor.formats import documents
from monitor.scan import expand_paths, scan
from tests.formatkit import counts

REAL = "aider/mozgoslav/.aider.chat.history.md"


def test_the_real_history(real_fixtures: Path):
    path = real_fixtures / REAL
    assert documents.kind_of(path) == "aider"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 3,
        "user_messages": 28,  # 21 typed, and 7 times the person said yes to "Add file to the chat?"
        "assistant_messages": 16,
        "usage": 14,
        "tool_calls": 2,
        "tool_results": 2,
        "system_messages": 1,
    }
    # Aider's own error, answering no call, is the harness talking.
    (error,) = [e for e in events if e.kind is Kind.MESSAGE and e.role == "system"]
    assert error.line == 19 and error.content.startswith("litellm.AuthenticationError:")
    starts = [e for e in events if e.kind is Kind.SESSION_START]
    assert [s.session for s in starts] == [
        "mozgoslav@2026-04-22T22:40:12",
        "mozgoslav@2026-04-22T22:40:47",
        "mozgoslav@2026-04-22T23:13:03",
    ]
    assert starts[1].meta == {"model": "lm_studio/qwen3.6-35b-a3b-uncensored-hauhaucs-aggressive"}
    edit = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert (edit.line, edit.content, edit.is_error) == (4199, "Applied edit to Topology", False)
    usage = next(e for e in events if e.kind is Kind.USAGE)
    assert (usage.line, usage.input_tokens, usage.output_tokens) == (79, 1800, 653)
    # The reasoning some models print is not the answer.
    assert not any(e.content.startswith("<thinking-content") for e in events if e.line and e.line < 500)
    assert expand_paths([str(path.parent)]) == [str(path)]


def _history(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "proj" / ".aider.chat.history.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


HEADER = (
    "",
    "# aider chat started at 2025-07-02 15:27:10",
    "",
    "> Aider v0.85.1  ",
    "> Main model: gemini/gemini-2.5-pro with diff-fenced edit format  ",
    "",
)


def _failed_edit(n: int, ask: bool = True) -> tuple[str, ...]:
    # Aider sends a failed edit's error back to the model itself: no #### line between attempts.
    return (
        *(("#### fix the build  ", "") if ask else ()),
        "I will fix it.",
        "",
        "```",
        ".bazelrc",
        "<<<<<<< SEARCH",
        "build --features=-has_waitpkg_instruction",
        "=======",
        "common --features=-has_waitpkg_instruction",
        ">>>>>>> REPLACE",
        "```",
        "",
        f"> Tokens: 12k sent, 226 received. Cost: $0.02 message, $0.0{n} session.  ",
        "> # 1 SEARCH/REPLACE block failed to match!  ",
        "",
    )


def test_commands_edits_and_failures(tmp_path: Path):
    path = _history(
        tmp_path,
        *HEADER,
        "#### /run bazel build //:htop  ",
        "> Add 0.8k tokens of command output to the chat? (Y)es/(N)o [Yes]: y  ",
        "> Added 51 lines of output to the chat.  ",
        "",
        "#### /test pytest -q  ",
        "> Add 1.2k tokens of command output to the chat? (Y)es/(N)o [Yes]: y  ",
        "",
        *_failed_edit(1),
        "#### how do enums work?  ",
        "",
        "Like this:",
        "",
        "example_enum.rs",
        "```",
        "enum A { B }",
        "```",
        "",
        "> Tokens: 8.2k sent, 282 received. Cost: $0.01 message, $0.01 session.  ",
        "> The LLM did not conform to the edit format.  ",
        "> No filename provided before ``` in file listing  ",
        "",
        "#### /add Action.c  ",
        "> Added Action.c to the chat  ",
        "",
        "#### <blank>  ",
        "",
        "I will run it.",
        "",
        "> Applied edit to BUILD.bazel  ",
        "> bazel build //:htop_binary  ",
        "> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: y  ",
        "> Running bazel build //:htop_binary  ",
    )
    events, problems = documents.load(path)
    assert problems == []
    assert (
        events[0].session == "proj@2025-07-02T15:27:10" and events[0].meta["model"] == "gemini/gemini-2.5-pro"
    )
    calls = [
        (e.line, e.tool, e.args.get("command", e.args.get("files")))
        for e in events
        if e.kind is Kind.TOOL_CALL
    ]
    assert calls == [
        (8, "shell", "bazel build //:htop"),
        (12, "shell", "pytest -q"),
        (27, "edit", [".bazelrc"]),
        (39, "edit", ["example_enum.rs"]),
        (50, "edit", ["BUILD.bazel"]),
        (50, "shell", "bazel build //:htop_binary"),
    ]
    errors = [e.is_error for e in events if e.kind is Kind.TOOL_RESULT]
    assert errors == [False, True, True, True, False, False]
    usage = [(e.input_tokens, e.output_tokens, e.cost_usd) for e in events if e.kind is Kind.USAGE]
    assert usage == [(12000, 226, 0.02), (8200, 282, 0.01)]
    assert [e.content for e in events if e.role == "user"] == ["fix the build", "how do enums work?"]


def test_the_same_failing_edit_again_and_again_is_a_loop(tmp_path: Path):
    lines = list(HEADER)
    for n in range(6):
        lines.extend(_failed_edit(n, ask=n == 0))
    report = scan([str(_history(tmp_path, *lines))])
    assert report.worst.label in ("warn", "critical", "terminate")
    assert {d.session for d in report.detections} == {"proj@2025-07-02T15:27:10"}


def test_a_markdown_file_that_is_no_history_is_not_claimed(tmp_path: Path):
    readme = tmp_path / "README.md"
    readme.write_text("# aider\n\nnotes\n")
    assert documents.kind_of(readme) is None and expand_paths([str(tmp_path)]) == []
    cut = _history(tmp_path, "#### hello  ", "", "Hi!")  # a history whose start was cut off
    events, problems = documents.load(cut)
    assert problems == [] and counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 1,
    }
    bad = tmp_path / "x.aider.chat.history.md"
    bad.write_bytes(b"# aider chat started at someday\n#### caf\xe9  \n")
    events, problems = documents.load(bad)
    assert [p.reason.split(" ")[0] for p in problems] == ["invalid", "start"]


def test_an_ask_question_and_files_the_person_adds_are_user_turns(tmp_path: Path):
    """`/ask q` is repeated by aider as `#### q` after a blank line: that question is the user's
    message. Saying yes to "Add file to the chat?" gives the model new input: a user turn, so three
    replies each after the person added files are no monologue (issue 31)."""
    ask = "Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: "
    path = _history(
        tmp_path,
        *HEADER,
        "#### /ask what does delta represent in this file?  ",
        "",
        "#### what does delta represent in this file?  ",
        "",
        "It is the time since the last frame; see src/App.js and src/styles.css.",
        "",
        "> Tokens: 3.2k sent, 222 received.  ",
        "> src/App.js  ",
        f"> {ask}y  ",
        "> src/styles.css  ",
        f"> {ask}n  ",
        "",
        "Okay, I see src/App.js. Could you also add src/styles.css to the chat?",
        "",
        "> Tokens: 4.6k sent, 99 received.  ",
        "> src/styles.css  ",
        f"> {ask}y  ",
        "",
        "Okay, I now have every file I need. What would you like to change?",
        "",
    )
    events, problems = documents.load(path)
    assert problems == []
    assert [(e.line, e.content) for e in events if e.role == "user"] == [
        (7, "what does delta represent in this file?"),
        (13, "Added to the chat: src/App.js"),
        (21, "Added to the chat: src/styles.css"),
    ]
    assert not [d for d in scan([str(path)]).detections if d.detector == "monologue"]


def test_aider_errors_outside_an_edit_are_system_messages(tmp_path: Path):
    """``litellm.…Error`` and "has hit a token limit" after a prompt: the model call failed."""
    path = _history(
        tmp_path,
        *HEADER,
        "#### add the endpoint  ",
        "> litellm.NotFoundError: NotFoundError: OpenAIException - Error code: 404 - Unknown model  ",
        "",
        "#### add the endpoint, please  ",
        "> Tokens: 498k sent, 0 received.  ",
        "> Model anthropic/claude-sonnet-4 has hit a token limit!  ",
        "> Token counts below are approximate.  ",
        "",
    )
    events, problems = documents.load(path)
    assert problems == []
    system = [e.content for e in events if e.kind is Kind.MESSAGE and e.role == "system"]
    assert system == [
        "litellm.NotFoundError: NotFoundError: OpenAIException - Error code: 404 - Unknown model",
        "Model anthropic/claude-sonnet-4 has hit a token limit!",
    ]
