"""Shared fixtures: paths to the real transcripts and scenario corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = ROOT.parent / "shared" / "fixtures"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"


@pytest.fixture
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures is not present")
    return SHARED_FIXTURES
