"""Loop episodes (monitor/detect/episodes.py): the model's rules, and the
engine's episodes over real sessions (docs/episodes.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import build_config
from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.detect.episodes import (
    ACKNOWLEDGED,
    CLOSED,
    ENDED,
    ESCALATED,
    FALSE_POSITIVE,
    MAX_OPEN,
    OPENED,
    STOPPED,
    UPDATED,
    EpisodeBook,
    EpisodeChange,
    episode_gap,
    group,
)
from monitor.events import EventRef, Level
from monitor.scan import scan
from tests.eventkit import Script, by, only

SCENARIOS = Path(__file__).parent / "scenarios"


def _d(
    seq: int, detector: str = "exact_repeat", pattern: str = "call:x", *, level=Level.WARN, count=3, cites=()
):
    refs = tuple(EventRef(s, "tool_call", "log", s, "") for s in (cites or (seq - 2, seq)))
    return Detection(
        detector, level, 1.0, f"{detector} {count}", pattern, count, session="s", seq=seq, ts=float(seq),
        evidence=refs, summary=f"did it {count} times", source="log", line=seq,
    )  # fmt: skip


def test_same_pattern_joins_and_the_count_follows_its_detector():
    book = EpisodeBook("s", gap=20)
    (opened,) = book.observe([_d(10, count=3)])
    assert opened.kind == OPENED and opened.episode.number == 1
    (updated,) = book.observe([_d(12, count=4, cites=(11, 12))])
    assert updated.kind == UPDATED
    episode = updated.episode
    assert (episode.count, episode.detections, episode.first_seq, episode.last_seq) == (4, 2, 10, 12)
    assert episode.message == "exact_repeat 4" and episode.open


def test_another_detector_on_the_same_events_joins_and_leads_when_higher():
    book = EpisodeBook("s", gap=20)
    book.observe([_d(10)])
    (change,) = book.observe([_d(14, "fingerprint", "exact:x", level=Level.CRITICAL, count=9, cites=(9, 14))])
    assert change.kind == ESCALATED
    episode = change.episode
    assert episode.detectors == ("exact_repeat", "fingerprint")
    assert episode.detector == "fingerprint" and episode.count == 9 and episode.peak is Level.CRITICAL
    assert episode.pairs == (("exact_repeat", "call:x"), ("fingerprint", "exact:x"))


def test_a_detection_on_other_events_opens_another_episode():
    book = EpisodeBook("s", gap=20)
    book.observe([_d(10, cites=(8, 10))])
    (change,) = book.observe([_d(15, "cycle", "cycle:ab", cites=(13, 15))])
    assert change.kind == OPENED and change.episode.number == 2
    assert len(book.open) == 2


def test_an_episode_stops_after_the_gap_without_a_joining_detection():
    book = EpisodeBook("s", gap=20)
    book.observe([_d(10)])
    assert book.tick(30) == []
    (closed,) = book.tick(31)
    assert closed.kind == CLOSED and closed.episode.closed == STOPPED
    (again,) = book.observe([_d(40)])
    assert again.kind == OPENED and again.episode.number == 2
    assert [e.number for e in book.recent] == [1]


def test_a_later_detection_past_the_gap_closes_then_opens_in_one_event():
    book = EpisodeBook("s", gap=20)
    book.observe([_d(10)])
    kinds = [(c.kind, c.episode.number) for c in book.observe([_d(50)])]
    assert kinds == [(CLOSED, 1), (OPENED, 2)]


def test_two_detections_of_one_event_make_one_change_per_episode():
    book = EpisodeBook("s", gap=20)
    changes = book.observe([_d(10), _d(10, "fingerprint", "exact:x", level=Level.CRITICAL)])
    assert [c.kind for c in changes] == [OPENED]
    assert changes[0].episode.level is Level.CRITICAL and changes[0].episode.detections == 2


def test_open_episodes_are_bounded():
    book = EpisodeBook("s", gap=1000)
    for n in range(MAX_OPEN + 2):
        book.observe([_d(100 * (n + 1), pattern=f"p{n}", cites=(100 * (n + 1),))])
    assert len(book.open) == MAX_OPEN
    assert [e.closed for e in book.recent] == [STOPPED, STOPPED]


def test_close_all_and_holding():
    book = EpisodeBook("s")
    book.observe([_d(10)])
    assert book.holding("exact_repeat", "call:x").number == 1
    (closed,) = book.close_all(ACKNOWLEDGED)
    assert closed.episode.closed == ACKNOWLEDGED and not book.open
    assert book.holding("exact_repeat", "call:x").closed == ACKNOWLEDGED


def test_false_positive_detections_join_nothing():
    d = _d(10)
    d.suppressed = "marked as a false positive"
    assert EpisodeBook("s").observe([d]) == []


def test_the_gap_is_the_widest_window_in_events():
    assert episode_gap([10, 5, 8]) == 20
    assert episode_gap([]) == 20
    assert Engine(build_config({})).episode_gap == 20


def test_group_is_the_engines_rule_afterwards():
    detections = [_d(10), _d(12), _d(60)]
    episodes = group(detections, 20)
    assert [(e.number, e.detections, e.closed) for e in episodes] == [(1, 2, STOPPED), (2, 1, None)]


# -- the engine ----------------------------------------------------------------


def _loop(script: Script, times: int) -> Script:
    for _ in range(times):
        script.bash(
            "pytest tests/test_x.py", "FAILED tests/test_x.py::test_a - AssertionError\n1 failed", code=1
        )
    return script


def _changes(engine: Engine, script: Script) -> list[EpisodeChange]:
    out: list[EpisodeChange] = []
    for event in script.events():
        out.extend(engine.process(event).episodes)
    return out


def test_a_long_loop_is_one_episode_whatever_the_detections():
    engine = Engine(build_config({}))
    changes = _changes(engine, _loop(Script(), 60))
    detections = sum(1 for c in changes if c.detection is not None)
    numbers = {c.episode.number for c in changes}
    assert numbers == {1}
    assert [c.kind for c in changes].count(OPENED) == 1
    summary = engine.summary("s1")
    (episode,) = summary.episodes
    assert episode.detections >= detections and episode.detections > 20
    assert episode.peak is Level.TERMINATE
    assert episode.count >= 50  # it kept counting (the detectors' counts never freeze at their window)


def test_fingerprint_keeps_counting_past_its_window():
    engine = Engine(only("fingerprint"))
    found = by(_loop(Script(), 40).run(engine=engine), "fingerprint")
    assert found[-1].count == 40
    assert "40 times in a row" in found[-1].message


def test_exact_repeat_never_counts_more_than_its_window():
    found = by(_loop(Script(), 30).run(only("exact_repeat")), "exact_repeat")
    for d in found:
        shown = int(d.message.split("in the last ")[1].split()[0])
        assert d.count <= shown


def test_repeated_result_keeps_counting():
    script = Script()
    for n in range(30):
        script.bash(f"python run{n}.py", "Traceback\nModuleNotFoundError: No module named 'foo'", code=1)
    found = by(script.run(only("repeated_result")), "repeated_result")
    assert found[-1].count == 30
    assert " 30 times" in found[-1].message


def test_session_end_closes_its_episodes():
    engine = Engine(build_config({}))
    changes = _changes(engine, _loop(Script(), 8).end())
    assert changes[-1].kind == CLOSED and changes[-1].episode.closed == ENDED
    assert engine.summary("s1").episodes == ()
    assert engine.summary("s1").closed_episodes[-1].closed == ENDED


def test_acknowledge_closes_and_the_loop_going_on_opens_a_new_episode():
    engine = Engine(build_config({}))
    script = _loop(Script(), 8)
    _changes(engine, script)
    (closed,) = engine.acknowledge("s1", script.ts)
    assert closed.episode.closed == ACKNOWLEDGED
    more = _changes(engine, _loop(Script(start=script.ts + 10, ids="d"), 4))
    assert more and more[0].kind == OPENED and more[0].episode.number == 2


def test_a_false_positive_mutes_every_pattern_of_the_episode():
    engine = Engine(build_config({}))
    script = _loop(Script(), 10)
    _changes(engine, script)
    (episode,) = engine.summary("s1").episodes
    assert len(episode.pairs) >= 2  # several detectors saw the loop
    (closed,) = engine.mark_false_positive(engine.summary("s1").detection)
    assert closed.episode.closed == FALSE_POSITIVE
    assert engine.level("s1") is Level.NONE
    more = _loop(Script(start=script.ts + 10, ids="d"), 10)
    found = [d for e in more.events() for d in engine.process(e).detections]
    pairs = set(episode.pairs)
    again = [d for d in found if (d.detector, d.pattern) in pairs]
    assert again and all(d.suppressed == "marked as a false positive" for d in again)


@pytest.mark.parametrize("name", ["a_loop_swarm_workers", "b_loop_reformulating_turns"])
def test_scenarios_give_one_episode_per_looping_session(name):
    report = scan([str(SCENARIOS / f"{name}.jsonl")])
    episodes = group(report.detections)
    sessions = {d.session for d in report.detections}
    assert len(episodes) == len(sessions)
    assert len(report.detections) >= len(episodes)
