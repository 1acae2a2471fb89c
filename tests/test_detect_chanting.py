"""Chanting: the same stretch repeated back to back in a reply, and the structure that is not."""

from __future__ import annotations

import random
import string

from monitor.detect.detectors.chanting import ChantFinder, canonical_unit
from monitor.detect.engine import Engine
from tests.eventkit import Script, by, only

SENTENCE = "I will fix the failing test now. "  # 33 characters
INTRO = "Here is what I found after reading the parser module and its tests.\n\n"


def run(script: Script, **settings):
    return by(script.run(only("chanting", **settings)), "chanting")


def reply(text: str, **settings):
    return run(Script(step=5).say(text), **settings)


def finder() -> ChantFinder:
    return ChantFinder(window_chars=50, min_repeats=10, max_period=400)


def test_a_sentence_repeated_back_to_back_is_a_chant():
    """A 33-character sentence 12 times: its 50-character windows are seen 11 times."""
    hits = reply(INTRO + SENTENCE * 12 + "\nThat is all.")
    assert len(hits) == 1
    assert hits[0].count == 11 and "I will fix the failing test now" in hits[0].message
    assert hits[0].pattern.startswith("chant:")


def test_nine_windows_are_not_enough():
    """10 copies of the 33-character sentence give 9 windows: below the threshold."""
    assert not reply(INTRO + SENTENCE * 10)


def test_a_repeated_paragraph_with_newlines_is_a_chant():
    """A multi-line paragraph repeated 10 times (its unit contains line breaks)."""
    paragraph = (
        "I apologize for the confusion in my previous answer.\n"
        "Let me correct the function and run it again.\n\n"
    )
    assert reply(INTRO + paragraph * 10)


def test_a_short_word_needs_a_long_run():
    """'the ' repeated: 26 copies are seen wherever the samples fall; 15 are not a chant."""
    assert reply("And then " + "the " * 26)
    assert not reply("And then " + "the " * 15)


def test_inside_fenced_code_is_not_a_chant():
    """Repeated lines inside ``` or ~~~ fences are code, not speech."""
    line = "    assert parse_header(b'\\x00\\x01') == Header(version=1, flags=0)\n"
    assert not reply(INTRO + "```python\n" + line * 20 + "```\nDone.")
    assert not reply(INTRO + "~~~\n" + SENTENCE * 20 + "\n~~~\nDone.")


def test_indented_code_and_inline_code_are_not_chants():
    """Four-space indented blocks and inline `code` spans are quoted, not said."""
    assert not reply(INTRO + "".join("    " + SENTENCE + "\n" for _ in range(20)))
    assert not reply("The result is `[" + "None, " * 40 + "]` as expected.")


def test_a_chant_indented_under_a_list_item_is_said_not_quoted():
    """Lines indented under a list item go on the item: a chant there is prose."""
    pair = "    `def load(self)` -> `def load(self)` (no change)\n    Wait, I want to add `encoding`.\n"
    plan = "Plan:\n1.  Change `load` to take an encoding.\n    It is keyword-only.\n\n" + pair * 20
    (hit,) = reply(plan)
    assert hit.count >= 10 and "(no change)" in hit.message
    # Without the list item above them the indented lines are a code block, as before.
    assert not reply(INTRO + pair * 20)


def test_structure_and_code_under_a_list_item_stay_structure():
    """Under a list item: a nested item or text indented once more (code) is not prose."""
    nested = "1. Results:\n" + "    - test_parse_header passed on the first try today\n" * 20
    log = "1. The log says:\n\n" + "        WARNING: cache directory is not writable, using /tmp\n" * 20
    assert not reply(nested)
    assert not reply(log)


def test_list_whose_items_share_a_long_prefix_is_not_a_chant():
    """Bulleted and numbered lists, even with long shared prefixes, are structure."""
    items = "".join(
        f"- Update the configuration file for the authentication service module {i}\n" for i in range(30)
    )
    numbered = "".join(
        f"{i}. Update the configuration file for the authentication service module\n" for i in range(1, 30)
    )
    assert not reply(INTRO + items)
    assert not reply(INTRO + numbered)


def test_unmarked_lines_sharing_a_prefix_are_not_a_chant():
    """Plain lines that share a long prefix but differ after it are not exact repetition."""
    lines = "".join(
        f"Updated the configuration file for the authentication service, module {i:03d}\n" for i in range(30)
    )
    assert not reply(INTRO + lines)


def test_identical_list_items_tables_headings_quotes_and_dividers_reset():
    """Structural lines break a run even when they repeat exactly."""
    for structural in [
        "- " + SENTENCE + "\n",
        "| a | b | c | d | e | f | g | h | i |\n",
        "## " + SENTENCE + "\n",
        "> " + SENTENCE + "\n",
        "-" * 60 + "\n",
        "├── src/monitor/detect/detectors/chanting.py and tests\n",
    ]:
        assert not reply(INTRO + structural * 30), structural


def test_structure_between_copies_breaks_the_run():
    """A divider after every second copy cuts the run into short pieces."""
    assert not reply(INTRO + (SENTENCE * 2 + "\n-----\n") * 10)


def test_prose_chant_after_a_closed_code_block_is_caught():
    """A fence that opens and closes before the chant leaves the chant in prose."""
    assert reply("```\ncode\n```\n" + SENTENCE * 14)


def test_units_without_letters_are_ignored():
    """Zeros, dots and equals signs are not speech."""
    assert not reply("Values: " + "0, " * 200)
    assert not reply("Loading" + "." * 600)


def test_chant_across_streamed_messages():
    """A chant split over consecutive streamed chunks is seen as one stream."""
    s = Script(step=0.05)
    text = INTRO + SENTENCE * 14
    for start in range(0, len(text), 40):
        s.say(text[start : start + 40])
    hits = run(s)
    assert hits and hits[0].count >= 10


def test_an_event_between_messages_ends_the_stream():
    """A tool call between the halves: neither half alone is long enough."""
    s = Script(step=0.05)
    s.say(SENTENCE * 7)
    s.call("bash", {"command": "ls"}, "a.py")
    s.say(SENTENCE * 7)
    assert not run(s)


def test_growing_chant_is_reported_again_with_rising_count():
    """While a streamed chant goes on it is reported each time it grows by another 10."""
    s = Script(step=0.05)
    for _ in range(12):
        s.say(SENTENCE * 3)
    counts = [d.count for d in run(s)]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] - counts[0] >= 10


def test_same_chant_in_a_later_reply_is_reported_again():
    """After the stream ends (a usage report), the same chant in a new reply counts anew."""
    s = Script(step=5)
    s.say(INTRO + SENTENCE * 12).usage(0.01)
    s.say(INTRO + SENTENCE * 12).usage(0.01)
    assert [d.count for d in run(s)] == [11, 11]


def test_huge_message_with_chant_at_the_end_is_caught():
    """1 MB of varied prose ending in a chant: the tail is scanned."""
    rng = random.Random(7)
    prose = " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(180_000)
    )
    assert len(prose) > 1_000_000
    assert reply(prose + " " + SENTENCE * 40)
    assert not reply(prose)


def test_huge_message_with_a_code_fence_in_the_middle_skips_the_tail():
    """When the skipped middle holds a fence, the tail's context is unknown: stay quiet."""
    assert not reply("intro\n" + "x " * 300_000 + "\n```\n" + "y " * 300_000 + "\n" + SENTENCE * 40)


def test_finder_measures_runs_exactly():
    """The run found covers the whole repetition, with the smallest period."""
    text = "Intro text that is not repeated at all. " + "abcdefghij klmnop " * 30 + "end"
    chants = finder().find(text)
    assert len(chants) == 1
    chant = chants[0]
    # The space before the first copy also fits the period: the run starts there.
    assert chant.period == 18 and text[chant.start : chant.end] == " " + "abcdefghij klmnop " * 30


def test_canonical_unit_ignores_where_the_run_was_cut():
    """Rotations of the same unit give the same pattern key."""
    assert canonical_unit("fix the test. I will ") == canonical_unit("I will fix the test. ")


def test_stream_state_is_bounded():
    """However long the stream, the carried tail stays within its limit."""
    s = Script(step=0.01)
    for i in range(300):
        s.say(f"chunk {i} of a very long honest answer that keeps going with new words {i * 31}. ")
    engine = Engine(only("chanting"))
    assert not by(engine.process_many(s.events()), "chanting")
    detector = engine.sessions["s1"].detectors[0]
    assert len(detector.carry.text) <= detector.carry_limit and len(detector.messages) <= 6
