"""Real runs as the test of every detector (issues 13 and 30), scored by ``loopwatch eval``.

Every label file under ``tests/`` (``tests/real/labels.toml``; the corpus's
``tests/corpus/labels.toml`` when it is added) is scored by
:func:`monitor.evaluate.evaluate`, what ``loopwatch eval`` runs, under the
default preset, the runs shared among every usable core.  Beside each label
file, ``expected.toml`` records what is right today (written by ``loopwatch
eval LABELS --split SPLIT --write-expected expected.toml``): the stuck
episodes caught at ``warn`` and the honest runs that stay below it, for the
splits it names.  A change that loses one of them fails here: a regression
fails CI.  Improvements are recorded by rewriting the file.

The splits held are the development part of a corpus (detector work looks at
it only, the validation part is scored when a change is complete, never tuned
on).  ``tests/real`` holds both of its parts: its 53 runs were tuned on
before the split existed (all three of its stuck runs fall in validation),
and all 53 are right today, as the checks before ``eval`` asserted.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.evaluate import Score, evaluate
from monitor.events import Level
from monitor.labels import LabelFile, load_labels
from monitor.scan_jobs import usable_cores

HERE = Path(__file__).resolve().parent
LABEL_FILES = sorted(HERE.rglob("labels.toml"))


def _id(path: Path) -> str:
    return str(path.parent.relative_to(HERE))


@cache
def _expected(labels: Path) -> dict:
    expected = labels.parent / "expected.toml"
    assert expected.is_file(), (
        f"{expected} is missing: write it with "
        f"`loopwatch eval {labels.relative_to(HERE.parent)} --split dev --write-expected {expected.name}`"
    )
    return tomllib.loads(expected.read_text(encoding="utf-8"))


@cache
def _scored(labels: Path) -> tuple[LabelFile, Score]:
    label_file = load_labels(labels)
    splits = _expected(labels)["splits"]
    split = "all" if set(splits) == {"dev", "validation"} else splits[0]
    return label_file, evaluate(label_file, Config(), split, jobs=usable_cores())


@pytest.mark.parametrize("labels", LABEL_FILES, ids=_id)
def test_every_labelled_run_has_provenance_and_a_reading(labels: Path):
    """Each source says where its runs came from and under what licence; each
    run names its source and says what the reader saw."""
    label_file = load_labels(labels)
    assert len(label_file.runs) >= 40, len(label_file.runs)
    for source in label_file.sources.values():
        assert source.repository and source.licence and source.path, source
    for run in label_file.runs:
        assert run.source, run.path
        assert run.note or run.label == "unlabelled", run.path  # each label says what its reader saw


@pytest.mark.parametrize("labels", LABEL_FILES, ids=_id)
def test_what_is_right_today_stays_right(labels: Path):
    """Every episode caught at warn today is still caught inside its range, and
    every honest run quiet today still stays below warn (``expected.toml``)."""
    label_file, result = _scored(labels)
    expected = _expected(labels)
    paths = {run.path for run in label_file.runs}
    stale = [item for item in expected["caught"] if item.rpartition("@")[0] not in paths]
    stale += [path for path in expected["quiet"] if path not in paths]
    assert not stale, f"expected.toml names runs that are not labelled: {stale}"
    unreadable = {run.path for run, _ in result.unreadable}
    assert unreadable <= set(expected.get("unreadable", ())), ("runs no longer readable", unreadable)
    caught = {f"{run.path}@{first}-{last}" for run, (first, last), _ in result.caught[Level.WARN]}
    quiet = {run.path for run in result.quiet[Level.WARN]}
    lost = [str(finding.to_dict()) for finding in result.findings if finding.level == Level.WARN]
    assert set(expected["caught"]) <= caught, ("episodes no longer caught", lost)
    assert set(expected["quiet"]) <= quiet, ("honest runs now warned", lost)


def test_the_real_runs_are_all_right_today():
    """tests/real: all 7 stuck episodes caught, none of the 45 honest runs warned."""
    labels = HERE / "real" / "labels.toml"
    expected = _expected(labels)
    assert len(expected["caught"]) == 7 and len(expected["quiet"]) == 45
    total = _scored(labels)[1].total(Level.WARN)
    assert (total.episodes, total.caught, total.honest, total.false_alarms) == (7, 7, 45, 0)
