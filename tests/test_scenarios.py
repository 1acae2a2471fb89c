"""The labelled scenario corpus: every loop caught by its line, no honest session warned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.events import Level
from monitor.scan import scan

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _cases() -> list[tuple[Path, dict]]:
    cases = []
    for expect in sorted(SCENARIOS.glob("*.expect.json")):
        log = expect.with_name(expect.name.replace(".expect.json", ".jsonl"))
        cases.append((log, json.loads(expect.read_text())))
    return cases


CASES = _cases()


def test_corpus_is_big_enough():
    """The corpus has at least 15 loops and 15 honest sessions, covering every detector."""
    loops = [spec for _, spec in CASES if spec["kind"] == "loop"]
    honest = [spec for _, spec in CASES if spec["kind"] == "honest"]
    assert len(loops) >= 15 and len(honest) >= 15


@pytest.mark.parametrize("log,spec", CASES, ids=[p.stem for p, _ in CASES])
def test_scenario(log: Path, spec: dict):
    report = scan([str(log)])
    assert report.problem_count == 0, [str(p) for p in report.problems]
    warned = [d for d in report.detections if d.level >= Level.WARN]
    if spec["kind"] == "honest":
        assert not warned, [f"{d.detector} line {d.line}: {d.message}" for d in warned]
    else:
        hits = [d for d in warned if d.detector == spec["detector"] and d.line <= spec["by_line"]]
        assert hits, f"expected {spec['detector']} at warn by line {spec['by_line']}; got " + repr(
            [(d.detector, d.line, d.level.label) for d in report.detections]
        )
