"""Output similarity: near-identical assistant outputs in a row, and what is not a loop."""

from __future__ import annotations

import random

import pytest
from rapidfuzz import fuzz

from monitor.detect.analysis.turns import Outcome
from monitor.detect.detectors import output_similarity as mod
from monitor.detect.detectors.output_similarity import (
    OutputSimilarity,
    normalize_output,
    similarity,
)
from monitor.events import Level
from tests.eventkit import Script, by, only

NOTE_OUTPUTS = [
    "Let me check the database for user information...",
    "I'll query the database to find the user data...",
    "Checking the database for user information...",
]


def run(script: Script, **settings):
    return by(script.run(only("output_similarity", **settings)), "output_similarity")


def test_design_note_example_counts_as_a_repeat():
    """Note 000's pair: raw fuzz.ratio is 0.872 (the note's "~0.91" is not what rapidfuzz
    gives), but with the narration opener dropped it is 0.96: a repeat at the 0.90 cut-off.
    The note's middle output is no repeat of either."""
    first, middle, last = NOTE_OUTPUTS
    assert fuzz.ratio(first, last) / 100 == pytest.approx(0.872, abs=0.001)
    assert similarity(normalize_output(first), normalize_output(last)) >= 0.90
    assert similarity(normalize_output(first), normalize_output(middle)) < 0.90
    assert similarity(normalize_output(middle), normalize_output(last)) < 0.90


def test_design_note_outputs_in_a_session():
    """The note's three outputs as replies: one repeat (the third), which alone does not warn."""
    s = Script(step=5)
    for text in NOTE_OUTPUTS:
        s.say(text + " The users table has the account records we need to inspect.")
        s.usage(0.01)
    assert not run(s)


def test_third_near_identical_output_warns_and_keeps_reporting():
    """Outputs that keep saying the same thing warn on the third, then again on each repeat
    with the count rising, under one pattern (so the escalation ladder climbs)."""
    s = Script(step=5)
    lines = []
    variants = [
        "I'm still waiting for the migration to finish before I can verify the tables.",
        "I am still waiting for the migration to finish before I can verify the tables.",
        "I'm still waiting for the migration to finish before I can verify the tables...",
        "I'm still waiting for the migration to finish, before I can verify the tables.",
    ]
    for text in variants:
        s.say(text).usage(0.01)
        lines.append(s.line)
    hits = run(s)
    assert [d.count for d in hits] == [3, 4]
    assert hits[0].line == lines[2]  # the usage closing the third reply
    assert len({d.pattern for d in hits}) == 1
    assert hits[0].level >= Level.WARN and hits[0].score >= 0.9
    assert "similar" in hits[0].message


def test_a_different_output_resets_the_streak():
    """Two repeats, then something new, then two more: never two repeats in a row."""
    s = Script(step=5)
    same = "The build is still failing on the same linker error in the network module."
    for text in [same, same, "Switching approach: I will vendor the library and pin its version.", same]:
        s.say(text).usage(0.01)
    assert not run(s)


def test_short_narration_is_not_judged():
    """'Running the tests again.' after every edit is narration, below min_chars."""
    s = Script(step=5)
    for _ in range(6):
        s.say("Running the tests again.").usage(0.01)
    assert not run(s)


def test_same_words_with_moving_results_are_progress():
    """A narrated poll whose output changes each time is not a repeat."""
    s = Script(step=5)
    for pct in (10, 40, 70, 90, 100):
        s.say("Checking whether the deployment to the staging cluster has finished yet.")
        s.call("kubectl", {"command": "rollout status deploy/web"}, f"{pct}% of pods updated")
    assert not run(s)


def test_same_words_over_different_items_are_progress():
    """A batch job narrated identically but calling with different items is not a repeat."""
    s = Script(step=5)
    for batch in range(1, 7):
        s.say("Importing the next batch of customer records into the staging database now.")
        s.call("import_batch", {"batch": batch}, "OK")
    assert not run(s)


def test_same_words_same_call_same_result_is_a_loop():
    """Saying and doing exactly the same thing with the same outcome warns on the third turn."""
    s = Script(step=5)
    for _ in range(3):
        s.say("Let me query the users table again to find the account for bob@example.com.")
        s.call("sql", {"query": "select * from users where email = 'bob@example.com'"}, "0 rows")
    hits = run(s)
    assert hits and hits[0].count == 3


def test_user_turn_resets():
    """A person asking again makes a similar answer legitimate."""
    s = Script(step=5)
    answer = "The configuration file lives in ~/.config/app/settings.toml and is read at start."
    for _ in range(4):
        s.user("where is the config?").say(answer).usage(0.01)
    assert not run(s)


def test_alternating_outputs_are_caught_within_the_window():
    """A, B, A, B, A: each output repeats one of the last five, so the streak grows."""
    s = Script(step=5)
    a = "I need more information about the failing request before I can change anything."
    b = "Let me check the request logs again to see what the failing request looked like."
    for text in [a, b, a, b, a]:
        s.say(text).usage(0.01)
    hits = run(s)
    assert hits and hits[0].count == 3


def test_a_report_after_new_work_repeats_nothing():
    """ "Build 3 finished" after polling build 3 is not a repeat of "Build 2
    finished", however alike the words: tool turns that did something new lie
    between (threshold 1, as the aggressive preset has it)."""
    s = Script(step=5)
    for build, target in ((1, "linux-x86_64"), (2, "wasm32"), (3, "linux-arm64"), (4, "darwin-arm64")):
        s.say(f"Starting build {build} for {target} now; I will watch it until it is done.")
        s.call("release", {"target": target}, f"queued build-{build}")
        for pct in (30, 60, 100):
            s.call("check_job", {"id": f"build-{build}"}, f"job build-{build}: {pct}% done")
        s.say(f"Build {build} for {target} finished; the artifact looks right and the report is clean.")
    assert not run(s, threshold=1)


def test_a_report_after_the_same_tool_turn_is_still_a_repeat():
    """The same words around the same call with the same result: the tool
    turn in between repeats recent work, so nothing new happened."""
    s = Script(step=5)
    for _ in range(4):
        s.call("check_job", {"id": "build-7"}, "job build-7: queued")
        s.say("The build is still queued behind the other jobs; I will look again in a moment.")
    hits = run(s)
    assert hits and hits[0].count == 3


def test_conservative_preset_needs_more_repeats():
    """The conservative preset warns later (threshold 3) than balanced (2)."""
    s = Script(step=5)
    for _ in range(3):
        s.say("I'm still waiting for the migration to finish before I can verify the tables.").usage(0.01)
    assert run(s)
    assert not run(s, threshold=3)


def test_huge_outputs_compare_bounded_text(monkeypatch):
    """1 MB replies are clipped before comparing; pairs whose lengths cannot reach the
    cut-off never reach rapidfuzz, and equal texts are settled by comparing them."""
    calls = []
    real = mod.fuzz.ratio

    def counting(a, b, **kw):
        calls.append((len(a), len(b)))
        return real(a, b, **kw)

    monkeypatch.setattr(mod.fuzz, "ratio", counting)
    s = Script(step=5)
    s.say("x" * 1_000_000).usage(0.01)
    s.say("short reply that cannot be ninety percent like a long one").usage(0.01)
    s.say("x" * 1_000_000).usage(0.01)
    s.say("x" * 1_000_000).usage(0.01)
    from monitor.detect.engine import Engine

    engine = Engine(only("output_similarity"))
    hits = by(engine.process_many(s.events()), "output_similarity")
    assert not calls  # length bound and equality settled every pair
    assert hits and hits[0].count == 3
    kept = engine.sessions["s1"].detectors[0].outputs
    assert len(kept) == 4 and all(len(o.text) <= 2000 for o in kept)


def test_memory_is_bounded_by_the_window():
    """After many distinct outputs only the last `window` are kept."""
    from monitor.detect.engine import Engine

    s = Script(step=5)
    for i in range(40):
        s.say(f"Output number {i} is entirely different: {'abcdefghij'[i % 10] * (50 + i)}").usage(0.01)
    engine = Engine(only("output_similarity"))
    engine.process_many(s.events())
    detector = engine.sessions["s1"].detectors[0]
    assert isinstance(detector, OutputSimilarity) and len(detector.outputs) == 5


def test_a_turns_compared_text_is_normalize_output_of_its_text():
    """A turn's text is compared squashed once for both similarity detectors
    (``BoundedText.squashed``) and without its opener: what
    ``normalize_output`` gives for the turn's text."""
    from monitor.detect.engine import Engine

    texts = [
        "Let me  run the\ntests once more and look at what fails first.",
        "  Now, I'll check\tthe build output for the linker error again. ",
        "Okay so let's compare both of the configuration files side by side.",
        "The configuration files differ in the cache section only, nothing else.",
    ]
    s = Script(step=5)
    for text in texts:
        s.say(text).usage(0.01)
    engine = Engine(only("output_similarity"))
    engine.process_many(s.events())
    kept = engine.sessions["s1"].detectors[0].outputs
    assert [output.text for output in kept] == [normalize_output(text) for text in texts]


#: Pieces of texts that start with an opener, or nearly do.
OPENER_PIECES = [
    "ok",
    "Okay",
    "OK,",
    "now",
    "Next:",
    "so",
    "Alright!",
    "first.",
    "then",
    "again",
    "let me",
    "Let's",
    "i'll",
    "I will",
    "I'm going to",
    "i am going to",
    "I need to",
    "We need to",
    "I should",
    "i",
    "I'",
    "we",
    "let",
    "the",
    "Then",
    "noW",
    "ı'll",
    "İ will",
    "ſo",
    "oK",
    "é",
    "fix",
    "al",
    "ag",
    "th",
    "",
    " ",
    "  ",
    "\t",
    "\n",
    ",",
    "x",
]


def test_skipping_the_opener_regex_drops_what_the_regex_drops():
    """``_without_opener`` tries the regex only on text whose first two
    characters may start an opener; on any text it gives what the regex gives."""
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(
            rng.choice(OPENER_PIECES) + rng.choice(("", " ", "  ", "\t")) for _ in range(rng.randrange(5))
        )
        opener = mod._OPENER.match(text)
        assert mod._without_opener(text) == (text[opener.end() :] if opener else text), text


def test_text_that_cannot_start_an_opener_is_not_matched(monkeypatch):
    """Most texts start with no opener's first two letters: no regex is tried."""
    tried = []
    regex = mod._OPENER

    class Counting:
        def match(self, text):
            tried.append(text)
            return regex.match(text)

    monkeypatch.setattr(mod, "_OPENER", Counting())
    assert (
        normalize_output("Build failed again on the linker step.") == "Build failed again on the linker step."
    )
    assert not tried
    assert normalize_output("Let me check the linker step.") == "check the linker step."
    assert tried == ["Let me check the linker step."]


def test_remembered_results_are_made_comparable_only_when_compared():
    """An output keeps its turn's results as they are; their ``Outcome``
    (which normalizes them) is made only once a later output is compared with it."""
    from monitor.detect.engine import Engine

    said = "The parser rejects the nested table in the config file again."
    s = Script(step=5)
    s.say(said).call("read", {"path": "config.toml"}, "[a.b]\nx = 1").usage(0.01)
    s.say("Something else entirely: the cache directory is empty and unused.").call(
        "read", {"path": "cache"}, "nothing"
    ).usage(0.01)
    s.say(said).call("read", {"path": "config.toml"}, "[a.b]\nx = 1").usage(0.01)
    engine = Engine(only("output_similarity"))
    engine.process_many(s.events())
    first, other, again = engine.sessions["s1"].detectors[0].outputs
    assert first.results.__class__ is Outcome  # compared: its repeat had the same calls
    assert other.results == ((False, "nothing"),) and again.results.__class__ is tuple
