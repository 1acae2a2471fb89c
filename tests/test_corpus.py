"""The corpus of real runs (tests/corpus): every file labelled once, every file intact, no secrets.

The runs are public files kept byte-identical to their sources; some of those sources held credentials
(tests/corpus/README.md, "Left out").  A key pattern in any run fails here, so none is committed again.
"""

from __future__ import annotations

import gzip
import re
import tomllib
from pathlib import Path

import pytest

from monitor.labels import load_labels

CORPUS = Path(__file__).resolve().parent / "corpus"
LABELS = tomllib.loads((CORPUS / "labels.toml").read_text(encoding="utf-8"))
RUNS = [run for run in LABELS["run"] if not run.get("tuned")]
#: Shapes of live credentials (API keys and tokens of the common providers).
SECRET = re.compile(
    rb"AIza[0-9A-Za-z_-]{35}|sk-ant-api[0-9A-Za-z_-]{20,}|sk-proj-[A-Za-z0-9_-]{20,}|sk-or-v1-[a-f0-9]{20,}"
    rb"|ghp_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abp]-[A-Za-z0-9-]{20,}|glpat-[A-Za-z0-9_-]{20}"
    rb"|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9]{40,}|nvapi-[A-Za-z0-9_-]{20,}|gsk_[A-Za-z0-9]{40,}"
    rb"|\d{8,10}:AA[A-Za-z0-9_-]{33}"  # a Telegram bot token (round 28)
)


def test_every_file_is_labelled_once_and_every_label_has_its_file():
    listed = [run["path"] for run in RUNS]
    files = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.gz"))
    assert len(listed) == len(set(listed))
    assert sorted(listed) == files


def test_the_label_file_loads_with_every_split_from_its_path():
    """``loopwatch eval`` refuses a run whose split is not ``split_for`` of the path as written
    here (round 24 was first drawn with splits hashed from ``tests/corpus/…`` paths)."""
    assert len(load_labels(CORPUS / "labels.toml").runs) == len(LABELS["run"])


@pytest.mark.parametrize("path", sorted(run["path"] for run in RUNS))
def test_a_run_is_intact_and_holds_no_secret(path: str):
    data = gzip.decompress((CORPUS / path).read_bytes())  # a damaged gzip stream raises here
    found = SECRET.search(data)
    assert found is None, f"{path} holds what looks like a credential at byte {found.start()}"
