"""Turn similarity: Jaccard overlap of consecutive turns (design note 004)."""

from __future__ import annotations

import pytest

from monitor.detect.detectors.turn_similarity import TurnSimilarity
from monitor.detect.engine import Engine
from monitor.events import Level
from monitor.text import SIMILARITY_CHARS, jaccard, tokens
from tests.eventkit import Script, by, only


def run(script: Script, **settings):
    return by(script.run(only("turn_similarity", **settings)), "turn_similarity")


LOOP_TURN = "I need to check the current price of the stock and then decide whether to make the trade."


def test_design_note_worked_examples_are_below_threshold():
    """Note 004: A vs B is 4/8 = 0.50, A vs C and A vs D are 5/6 = 0.833, all below 0.85."""
    a = tokens("check price and decide trade")
    assert jaccard(a, tokens("check current price and make trade decision")) == pytest.approx(0.50)
    assert jaccard(a, tokens("check price and decide trade action")) == pytest.approx(5 / 6, abs=1e-3)
    assert jaccard(a, tokens("check price and decide on trade")) == pytest.approx(0.833, abs=1e-3)


def test_design_note_turns_do_not_count_as_similar():
    """The worked examples as turns (padded to be long enough) never reach the threshold."""
    s = Script(step=5)
    pad = " for the portfolio"
    for text in [
        "check price and decide trade",
        "check current price and make trade decision",
        "check price and decide trade action",
        "check price and decide on trade",
    ]:
        s.say(text + pad).usage(0.01)
    assert not run(s)


def test_three_similar_turns_warn_and_five_terminate():
    """Turn 1 passes; turns 2-4 are 3 consecutive similar turns (warn); turn 6 is the 5th: it
    proposes terminate, which one detector alone takes to critical; the 6th, with the session at
    critical, terminates (docs/detectors.md, escalation)."""
    s = Script(step=5)
    for _ in range(7):
        s.say(LOOP_TURN).usage(0.01)
    hits = run(s)
    assert [(d.count, d.proposed) for d in hits] == [
        (3, Level.WARN),
        (4, Level.WARN),
        (5, Level.TERMINATE),
        (6, Level.TERMINATE),
    ]
    assert [d.level for d in hits[-2:]] == [Level.CRITICAL, Level.TERMINATE]
    assert len({d.pattern for d in hits}) == 1


def test_a_dissimilar_turn_resets_the_streak():
    """3 similar, 1 dissimilar, 2 similar: the gap is progress (note 004), no warning."""
    s = Script(step=5)
    for _ in range(3):
        s.say(LOOP_TURN).usage(0.01)
    s.say("The broker API returned a new quote, so I placed a limit order at 101.5 and logged it.")
    s.usage(0.01)
    for _ in range(2):
        s.say(LOOP_TURN).usage(0.01)
    hits = run(s)
    assert not hits


def test_alternating_states_are_caught():
    """State A, state B, A, B, A, B: each turn matches one of the last five."""
    a = "I need more information about the account before I can answer the question properly."
    b = "Let me check the data in the accounts table to find the information that I need here."
    s = Script(step=5)
    for text in [a, b, a, b, a, b]:
        s.say(text).usage(0.01)
    hits = run(s)
    assert hits and hits[0].count == 3


def test_turns_include_their_calls_and_results_gate_progress():
    """The same narration and call with the same failing result is a loop; the same with a
    result that moves each time (a poll) is progress."""
    stuck, polling = Script(step=5), Script(step=5)
    for i in range(4):
        stuck.say("Retrying the upload of the release artifact to the package registry now.")
        stuck.call("upload", {"file": "dist/app.whl"}, "HTTP 503 Service Unavailable", is_error=True)
        polling.say("Checking on the upload of the release artifact to the package registry now.")
        polling.call("upload_status", {"file": "dist/app.whl"}, f"{25 * (i + 1)}% uploaded")
    assert run(stuck)
    assert not run(polling)


def test_tool_only_polls_with_moving_output_are_progress():
    """Codex polling: identical write_stdin calls, no text, different output each time."""
    s = Script(step=5)
    for i in range(7):
        s.call("write_stdin", {"session_id": 3, "chars": ""}, f"compiling crate {i} of 40")
    assert not run(s)


def test_remembered_results_are_compared_only_once_a_turn_resembles_them():
    """A remembered turn keeps its results as they came; they become an Outcome
    (normalized when compared) only when a later turn scores as a repeat of it."""
    s = Script(step=5)
    for i in range(3):
        s.call("deploy", {"target": f"region {i} of the fleet", "wave": i, "dry run": False}, "rolled out")
    engine = Engine(only("turn_similarity"))
    assert not by(engine.process_many(s.events()), "turn_similarity")
    detector = engine.sessions["s1"].detectors[0]
    assert len(detector.history) == 3
    assert all(type(seen.results) is tuple for seen in detector.history)
    # The same call and result again: the repeat compares results (and the loop is caught).
    for _ in range(4):
        s.call("deploy", {"target": "region 2 of the fleet", "wave": 2, "dry run": False}, "rolled out")
    engine = Engine(only("turn_similarity"))
    assert by(engine.process_many(s.events()), "turn_similarity")
    assert type(engine.sessions["s1"].detectors[0].history[-1].outcome().items) is tuple


def test_trivially_short_turns_do_not_count():
    """'OK.' or 'Done.' repeated carries too few tokens to compare."""
    s = Script(step=5)
    for _ in range(6):
        s.say("Done.").usage(0.01)
    assert not run(s)


def test_exempt_tools_are_left_out():
    """The same call six times is a loop of turns, unless its tool is exempt: then the
    turns that only call it are skipped."""
    from monitor.config import build_config

    s = Script(step=5)
    for _ in range(6):
        s.call(
            "build_status", {"job": "nightly", "reason": "see whether the nightly build was published"}, ""
        )
    assert run(s)
    exempt = build_config({"tools": {"build_status": {"exempt": True}}})
    assert not by(s.run(exempt), "turn_similarity")


def test_user_turn_resets():
    """An interactive session: the person asks again, the same answer is fine."""
    s = Script(step=5)
    for _ in range(5):
        s.user("and the price now?").say(LOOP_TURN).usage(0.01)
    assert not run(s)


def test_history_holds_only_the_compared_window():
    """Per-session memory: after 60 distinct turns only the last 5 token sets are kept."""
    s = Script(step=5)
    for i in range(60):
        s.say(f"turn {i} talks about topic {i * 7} with words w{i} x{i} y{i} z{i}").usage(0.01)
    engine = Engine(only("turn_similarity"))
    engine.process_many(s.events())
    detector = engine.sessions["s1"].detectors[0]
    assert isinstance(detector, TurnSimilarity) and len(detector.history) == 5


def test_huge_turns_are_tokenized_from_clipped_text():
    """A 1 MB turn is tokenized from its 2,000-character head and tail only."""
    s = Script(step=5)
    for _ in range(4):
        s.say(" ".join(f"word{i}" for i in range(200_000))).usage(0.01)
    engine = Engine(only("turn_similarity"))
    hits = by(engine.process_many(s.events()), "turn_similarity")
    assert hits  # four identical huge turns are still a loop
    detector = engine.sessions["s1"].detectors[0]
    # What is kept is bounded by the clipped text, not the turn's megabyte.
    assert all(len(seen.tokens) < 400 for seen in detector.history)
    assert all(sum(map(len, seen.tokens)) <= SIMILARITY_CHARS for seen in detector.history)


def test_termination_survives_the_engines_deduplication():
    """With every detector on, output similarity reports the same six text-only turns
    (same evidence) at WARN; the engine keeps one detection per loop and event, and it
    must be turn similarity's design-note TERMINATE, not the earlier detector's WARN."""
    s = Script(step=5)
    for _ in range(6):
        s.say(LOOP_TURN).usage(0.01)
    found = s.run(Engine().config)
    last_line = [d for d in found if d.line == s.line]
    assert [d.detector for d in last_line] == ["turn_similarity"]
    assert last_line[0].proposed is Level.TERMINATE


def test_a_turn_is_remembered_by_its_distinct_words():
    """A remembered turn is compared by its distinct lower-cased words, text then calls."""
    text = "Checking  the\tBuild output AGAIN,\nthen the build output again"
    s = Script(step=5)
    s.say(text).call("bash", {"command": "make  all -j 4"}, "ok").usage(0.01)
    engine = Engine(only("turn_similarity"))
    engine.process_many(s.events())
    (seen,) = engine.sessions["s1"].detectors[0].history
    words = text.lower().split() + 'bash bash:{"command":"make all -j 4"}'.lower().split()
    assert seen.tokens == frozenset(words)
