"""``scan``, ``watch`` and ``eval`` agree on every reader added for issue 34's document and JSONL formats.

Each real file is scanned, watched by a real FileSource into a hub and SQLite store, and scored as
``loopwatch eval`` scores a run: the same events per session, the same detections, the same hits.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.watchkit import evaluated, scanned, scanned_all, warned, watched

TESTS = Path(__file__).parent
REAL = [
    "corpus/trae-agent-task2money/trajectory_20260118_211615.json.gz",
    "corpus/gemini-cli-history/gemini-cli-2026-04-06-history.json.gz",
    "corpus/live-swe-agent-gpt5mini/psf__requests-1142.traj.json.gz",
    "corpus/openhands-resolver/resolver-output-line2.jsonl.gz",
    "corpus/gemini-cli-metaphi/figma-eval-49bdd49a-5831-4dca-ad1b-a66b7b9901fa.jsonl.gz",
    "fixtures/copilot-cli/session-state/049410b4-c1df-44ee-87a5-caa1c349091e/events.jsonl",
]


@pytest.mark.parametrize("name", REAL, ids=[Path(n).parent.name for n in REAL])
def test_scan_watch_and_eval_agree(tmp_path: Path, name: str):
    source = TESTS / name
    path = tmp_path / source.parent.name / source.name
    path.parent.mkdir()
    shutil.copy(source, path)
    seen, scanned_ = watched(path, tmp_path), scanned(path)
    assert seen == scanned_
    assert sum(seen[1].values()) > 5  # events were stored
    assert evaluated(path) == warned(scanned_all(path))
