"""Real runs as the test of every detector (issue 13).

``tests/real/labels.toml`` labels each real run kept in ``tests/fixtures`` by
reading it: honest, or the stretches a person would call stuck.  Every
labelled stretch must be caught (a detection at warn or above inside it) and
no honest run may reach warn, under the default preset.

What fails today is listed once below, each with its reason, and expected to
fail (not strictly: a fix makes it pass); the list empties as the detectors
learn.  Labels are never weakened to make this pass.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from monitor.events import Level
from monitor.labels import Run, load_labels
from monitor.scan import scan

HERE = Path(__file__).resolve().parent
LABELS = load_labels(HERE / "real" / "labels.toml")
RUNS = LABELS.runs

#: Honest runs that reach warn today, by test id: the detector and why it is wrong.
KNOWN_FALSE_POSITIVES: dict[str, str] = {}
#: Labelled stuck stretches not caught today, by test id.
KNOWN_MISSES: dict[str, str] = {}


def _name(run: Run) -> str:
    name = Path(run.path).name
    for suffix in (".traj.json", ".jsonl", ".traj"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _marked(test_id: str, known: dict[str, str]):
    if test_id in known:
        return pytest.param(test_id, marks=pytest.mark.xfail(reason=known[test_id], strict=False), id=test_id)
    return pytest.param(test_id, id=test_id)


BY_ID = {_name(run): run for run in RUNS}
HONEST = [_marked(_name(r), KNOWN_FALSE_POSITIVES) for r in RUNS if r.label == "honest"]
EPISODES = {f"{_name(r)}@{lo}-{hi}": (r, lo, hi) for r in RUNS if r.label == "stuck" for lo, hi in r.episodes}
LOOPS = [_marked(test_id, KNOWN_MISSES) for test_id in EPISODES]


@cache
def _warnings(path: str) -> tuple[tuple[str, int | None, str], ...]:
    report = scan([path])
    assert report.problem_count == 0, report.problems[:3]
    return tuple((d.detector, d.line, d.level.label) for d in report.detections if d.level >= Level.WARN)


def test_the_real_runs_are_many_and_from_several_agents():
    """At least 40 labelled runs from at least three agents, each with provenance,
    a licence, a label and a note saying what a reader saw; every file exists."""
    agents = Counter(run.agent for run in RUNS)
    assert len(RUNS) >= 40 and len(agents) >= 3, agents
    for source in LABELS.sources.values():
        assert source.repository and source.licence and source.path
    for run in RUNS:
        assert run.file.is_file() and run.source and run.note, run.path
    assert len(BY_ID) == len(RUNS)  # names are unique: test ids name runs
    assert set(KNOWN_FALSE_POSITIVES) <= {_name(r) for r in RUNS if r.label == "honest"}
    assert set(KNOWN_MISSES) <= set(EPISODES)


@pytest.mark.parametrize("name", HONEST)
def test_an_honest_run_never_reaches_warn(name: str):
    """A run a reader calls honest gets no detection at warn or above."""
    found = _warnings(str(BY_ID[name].file))
    assert not found, found[:5]


@pytest.mark.parametrize("episode", LOOPS)
def test_a_labelled_loop_is_caught_inside_its_range(episode: str):
    """A stretch a reader calls stuck gets a detection at warn or above inside it."""
    run, lo, hi = EPISODES[episode]
    found = _warnings(str(run.file))
    assert any(line is not None and lo <= line <= hi for _, line, _ in found), found[:8]
