"""The escalation policy: ladder, nudges, acknowledge with cool-down, false positives, reset, counters."""

from __future__ import annotations

import pytest

from monitor.config import ConfigError, build_config
from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.detect.escalation import PRESET_LADDERS, EscalationPolicy, EscalationSettings
from monitor.events import Level
from tests.eventkit import Script, by, only


def detection(
    pattern: str = "call:bash ls",
    *,
    session: str = "s1",
    ts: float = 100.0,
    level: Level = Level.WARN,
    detector: str = "exact_repeat",
    count: int = 3,
) -> Detection:
    return Detection(
        detector=detector,
        level=level,
        score=0.5,
        message=f"{pattern} repeated",
        pattern=pattern,
        count=count,
        tool="bash",
        session=session,
        ts=ts,
        summary=f"called bash with the same arguments {count} times",
        advice="Its result has not changed.",
    )


def climb(policy: EscalationPolicy, n: int, **kwargs) -> list[Level]:
    return [policy.apply(detection(ts=100.0 + i, count=3 + i, **kwargs)).level for i in range(n)]


def test_balanced_ladder_climbs_per_pattern_and_its_last_rung_repeats():
    """The same pattern again and again: warn, warn, critical, critical, terminate, terminate."""
    policy = EscalationPolicy()
    assert climb(policy, 6) == [
        Level.WARN,
        Level.WARN,
        Level.CRITICAL,
        Level.CRITICAL,
        Level.TERMINATE,
        Level.TERMINATE,
    ]
    assert policy.state("s1").level == Level.TERMINATE


def test_each_pattern_has_its_own_ladder_and_sessions_are_separate():
    """A new pattern starts at the bottom; another session's repeats do not count."""
    policy = EscalationPolicy()
    climb(policy, 3)
    assert policy.apply(detection("call:read_file a.py")).level == Level.WARN
    assert policy.apply(detection(session="s2")).level == Level.WARN
    assert policy.state("s1").level == Level.CRITICAL  # the session keeps its worst level


def test_the_final_level_is_the_higher_of_rung_and_proposal():
    """A detector proposing critical is not held back by the ladder."""
    policy = EscalationPolicy()
    d = policy.apply(detection(level=Level.CRITICAL))
    assert d.level == Level.CRITICAL and d.proposed == Level.CRITICAL


def test_one_detectors_jump_to_terminate_stops_at_critical_until_seconded():
    """A detector proposing terminate on its own (turn similarity at 5) takes the session
    to critical; terminate once the session stood at critical, or with another detector warning."""
    policy = EscalationPolicy()
    first = policy.apply(detection(level=Level.TERMINATE, detector="turn_similarity"))
    assert first.level == Level.CRITICAL and first.proposed == Level.TERMINATE
    again = policy.apply(detection(ts=101.0, count=4, level=Level.TERMINATE, detector="turn_similarity"))
    assert again.level == Level.TERMINATE  # sustained: the session already stood at critical

    other = EscalationPolicy()
    assert other.apply(detection("call:bash make")).level == Level.WARN  # exact_repeat warns
    jump = other.apply(detection("turn:x", ts=101.0, level=Level.TERMINATE, detector="turn_similarity"))
    assert jump.level == Level.TERMINATE  # two independent signals


def test_the_ladders_own_terminate_rung_stands():
    """A ladder that goes warn, warn, terminate (design note 000) still stops the session at its rung."""
    policy = EscalationPolicy(EscalationSettings(ladder=(Level.WARN, Level.WARN, Level.TERMINATE)))
    assert climb(policy, 3) == [Level.WARN, Level.WARN, Level.TERMINATE]


def test_notices_do_not_climb_the_ladder():
    """Informational findings stay notices and do not use up rungs."""
    policy = EscalationPolicy()
    for i in range(5):
        assert policy.apply(detection(level=Level.NOTICE, ts=100.0 + i)).level == Level.NOTICE
    assert policy.apply(detection()).level == Level.WARN


@pytest.mark.parametrize(
    "preset,ladder",
    [
        ("aggressive", [Level.WARN, Level.CRITICAL, Level.TERMINATE, Level.TERMINATE]),
        ("conservative", [Level.WARN, Level.WARN, Level.WARN, Level.CRITICAL]),
    ],
)
def test_preset_ladders(preset, ladder):
    """Each preset brings its ladder: aggressive is warn → critical → terminate."""
    config = build_config({}, preset=preset)
    policy = EscalationPolicy(config.escalation)
    assert config.escalation.ladder == PRESET_LADDERS[preset]
    assert climb(policy, len(ladder)) == ladder


def test_configured_ladder_from_the_design_notes():
    """ladder = ["warn", "warn", "terminate"] (design note 001) is honoured."""
    config = build_config({"escalation": {"ladder": ["warn", "warn", "terminate"]}})
    assert climb(EscalationPolicy(config.escalation), 4) == [
        Level.WARN,
        Level.WARN,
        Level.TERMINATE,
        Level.TERMINATE,
    ]


def test_nudges_escalate_in_firmness_and_fill_placeholders():
    """warn suggests, critical says STOP repeating the tool, terminate says the operator was alerted."""
    policy = EscalationPolicy()
    nudges = [policy.apply(detection(ts=100.0 + i, count=3 + i)).nudge for i in range(5)]
    assert nudges[0].startswith("[loopwatch] You've called bash with the same arguments 3 times")
    assert "Its result has not changed." in nudges[0]
    assert (
        "WARNING" in nudges[2]
        and "STOP repeating bash" in nudges[2]
        and "same arguments 5 times." in nudges[2]
    )
    assert "CRITICAL" in nudges[4] and "has been alerted" in nudges[4] and "stopped" not in nudges[4]
    assert policy.state("s1").nudge == nudges[4]


def test_the_terminate_nudge_says_the_session_is_stopped_only_when_auto_kill_is_on():
    """Was: "this session is about to be stopped" while auto-kill was off (nothing stopped it)."""
    from monitor.config import Config, ControlSettings
    from monitor.detect.engine import Engine

    def terminate_nudge(config: Config) -> str:
        policy = Engine(config).policy
        return [policy.apply(detection(ts=100.0 + i, count=3 + i)).nudge for i in range(5)][-1]

    off = terminate_nudge(Config())
    assert "has been alerted" in off and "stopped" not in off
    on = terminate_nudge(Config(control=ControlSettings(auto_kill=True)))
    assert "this session is being stopped" in on and "alerted" not in on
    custom = Config(control=ControlSettings(auto_kill=True))
    custom.escalation.nudges["terminate"] = "[ops] {summary}: stop."
    assert terminate_nudge(custom).startswith("[ops] ")


def test_nudges_about_replies_name_no_internal_pattern_key():
    """A repeated reply has no tool: the critical nudge says "STOP repeating
    yourself", not the detector's internal key ("output:1a2b")."""
    policy = EscalationPolicy()
    nudges = []
    for i in range(3):
        d = Detection(
            detector="output_similarity",
            level=Level.WARN,
            score=0.95,
            message="assistant output 95% similar",
            pattern="output:1a2b3c",
            count=3 + i,
            session="s1",
            ts=100.0 + i,
            summary="produced nearly the same output 3 times",
        )
        nudges.append(policy.apply(d).nudge)
    assert "WARNING" in nudges[2] and "STOP repeating yourself" in nudges[2]
    assert not any("output:" in nudge for nudge in nudges)


def test_custom_nudge_templates_use_the_documented_fields():
    """A hand-written template uses {tool} and {count} (braces doubled); an unknown
    {placeholder} is a config error (issue 32, item 13; tests/test_config_bounds.py)."""
    config = build_config({"escalation": {"nudges": {"warn": "Stop calling {tool} ({count}x) {{nope}}"}}})
    d = EscalationPolicy(config.escalation).apply(detection())
    assert d.nudge == "Stop calling bash (3x) {nope}"
    with pytest.raises(ConfigError, match="nope"):
        build_config({"escalation": {"nudges": {"warn": "Stop calling {tool} {nope}"}}})


def test_acknowledge_returns_to_watching_with_a_cooldown():
    """After an ack the session is watching; the same pattern within the cool-down is only a
    notice (marked suppressed); after it, the ladder resumes where it was."""
    policy = EscalationPolicy(EscalationSettings(cooldown_seconds=60.0))
    climb(policy, 2)  # warn, warn at ts 100, 101
    policy.acknowledge("s1", now=110.0)
    state = policy.state("s1")
    assert state.level == Level.NONE and state.nudge == "" and state.detector is None

    during = policy.apply(detection(ts=150.0))
    assert during.level == Level.NOTICE and during.suppressed and "acknowledged" in during.suppressed
    # Back to watching, as help and docs say (was: the row read NOTICE at the next repeat).
    assert policy.state("s1").level == Level.NONE and policy.state("s1").reason == ""

    after = policy.apply(detection(ts=171.0))
    assert after.level == Level.CRITICAL and after.suppressed is None
    assert policy.state("s1").level == Level.CRITICAL


def test_acknowledge_does_not_hide_a_new_pattern():
    """The cool-down covers what the operator saw, not a different loop that starts later."""
    policy = EscalationPolicy(EscalationSettings(cooldown_seconds=60.0))
    climb(policy, 1)
    policy.acknowledge("s1", now=101.0)
    assert policy.apply(detection("call:read_file b.py", ts=105.0)).level == Level.WARN


def test_mark_false_positive_stops_flagging_that_pattern_only():
    """A false positive is counted once, clears the session if it was the reason, and that
    pattern is never flagged again in that session; other patterns and sessions still are."""
    policy = EscalationPolicy()
    first = policy.apply(detection())
    policy.mark_false_positive(first)
    policy.mark_false_positive(first)  # idempotent
    assert policy.false_positive_count == 1
    assert policy.state("s1").level == Level.NONE

    again = policy.apply(detection(ts=200.0))
    assert again.level == Level.NOTICE and "false positive" in (again.suppressed or "")
    assert policy.apply(detection("call:other", ts=201.0)).level == Level.WARN
    assert policy.apply(detection(session="s2")).level == Level.WARN
    assert policy.counters()["false_positives"] == 1


def test_false_positive_on_one_pattern_leaves_another_active_one_flagged():
    """Two loops in one session: marking the latest a false positive leaves the session at the
    level of the other one, not at watching."""
    policy = EscalationPolicy()
    policy.apply(detection("call:a", ts=100.0))  # warn
    latest = policy.apply(detection("call:b", ts=101.0, detector="cycle"))
    policy.mark_false_positive(latest)
    state = policy.state("s1")
    assert state.level == Level.WARN and state.detector == "exact_repeat"


def test_reset_forgets_the_session():
    """reset() clears level, ladder, acks and false positives of that session only."""
    policy = EscalationPolicy()
    climb(policy, 3)
    policy.apply(detection(session="s2"))
    policy.reset("s1")
    assert policy.state("s1").level == Level.NONE
    assert policy.apply(detection(ts=300.0)).level == Level.WARN
    assert policy.state("s2").level == Level.WARN


def test_counters():
    """checks, detections by detector and by level, false positives."""
    policy = EscalationPolicy()
    climb(policy, 3)
    policy.apply(detection(level=Level.NOTICE, detector="limits"))
    fp = policy.apply(detection("call:x", detector="cycle"))
    policy.mark_false_positive(fp)
    counters = policy.counters()
    assert counters["checks"] == 5
    assert counters["detections_by_detector"] == {"exact_repeat": 3, "limits": 1, "cycle": 1}
    assert counters["detections_by_level"] == {"warn": 3, "critical": 1, "notice": 1}
    assert counters["false_positives"] == 1


def test_engine_applies_the_policy_with_event_times():
    """Through the engine: a live loop climbs the ladder, an ack at event time cools it down."""
    s = Script(step=1.0)
    for _ in range(4):
        s.call(
            "bash",
            {"command": "ls build/"},
            "ls: cannot access 'build/': No such file or directory",
            is_error=False,
        )
    engine = Engine(only("exact_repeat"))
    events = s.events()
    found = engine.process_many(events)
    assert [d.level for d in by(found, "exact_repeat")] == [Level.WARN, Level.WARN]
    engine.policy.acknowledge("s1", now=events[-1].ts)
    assert engine.level("s1") == Level.NONE
    more = Script(step=1.0, start=events[-1].ts + 1, ids="later")
    more.call("bash", {"command": "ls build/"}, "ls: cannot access 'build/': No such file or directory")
    later = engine.process_many(more.events()[1:])
    assert later and later[-1].level == Level.NOTICE and later[-1].suppressed


def test_a_loop_that_goes_on_keeps_climbing_after_its_count_stops_growing():
    """exact_repeat's count is bounded by its window (10 calls): once it stops
    growing, the detections still cite the same streak, so the loop climbs on."""
    s = Script(step=1.0)
    for _ in range(16):
        s.call("bash", {"command": "make"}, "make: *** [all] Error 1", is_error=True)
    found = by(Engine(only("exact_repeat")).process_many(s.events()), "exact_repeat")
    counts = [d.count for d in found]
    assert counts[-1] == counts[-2] == counts[-3]  # the count has plateaued ...
    assert [d.level for d in found][-1] == Level.TERMINATE  # ... and the ladder went on


def test_a_later_separate_episode_of_a_pattern_starts_at_the_first_rung():
    """The same loop twice, with real progress in between: two episodes, each
    starting at warn -- the first loop's rungs do not carry over, so a session
    that recovers is not terminated for falling into a short loop again later."""
    s = Script(step=1.0)
    for episode in range(2):
        for _ in range(5):
            s.call("bash", {"command": "pytest -q"}, "1 failed, 9 passed", is_error=True)
        for n in range(12):  # a dozen different calls that succeed: the window moves on
            s.call("read_file", {"path": f"src/m{episode}_{n}.py"}, f"module {n}")
    found = by(Engine(only("exact_repeat")).process_many(s.events()), "exact_repeat")
    levels = [d.level for d in found]
    assert levels == [Level.WARN, Level.WARN, Level.CRITICAL] * 2


def test_continues_needs_two_earlier_events_or_a_growing_count():
    """A repeat that cites only the one earlier output it repeats ("Round 3
    done" after "Round 2 done") is a new episode; one that cites the streak is not."""
    from monitor.detect.escalation import continues
    from monitor.events import EventRef

    def found(count: int, seqs: list[int], seq: int) -> Detection:
        refs = tuple(EventRef(n, "message", "a.jsonl", n, "x") for n in seqs)
        d = detection(count=count)
        d.evidence, d.seq, d.source = refs, seq, "a.jsonl"
        return d

    assert not continues(found(2, [63, 103], 104), (2, 64))  # links back to one output only
    assert continues(found(2, [60, 63, 103], 104), (2, 64))  # cites the streak
    assert continues(found(3, [63, 103], 104), (2, 64))  # the count grew
    assert continues(found(2, [63, 103], 0), (2, 64))  # no position: as before
    assert continues(found(2, [103], 104), (2, 64))  # too little evidence to tell


def test_the_standing_detection_is_kept_whole_but_its_evidence():
    """The session's standing detection is every field of the detection but
    its evidence (which the detector windows hold, and a standing detection
    may outlive)."""
    import dataclasses

    from monitor.detect.escalation import _without_evidence
    from monitor.events import EventRef

    d = detection(count=7)
    d.evidence = (EventRef(1, "tool_call", "a.jsonl", 1, "bash(ls)"),)
    d.source, d.line, d.seq, d.nudge, d.suppressed, d.proposed = "a.jsonl", 9, 9, "stop", None, Level.WARN
    copy = _without_evidence(d)
    assert dataclasses.replace(d, evidence=()) == copy
    policy = EscalationPolicy()
    shown = policy.apply(d)
    assert shown.evidence and policy.state("s1").last.evidence == ()
    assert policy.state("s1").last.pattern == d.pattern
