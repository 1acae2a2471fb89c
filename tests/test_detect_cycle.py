"""Cycle detector: A-B-A-B loops, and rhythms that make progress."""

from monitor.config import build_config
from monitor.detect.engine import Engine
from tests.streams import Stream, by, run


def test_ab_cycle_with_same_results_warns_on_second_pass():
    """A-B-A-B with identical results is flagged when the 2nd repetition completes."""
    s = Stream()
    for _ in range(2):
        s.call("read_file", "def f(): pass", path="a.py")
        s.call("run_tests", "1 failed: test_f", command="pytest")
    _, found = run(s)
    hits = by(found, "cycle")
    assert hits and hits[0].count == 2
    assert "read_file → run_tests" in hits[0].message


def test_abc_cycle_is_found_and_escalates_per_repetition():
    """A-B-C repeated three times yields one detection per completed repetition."""
    s = Stream()
    for _ in range(3):
        s.call("grep", "no matches", pattern="foo")
        s.call("read_file", "x = 1", path="a.py")
        s.call("bash", "error: boom", error=True, command="make")
    _, found = run(s)
    counts = [d.count for d in by(found, "cycle")]
    assert counts == [2, 3]


def test_edit_test_rhythm_with_moving_results_is_not_a_cycle():
    """The same two calls whose test output changes each pass are progress."""
    s = Stream()
    for failing in (5, 3, 1, 0):
        s.call("edit_file", "ok", path="a.py", old="x", new="y")
        s.call("bash", f"{failing} failed" if failing else "all passed", command="pytest")
    _, found = run(s)
    assert not by(found, "cycle")


def test_single_call_repeated_is_left_to_exact_repeat():
    """A-A-A-A has one distinct call: not a cycle."""
    s = Stream()
    for _ in range(4):
        s.call("bash", "same", command="ls")
    _, found = run(s)
    assert not by(found, "cycle")


def test_user_turn_resets_the_cycle():
    """A user message between passes starts the count again."""
    s = Stream()
    s.call("a", "1", x=1).call("b", "2", y=2)
    s.say("please try again", role="user")
    s.call("a", "1", x=1).call("b", "2", y=2)
    _, found = run(s)
    assert not by(found, "cycle")


def test_conservative_preset_needs_three_repetitions():
    """conservative: min_repetitions 3 and period >= 3."""
    engine = Engine(build_config({}, preset="conservative"))
    s = Stream()
    for _ in range(2):
        s.call("a", "1", x=1).call("b", "2", y=2).call("c", "3", z=3)
    _, found = run(s, engine=engine)
    assert not by(found, "cycle")
    for _ in range(1):
        s.call("a", "1", x=1).call("b", "2", y=2).call("c", "3", z=3)
    _, found = run(s, engine=Engine(build_config({}, preset="conservative")))
    assert by(found, "cycle")


def test_sleep_and_poll_whose_status_moves_is_not_a_cycle():
    """sleep → check → sleep → check while the check's output moves: waiting, not looping."""
    s = Stream()
    for pct in (10, 40, 70, 90):
        s.call("bash", "", command="sleep 30")
        s.call("bash", f"build running: {pct}%", command="gh run view 42")
    _, found = run(s)
    assert not by(found, "cycle")


def test_a_cycle_is_confirmed_when_the_closing_result_arrives():
    """The second pass is reported on the closing call's result, so a last step
    that finally gives a different answer is not flagged."""
    s = Stream()
    s.call("read_file", "x = 1", path="a.py").call("bash", "1 failed", command="pytest")
    s.call("read_file", "x = 1", path="a.py").call("bash", "1 failed", command="pytest")
    _, found = run(s)
    assert [d.line for d in by(found, "cycle")] == [8]

    changed = Stream()
    changed.call("read_file", "x = 1", path="a.py").call("bash", "1 failed", command="pytest")
    changed.call("read_file", "x = 1", path="a.py").call("bash", "all passed", command="pytest")
    _, found = run(changed)
    assert not by(found, "cycle")


def test_without_results_the_cycle_is_flagged_on_the_call():
    """Logs that carry no results: the calls alone decide, on the closing call."""
    s = Stream()
    for _ in range(2):
        s.call("open_page", None, url="https://x.io/login").call("click", None, selector="#submit")
    _, found = run(s)
    assert [d.line for d in by(found, "cycle")] == [4]


def test_rotations_of_one_cycle_share_a_pattern():
    """A-B-A-B and B-A-B-A are the same loop to the escalation ladder."""

    def pattern(first, second):
        s = Stream()
        for _ in range(2):
            s.call(*first[:2], **first[2]).call(*second[:2], **second[2])
        _, found = run(s)
        return by(found, "cycle")[0].pattern

    a = ("read_file", "x", {"path": "a.py"})
    b = ("bash", "boom", {"command": "make"})
    assert pattern(a, b) == pattern(b, a)


def test_six_distinct_calls_are_not_a_cycle():
    """Period 6 exceeds the longest cycle (5): twelve calls of honest variety stay quiet."""
    s = Stream()
    for _ in range(2):
        for k in range(6):
            s.call("step", f"result {k}", n=k)
    _, found = run(s)
    assert not by(found, "cycle")


def test_the_same_call_reported_twice_counts_once():
    """A call seen through a hook and again in the transcript (same call id) is one call."""
    from monitor.events import Event, Kind

    engine = Engine()
    found = []
    for i in range(3):
        for _source in ("hook", "transcript"):
            found += engine.process(
                Event(
                    kind=Kind.TOOL_CALL,
                    session="s",
                    ts=float(i),
                    tool="bash",
                    args={"command": "ls"},
                    call_id=f"toolu_{i}",
                )
            ).detections
            found += engine.process(
                Event(
                    kind=Kind.TOOL_RESULT, session="s", ts=float(i), call_id=f"toolu_{i}", content="nothing"
                )
            ).detections
    assert engine.duplicates == 6
    assert engine.sessions["s"].events == 6
    assert [d.count for d in found if d.detector == "exact_repeat"] == [3]
