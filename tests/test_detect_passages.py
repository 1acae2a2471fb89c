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


QUOTE = "```python\nthresholds = np.r_[thresholds[0] + 1, thresholds]\n```"
THOUGHTS = [
    "Clipping the first threshold to one would keep probability estimates in range.",
    "Dropping the extra term entirely makes the first two thresholds identical, confusing users.",
    "Decision function values have no natural upper bound, so a constant cap cannot work there.",
    "Using nextafter gives the smallest value above the maximum score, but it is overly clever.",
    "The upstream commit replaced the prepended value with infinity and updated the docstring.",
    "Infinity is documented as arbitrary anyway, and every existing curve keeps its shape.",
]


def test_code_lines_by_their_shape():
    from monitor.detect.analysis.passages import code_line

    for line in (
        "thresholds = np.r_[thresholds[0] + 1, thresholds]",
        "    return x",
        "backup.cpp",
        "<<<<<<< SEARCH",
        "for i in range(0, len(page_records), page_batch_size):",
    ):
        assert code_line(line), line
    for line in (
        "The fix: `thresholds[0] + 1` should become something that does not exceed 1.",
        "I will run the whole test suite again (to be sure).",
        "becomes:",
        "Let me look at what the linked PR does:",
    ):
        assert not code_line(line), line


def test_code_quoted_again_after_new_reasoning_is_no_circle():
    """Quoting one code line while the reasoning around it moves on is not chanting."""
    text = "\n\n".join(f"{thought}\n\n{QUOTE}" for thought in THOUGHTS)
    assert repeated_passage(text, 40, 5, 100_000) is None
    assert hits(text) == []


def test_code_quoted_again_with_nothing_new_between_is_a_circle():
    # The same words between the copies (or none): the reply goes round the quote.
    same = "\n\n".join(f"Wait, the same line again.\n\n{QUOTE}" for _ in range(6))
    found = repeated_passage(same, 40, 5, 100_000)
    assert found is not None and found.count == 5 and "np.r_" in found.passage
    assert repeated_passage("\n\n".join([QUOTE] * 5), 40, 5, 100_000) is not None
    # A short word or two between the copies ("becomes:", "No!") is no new reasoning either.
    few = "\n\n".join(f"{word}\n\n{QUOTE}" for word in ("so:", "becomes:", "no!", "again:", "hmm:"))
    assert repeated_passage(few, 40, 5, 100_000) is not None


def test_prose_said_again_counts_whatever_is_between():
    """Only code is a quote: a paragraph said again is counted with new reasoning between."""
    said = "Let us look at handleRelease again; it looks correct to me."
    text = "\n\n".join(f"{thought}\n\n{said}" for thought in THOUGHTS)
    assert repeated_passage(text, 40, 5, 100_000) is not None


def test_real_replies_quoting_code(tmp_path: Path):
    """scikit-learn-26194 (Vorflux, honest): the same line quoted six times while the fix is
    weighed; sympy-15976 (mini-swe-agent, stuck): the same no-op sed seven times, the prose
    between going round the same two words."""
    import gzip
    import json

    root = Path(__file__).resolve().parent
    run = json.loads(
        gzip.decompress(
            (root / "corpus/vorflux-opus46/scikit-learn__scikit-learn-26194.json.gz").read_bytes()
        )
    )
    honest = run["trajectory"][44]["output"]["content"]
    assert honest.count("thresholds = np.r_[thresholds[0] + 1, thresholds]\n```") == 6
    assert repeated_passage(honest, 40, 5, 100_000) is None
    assert repeated_passage(honest, 40, 4, 100_000) is None  # aggressive
    stuck = json.loads((root / "fixtures/mini-swe-agent-gemini3/sympy__sympy-15976.traj.json").read_text())
    found = repeated_passage(stuck["messages"][46]["content"], 40, 5, 100_000)
    assert found is not None and "sed -i" in found.passage
