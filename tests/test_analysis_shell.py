"""Shell commands: what a tool's name says, the command line a call runs, its simple commands."""

from __future__ import annotations

import pytest

from monitor.detect.analysis import shell
from monitor.detect.analysis.testruns import is_test_run
from monitor.events import Event, Kind


@pytest.mark.parametrize(
    ("tool", "kind"),
    [
        (None, (False, False, False)),
        ("", (False, False, False)),
        ("Bash", (False, False, True)),
        ("bash", (False, False, True)),
        ("run_tests", (True, False, False)),
        ("pytest", (True, False, False)),
        ("Edit", (False, True, False)),
        ("TodoWrite", (False, False, False)),
        ("apply_patch", (False, True, False)),
        ("read_file", (False, False, False)),
        ("str_replace_editor", (False, True, False)),
        ("Write", (False, True, False)),
        ("exec_command", (False, False, True)),
    ],
)
def test_a_tools_kind_is_what_its_name_says(tool, kind):
    assert shell.tool_kind(tool) == kind
    call = Event(Kind.TOOL_CALL, "s", 0.0, tool=tool, args={})
    assert shell.shell_command(call) is None  # no command line in its arguments
    assert is_test_run(call) == kind[0]


def test_an_edit_whose_text_starts_a_test_runner_runs_no_tests():
    """SWE-agent's `edit` comes as a command line whose body is the file's new text
    (tests/corpus, swe-agent-gpt4-acr django-11964): a line of it that calls a test
    runner is content, so the edit's refusal is not read as a test run's outcome."""
    body = 'edit 26:26\nfrom django.test.runner import DiscoverRunner\nDiscoverRunner().run_tests(["__main__"])\nend_of_edit'
    edit = Event(Kind.TOOL_CALL, "s", 0.0, tool="edit", args={"command": body})
    assert not is_test_run(edit)
    run = Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": "python -m pytest -q"})
    assert is_test_run(run)


def test_tool_kinds_stay_bounded_when_names_are_made_up():
    for n in range(5_000):
        assert shell.tool_kind(f"tool_{n}") == (False, False, False)
    assert 0 < len(shell._TOOL_KINDS) <= shell._TOOL_KINDS.max_size


@pytest.mark.parametrize(
    ("args", "command"),
    [
        ({"command": "pytest -q"}, "pytest -q"),
        ({"cmd": ["bash", "-lc", "make test"]}, "make test"),
        ({"cmd": ["ls", "-l"]}, "ls -l"),
        ({"input": "ls"}, "ls"),  # a shell tool's unusual key
        ({"path": "a.py"}, None),
    ],
)
def test_the_command_line_of_a_shell_call(args, command):
    assert shell.shell_command(Event(Kind.TOOL_CALL, "s", 0.0, tool="shell", args=args)) == command


def test_segments_programs_and_wrappers():
    assert shell.segments("cd src && env X=1 python -m pytest -q | tail -5; echo done") == [
        "cd src",
        "env X=1 python -m pytest -q",
        "tail -5",
        "echo done",
    ]
    assert shell.program("env X=1 python -m pytest -q") == "pytest"
    assert shell.program("sudo /usr/bin/grep -r x") == "grep"
    assert shell.unwrapped("uv run pytest") == "pytest"
    assert shell.output_body("Exit code 1\n<output>\n</output>") == ""
