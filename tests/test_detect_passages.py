"""A reply that says the same passage again and again (chanting's passage rule), and what is left alone."""

from __future__ import annotations

from pathlib import Path

from monitor.detect.analysis.passages import normal, repeated_passage
from monitor.formats import documents
from monitor.scan import scan
from tests.eventkit import Script, by, only

STEP = "### Step {n}: Update the types file for the contract\n\n{f}\n```ts\nexport type Role = 'admin';\n```"


def cycling(steps: int) -> str:
    files = ("useConfig.d.ts", "properties.d.ts", "useAccountEffect.d.ts")
    return "\n\n".join(STEP.format(n=n, f=files[n % 3]) for n in range(6, 6 + steps))


def hits(text: str, **settings):
    return by(Script(step=5).user("Fix the types.").say(text).run(only("chanting", **settings)), "chanting")


def test_digits_case_and_space_do_not_make_a_passage_new():
    assert normal("### Step 6:  Update\nthe FILE") == normal("### step 48: update the file")


def test_the_fifth_copy_is_where_it_is_found():
    text = "\n\n".join(["Let us look at handleRelease again; it looks correct to me."] * 7)
    found = repeated_passage(text, 40, 5, 100_000)
    assert found is not None and found.count == 5
    assert text.count("\n", 0, found.offset) == 8  # the fifth paragraph starts at line 9


def test_short_passages_and_four_copies_are_left_alone():
    assert repeated_passage("\n\n".join(["Done."] * 20), 40, 5, 100_000) is None
    assert (
        repeated_passage("\n\n".join(["I will run the whole test suite again now."] * 4), 40, 5, 100_000)
        is None
    )


def test_a_reply_cycling_one_step_warns():
    (hit,) = hits(cycling(10))
    assert hit.count == 5 and "step" in hit.message


def test_a_reply_of_different_edits_is_quiet():
    edits = [
        f"### Step {n}: Update {name}\n\n{name}\n```ts\n<<<<<<< SEARCH\n=======\n{line}\n>>>>>>> REPLACE\n```"
        for n, (name, line) in enumerate(
            [
                ("roles.ts", "export type Role = 'admin' | 'user';"),
                ("api.ts", "export const post = (url: string) => fetch(url);"),
                ("form.tsx", "<RoleSelect value={role} onChange={setRole} />"),
                ("config.ts", "export const roles = ['admin', 'user'];"),
                ("test.ts", "expect(roles).toContain('user');"),
            ],
            1,
        )
    ]
    assert hits("\n\n".join(edits)) == []


def test_a_field_under_each_new_heading_is_a_template():
    """The same field once under each of a plan's headings is counted once per section."""
    cases = "\n\n".join(
        f"#### TC-{n} \u2014 {what}\n\n**Description:** check {what}.\n\n**Method:** Python unit test (no DB needed)"
        for n, what in enumerate(
            ["an empty header", "one key", "no colon", "repeated keys", "a real file", "a CR"], 1
        )
    )
    assert not hits(cases)
    # Under one heading (or headings written again: "Step 6", "Step 7" …) the copies count.
    assert hits("## Plan\n\n" + "\n\n".join(["**Method:** Python unit test (no DB needed)"] * 5))
    # A "# comment" in a code block is no heading.
    comments = "\n\n".join(
        f"```python\n# step {w}\n```\n\nI will run the whole test suite again now, to be sure."
        for w in "abcde"
    )
    assert hits(comments)


def test_a_higher_threshold_and_off():
    assert hits(cycling(10), passage_repeats=11) == []
    assert hits(cycling(10), passage_repeats=0) == []


ANSWER = "Please share the contents of clamp.py so that I can fix the bug."
LOOP = "Let me look at handleRelease again. If the backend returns cached data, where is it cached?"


def history(tmp_path: Path) -> Path:
    """An Aider history whose reply thinks in a circle before it answers (as Aider writes it)."""
    thinking = "\n\n".join([LOOP] * 6)
    text = (
        "\n# aider chat started at 2026-04-22 22:40:12\n\n#### why does push-to-talk type the old text?\n\n"
        f"<thinking-content-7bbe>\n\n{thinking}\n\n</thinking-content-7bbe>\n\n{ANSWER}\n\n"
        "> Tokens: 703 sent, 1.1k received.  \n"
    )
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_aider_keeps_the_reasoning_and_where_text_starts(tmp_path: Path):
    events, problems = documents.load(history(tmp_path))
    assert problems == []
    (reply,) = [e for e in events if e.role == "assistant"]
    assert reply.content == ANSWER  # the answer alone, as before
    assert reply.line == 6 and reply.meta["reasoning_line"] == 6
    assert reply.meta["text_line"] == 22
    assert reply.meta["reasoning"].count(LOOP) == 6


def test_a_loop_in_aider_reasoning_is_placed_at_its_line(tmp_path: Path):
    report = scan([str(history(tmp_path))], only("chanting"))
    (hit,) = [d for d in report.detections if d.detector == "chanting"]
    assert hit.line == 16  # the fifth copy of the paragraph (lines 8, 10, 12, 14, 16)


def test_the_passage_settings_are_bounded():
    import pytest

    from monitor.config import ConfigError, build_config

    for bad in ({"passage_repeats": 1001}, {"passage_chars": 0}):
        with pytest.raises(ConfigError, match="passage"):
            build_config({"detectors": {"chanting": bad}})
    build_config({"detectors": {"chanting": {"passage_repeats": 0}}})  # off
