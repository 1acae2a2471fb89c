"""The presets against honest work: the labelled corpus and the real transcripts.

The corpus test (tests/test_scenarios.py) holds the default preset to "no
honest session reaches warn".  Here the other two: ``conservative`` must be at
least as quiet, and ``aggressive`` -- which flags a call's first repeat
(once its result agrees with the one before) and an output's first
near-copy -- may warn an honest session but must never take one past
``warn``: a poll whose output moves, a
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


def test_aggressive_on_the_real_transcripts(real_fixtures: Path):
    """The real Claude Code, Codex and SWE-agent sessions (honest work, the Codex
    one with seven identical polls whose output moves) stay at warn at most."""
    # (openhands-eval/output.jsonl holds a real loop, labelled in tests/fixtures/README.md: not honest work.)
    paths = sorted(
        str(p)
        for p in real_fixtures.rglob("*")
        if p.suffix in (".jsonl", ".traj") and p.parent.name != "openhands-eval"
    )
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
def test_threshold_two_never_flags_a_moving_poll(detector: str):
    """With a threshold of 2 the second identical call reaches the threshold
    before its result is in; it is judged when the result is back, and a poll
    whose output moves is never flagged (it used to be, at every call, up to
    terminate; then once, at its second call)."""
    s = Script(step=1.0)
    for n in range(8):
        s.call("bash", {"command": "gh run view 42"}, f"in progress: {n * 12}% done")
    assert not by(Engine(only(detector, threshold=2)).process_many(s.events()), detector)


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
    # The 5th call's result (90 %, as the 4th's), then the 6th call (two
    # results in a row agree already when it is made).
    assert [d.line for d in found] == [calls[4] + 1, calls[5]]


def test_the_docs_list_what_each_preset_changes():
    """The "Presets" table of docs/detectors.md is what the detectors' ``presets`` say (every
    setting that differs from the default), so it cannot drift from the code."""
    from monitor.detect import REGISTRY

    page = (Path(__file__).resolve().parent.parent / "docs" / "detectors.md").read_text()
    for name, cls in REGISTRY.items():
        defaults = cls.Settings()
        cells = []
        for preset in ("conservative", "aggressive"):
            changed = {k: v for k, v in cls.presets.get(preset, {}).items() if getattr(defaults, k) != v}
            cells.append(
                ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in changed.items())
                or "—"
            )
        row = f"| `{name}` | {cells[0]} | {cells[1]} |"
        assert row in page, row


@pytest.mark.parametrize("detector", ["exact_repeat", "fingerprint"])
def test_a_repeat_at_threshold_two_is_judged_when_its_result_is_back(detector: str):
    """At a threshold of 2 the second call is not flagged blind: it is flagged
    at its result, if that agrees with the first (and then says so); from the
    third call on, two results alike are already back when the call is made."""
    s = Script(step=1.0)
    for _ in range(3):
        s.call("bash", {"command": "gh run view 42"}, "in progress: 40% done")
    found = by(Engine(only(detector, threshold=2)).process_many(s.events()), detector)
    results = [line for line, record in enumerate(s.records, 1) if record["type"] == "tool_result"]
    calls = [line for line, record in enumerate(s.records, 1) if record["type"] == "tool_call"]
    assert [(d.line, d.count) for d in found] == [(results[1], 2), (calls[2], 3)]
    assert all("the same result" in d.message for d in found)
    assert [ref.line for ref in found[0].evidence] == calls[:2]


@pytest.mark.parametrize("detector", ["exact_repeat", "fingerprint"])
def test_parallel_repeats_wait_for_their_results(detector: str):
    """Three identical calls made at once (before any result) reach exact_repeat's
    default threshold with nothing to judge by: flagged when two results are
    back and agree, not when they differ.  fingerprint counts attempts, and one
    reply's calls are one (calls.attempts): nothing there."""
    same = 1 if detector == "exact_repeat" else 0
    for contents, expected in ((["same"] * 3, same), (["a", "b", "c"], 0)):
        s = Script(step=1.0)
        for _ in range(3):
            s.call("bash", {"command": "gh run view 42"}, answer=False)
        for n, content in enumerate(contents, 1):
            s.add({"type": "tool_result", "id": f"c{n}", "content": content, "is_error": False})
        found = by(Engine(only(detector)).process_many(s.events()), detector)
        assert len(found) == expected, [d.message for d in found]
        if found:
            assert found[0].line == len(s.records) - 1  # the second result back
