"""The compaction-loop detector: compaction after compaction with no work in between."""

from __future__ import annotations

from monitor.config import build_config
from monitor.events import Level
from tests.eventkit import Script, by, only


def test_two_compactions_without_work_warn():
    """A compaction straight after a compaction (only talk between) warns on the 2nd."""
    s = Script()
    s.call("read_file", {"path": "big.log"}, "x" * 100)
    s.compaction()
    s.say("Let me continue where I left off.")
    s.compaction()
    (d,) = by(s.run(only("compaction")), "compaction")
    assert d.line == s.line and d.count == 2
    assert "2 compactions in a row" in d.message
    assert "compacted your context 2 times" in d.nudge


def test_work_between_compactions_is_honest():
    """A long session that compacts every so often, doing work between, never warns."""
    s = Script()
    for n in range(6):
        for k in range(3):
            s.call("read_file", {"path": f"src/mod{n}_{k}.py"}, f"content {n} {k}")
        s.compaction()
    assert not by(s.run(only("compaction")), "compaction")


def test_user_continuation_messages_do_not_hide_the_loop():
    """Harnesses continue a compacted session with a user-role message; that is not work either."""
    s = Script()
    for _ in range(3):
        s.compaction()
        s.user("This session is being continued from a previous conversation that ran out of context.")
    warned = by(s.run(), "compaction")
    assert [d.count for d in warned] == [2, 3]


def test_the_ladder_climbs_with_each_further_compaction():
    """Each further compaction without work emits again with a rising count, up the ladder."""
    s = Script()
    for _ in range(6):
        s.compaction()
    warned = by(s.run(only("compaction")), "compaction")
    assert [d.count for d in warned] == [2, 3, 4, 5, 6]
    assert warned[0].level == Level.WARN and warned[-1].level == Level.TERMINATE


def test_work_ends_the_streak():
    """compaction, compaction (warn), a tool call, compaction: the streak restarts at 1."""
    s = Script()
    s.compaction().compaction()
    s.call("bash", {"command": "ls"}, "a b")
    s.compaction()
    warned = by(s.run(only("compaction")), "compaction")
    assert [d.count for d in warned] == [2]


def test_settings_threshold_and_min_calls():
    """threshold = 3 waits for the 3rd; min_calls = 2 makes a single call between not enough work."""
    s = Script()
    s.compaction().compaction()
    assert not by(s.run(only("compaction", threshold=3)), "compaction")

    s = Script()
    s.compaction()
    s.call("bash", {"command": "ls"}, "a b")
    s.compaction()
    assert by(s.run(only("compaction", min_calls=2)), "compaction")
    assert not by(s.run(only("compaction")), "compaction")


def test_presets():
    """conservative waits for a 3rd compaction; aggressive needs two calls between compactions."""
    from monitor.detect.detectors.compaction import CompactionLoop

    assert build_config({}, preset="conservative").detector_settings("compaction").threshold == 3
    assert build_config({}, preset="aggressive").detector_settings("compaction").min_calls == 2
    assert CompactionLoop.resets_on_user_turn is False
