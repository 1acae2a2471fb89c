"""The presets against honest work: the labelled corpus and the real transcripts.

The corpus test (tests/test_scenarios.py) holds the default preset to "no
honest session reaches warn".  Here the other two: ``conservative`` must be at
least as quiet, and ``aggressive`` -- which flags the second identical call,
before its result can show whether anything moved -- may warn an honest
session but must never take one past ``warn``: a poll whose output moves, a
plan restated before each piece of work, "Round 3 done" after "Round 2 done"
must not climb to ``terminate`` (which an operator may have set to kill).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import build_config
from monitor.detect.engine import Engine
from monitor.events import Level
from monitor.scan import scan
from tests.eventkit import Script, by, only

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
HONEST = sorted(SCENARIOS.glob("*_honest_*.jsonl"))
LOOPS = sorted(SCENARIOS.glob("*_loop_*.jsonl"))


def _worst(report) -> list[tuple[str, int | None, str]]:
    return [(d.detector, d.line, d.level.label) for d in report.detections if d.level >= Level.WARN]


@pytest.mark.parametrize("log", HONEST, ids=[p.stem for p in HONEST])
def test_conservative_never_warns_an_honest_session(log: Path):
    """What the default preset leaves alone, the conservative one does too."""
    assert not _worst(scan([str(log)], build_config({"preset": "conservative"})))


@pytest.mark.parametrize("log", HONEST, ids=[p.stem for p in HONEST])
def test_aggressive_never_takes_an_honest_session_past_warn(log: Path):
    """Aggressive may warn early, but honest work never reaches critical or terminate."""
    report = scan([str(log)], build_config({"preset": "aggressive"}))
    assert report.worst <= Level.WARN, _worst(report)


def test_aggressive_on_the_real_transcripts(shared_fixtures: Path):
    """The real Claude Code, Codex and SWE-agent sessions (honest work, the Codex
    one with seven identical polls whose output moves) stay at warn at most."""
    paths = sorted(str(p) for p in shared_fixtures.rglob("*") if p.suffix in (".jsonl", ".traj"))
    report = scan(paths, build_config({"preset": "aggressive"}))
    assert report.events > 1000
    assert report.worst <= Level.WARN, _worst(report)


@pytest.mark.parametrize("log", LOOPS, ids=[p.stem for p in LOOPS])
def test_aggressive_catches_every_loop_no_later_than_balanced(log: Path):
    """Aggressive is earlier, never later: each loop of the corpus reaches warn
    from its detector at or before the line the default preset does."""
    def first(preset: str) -> int:
        report = scan([str(log)], build_config({"preset": preset}))
        return min(d.line for d in report.detections if d.level >= Level.WARN)
    assert first("aggressive") <= first("balanced")


@pytest.mark.parametrize("detector", ["exact_repeat", "fingerprint"])
def test_threshold_two_flags_a_moving_poll_once_at_most(detector: str):
    """With a threshold of 2 the second identical call is flagged before its
    result is in; once the results are seen to move, the poll is progress and
    is not flagged at every further call (it used to be, up to terminate)."""
    s = Script(step=1.0)
    for n in range(8):
        s.call("bash", {"command": "gh run view 42"}, f"in progress: {n * 12}% done")
    found = by(Engine(only(detector, threshold=2)).process_many(s.events()), detector)
    assert len(found) <= 1 and all(d.level == Level.WARN for d in found)


@pytest.mark.parametrize("detector", ["exact_repeat", "fingerprint"])
def test_threshold_two_still_flags_a_stuck_poll_at_every_call(detector: str):
    """The same poll whose output does not move: flagged from the second call on."""
    s = Script(step=1.0)
    for _ in range(6):
        s.call("bash", {"command": "gh run view 42"}, "in progress: 40% done")
    found = by(Engine(only(detector, threshold=2)).process_many(s.events()), detector)
    assert [d.count for d in found][:3] == [2, 3, 4]
    assert found[-1].level == Level.TERMINATE


def test_threshold_two_flags_a_poll_that_moved_and_then_stuck():
    """Moving at first, then frozen: flagged again once two results in a row agree."""
    s = Script(step=1.0)
    for n in range(3):
        s.call("bash", {"command": "gh run view 42"}, f"in progress: {n * 30}% done")
    for _ in range(3):
        s.call("bash", {"command": "gh run view 42"}, "in progress: 90% done")
    found = by(Engine(only("exact_repeat", threshold=2)).process_many(s.events()), "exact_repeat")
    calls = [line for line, record in enumerate(s.records, 1) if record["type"] == "tool_call"]
    # The 2nd call (no result yet to judge by), then the 6th: the 4th and 5th
    # results agree (the 4th call's result, 90 %, equals the 5th's).
    assert [d.line for d in found] == [calls[1], calls[5]]


def test_the_readme_lists_what_each_preset_changes():
    """README's "Presets" table is what the detectors' ``presets`` say (every
    setting that differs from the default), so it cannot drift from the code."""
    from monitor.detect import REGISTRY

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for name, cls in REGISTRY.items():
        defaults = cls.Settings()
        cells = []
        for preset in ("conservative", "aggressive"):
            changed = {k: v for k, v in cls.presets.get(preset, {}).items() if getattr(defaults, k) != v}
            cells.append(", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in changed.items()) or "—")
        row = f"| `{name}` | {cells[0]} | {cells[1]} |"
        assert row in readme, row


def test_a_repeat_says_same_result_only_once_two_results_agree():
    """At a threshold of 2 the second call is flagged before its result is in:
    the message says it is too soon to tell; from the third call on, with two
    results alike, it says the result is the same."""
    s = Script(step=1.0)
    for _ in range(3):
        s.call("bash", {"command": "gh run view 42"}, "in progress: 40% done")
    first, second = by(Engine(only("exact_repeat", threshold=2)).process_many(s.events()), "exact_repeat")
    assert first.message.endswith("too soon to tell whether its result changes")
    assert "has not changed" not in first.advice
    assert second.message.endswith("with the same result")
    (exact,) = by(Engine(only("fingerprint", threshold=2)).process_many(s.events()[:5]), "fingerprint")
    assert exact.message.endswith("too soon to tell whether its result changes")
