"""Idle edits: one place edited again and again while its code stays as it was."""

from __future__ import annotations

from monitor.detect.detectors.idle_edits import code_of
from monitor.events import Level
from tests.eventkit import Script, by, only

OLD = "    if value is None:\n        return default"


def run(script: Script, **settings):
    return by(script.run(only("idle_edits", **settings)), "idle_edits")


def edit(s: Script, old: str, new: str, path: str = "app/utils.py") -> Script:
    return s.call("str_replace_editor", {"path": path, "old_str": old, "new_str": new}, "File updated")


def test_code_ignores_white_space_blank_lines_and_comments():
    assert code_of("  x = 1\n\n# why\n  y  =  2  // no\n") == code_of("x = 1\ny = 2 // no")
    assert code_of("x = 1") != code_of("x = 2")


def test_four_edits_that_change_nothing_warn_on_the_fourth():
    """The same text again, a blank line, a comment, white space: four idle edits of one place."""
    s = Script()
    s.user("Fix the default handling.")
    for new in (OLD, OLD + "\n", "    # the fix\n" + OLD, OLD.replace("    ", "      ")):
        edit(s, OLD, new)
    hits = run(s)
    assert [h.count for h in hits] == [4] and hits[0].level is Level.WARN
    assert hits[0].line == s.line - 1  # the fourth edit's call
    assert "utils.py" in hits[0].message


def test_an_undone_change_is_idle_too():
    """A change, then back to the code before it: the undo is idle, the change is not."""
    s = Script()
    changed = OLD.replace("default", "fallback")
    for _ in range(4):
        edit(s, OLD, changed)
        edit(s, changed, OLD)
    assert run(s)  # the same change made and undone over and over


def test_edits_that_change_the_code_are_left_alone():
    s = Script()
    for n in range(8):
        edit(s, OLD, OLD.replace("default", f"default_{n}"))
    assert run(s) == []


def test_idle_edits_of_different_places_do_not_add_up():
    s = Script()
    for n in range(6):
        line = f"    value_{n} = compute({n})"
        edit(s, line, line + "  # checked", path="app/utils.py")
    assert run(s) == []  # a comment added under six different lines: one each


def test_three_idle_edits_are_below_the_threshold_but_not_for_aggressive():
    s = Script()
    for _ in range(3):
        edit(s, OLD, OLD)
    assert run(s) == []
    assert run(s, threshold=3)


CHANGED = OLD.replace("default", "fallback")


def dither(between: str | None = None, other_file: bool = False) -> Script:
    """A fix applied, undone, applied again and undone, with ``between`` run after each edit
    (and, with ``other_file``, another file edited after each)."""
    s = Script()
    s.user("Fix the default handling.")
    for new, old in ((CHANGED, OLD), (OLD, CHANGED), (CHANGED, OLD), (OLD, CHANGED)):
        edit(s, old, new)
        if other_file:
            edit(s, "import os", "import os, sys", path="app/other.py")
        if between is not None:
            s.bash(between, "1 failed, 4 passed")
    return s


def test_a_change_applied_undone_and_applied_again_with_nothing_run_warns():
    """django-11532 (read stuck): a fix applied, undone, applied again and undone in one file,
    other files edited between, and no command run: three edits back to code the place had.
    The same edits with a test run after each are an edit-test cycle (it tried them); one undo
    each of a change made to four files (pshung personal_git) is one decision, not dithering."""
    hits = run(dither(other_file=True))
    assert hits and "nothing run between" in hits[0].message
    assert not run(dither("python -m pytest -q tests/test_utils.py", other_file=True))

    reverted = Script()
    for n in range(4):
        edit(reverted, OLD, CHANGED, path=f"app/mod{n}.py")
    for n in range(4):
        edit(reverted, CHANGED, OLD, path=f"app/mod{n}.py")
    assert not run(reverted)


def test_a_look_at_the_files_between_the_edits_tries_nothing():
    """Applied, undone and applied again with only looks between (``ls``, ``git diff``,
    ``grep``): nothing ran the code, so it is the same dithering; a test run between is not."""
    for look in ("ls app/", "git diff --stat", "grep -n default app/utils.py"):
        hits = run(dither(look))
        assert hits and "nothing run between" in hits[0].message, look
    assert not run(dither("python -m pytest -q tests/test_utils.py"))
