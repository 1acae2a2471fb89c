"""Exact repeat: state set again between other work is bookkeeping, not a loop."""

from __future__ import annotations

import pytest

from monitor.detect.analysis.signatures import text_is_acknowledgement
from tests.eventkit import Script, by, only

TODOS = {
    "todos": [
        {"content": "refactor the parser", "status": "in_progress"},
        {"content": "run the tests", "status": "pending"},
    ]
}
TODO_ACK = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to "
    "track your progress. Please proceed with the current tasks if applicable"
)


@pytest.mark.parametrize(
    "text",
    [
        TODO_ACK,
        "Plan updated",
        "File created successfully at: /app/parser.py",
        "Success. Updated the following files:\nM src/parser.rs",
        "The file /app/parser.py has been updated successfully.",
        "Successfully replaced 1 block(s) in /app/llama.cpp/src/llama-grammar.cpp.",
    ],
)
def test_real_agents_acknowledgements_are_recognised(text: str):
    """What Claude Code's TodoWrite and Write, Codex's update_plan and
    apply_patch, and OpenClaw's edit answer when they worked."""
    assert text_is_acknowledgement(text)


@pytest.mark.parametrize(
    "text", ["File not found: /app/parser.py", "Plan updated but 2 steps failed", "Todos could not be saved"]
)
def test_failures_are_not_acknowledgements(text: str):
    assert not text_is_acknowledgement(text)


def test_the_same_todo_list_written_between_edits_is_bookkeeping():
    """Claude Code re-sends an unchanged todo list between pieces of work:
    identical calls with the same result, but nothing is stuck."""
    s = Script(step=4.0)
    for n in range(5):
        s.call("TodoWrite", TODOS, TODO_ACK)
        s.call(
            "Edit",
            {"file_path": f"/app/m{n}.py", "old_string": "a", "new_string": "b"},
            f"The file /app/m{n}.py has been updated successfully.",
        )
    assert not by(s.run(only("exact_repeat")), "exact_repeat")


def test_the_same_todo_list_written_back_to_back_is_still_a_repeat():
    """Restating the plan again and again with nothing done in between is a loop."""
    s = Script(step=4.0)
    for _ in range(3):
        s.call("TodoWrite", TODOS, TODO_ACK)
    (hit,) = by(s.run(only("exact_repeat")), "exact_repeat")
    assert hit.count == 3


def test_a_repeated_call_with_a_real_result_between_work_is_still_a_repeat():
    """Only acknowledgements are bookkeeping: the same query with the same
    answer between other calls still counts."""
    s = Script(step=4.0)
    for n in range(3):
        s.call("sql", {"query": "select count(*) from users"}, "count\n-----\n0\n(1 row)")
        s.call("Read", {"file_path": f"/app/m{n}.py"}, f"module {n}")
    assert by(s.run(only("exact_repeat")), "exact_repeat")


def _indented_edits(last_result: str) -> Script:
    """SWE-agent's `edit` sent twice as it was, refused the same way, then a third time with
    its body unindented (tests/corpus, coder-gpt4 django-12908, read honest): the three share a
    call key (white space squashed), but the third is another edit."""
    s = Script(step=4.0)
    body = "def distinct(self):\n    return self._chain()"
    refused = (
        "Your proposed edit has introduced new syntax error(s).\n- E999 IndentationError: unexpected indent"
    )
    for _ in range(2):
        s.call("edit", {"command": f"edit 1137:1146\n{body}\nend_of_edit"}, refused)
    unindented = "\n".join(line.strip() for line in body.split("\n"))
    s.call("edit", {"command": f"edit 1137:1146\n{unindented}\nend_of_edit"}, last_result)
    return s


@pytest.mark.parametrize("detector", ["exact_repeat", "fingerprint"])
def test_an_edit_sent_with_other_indentation_is_judged_by_its_own_result(detector: str):
    moved = _indented_edits(
        "Your proposed edit has introduced new syntax error(s).\n- E999 expected an indented block"
    )
    assert not by(moved.run(only(detector)), detector)
    refused = (
        "Your proposed edit has introduced new syntax error(s).\n- E999 IndentationError: unexpected indent"
    )
    assert by(_indented_edits(refused).run(only(detector)), detector)
