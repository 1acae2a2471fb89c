"""Shared fixtures: paths to the real transcripts (``tests/fixtures``, copied
with their provenance in its README) and the scenario corpus; the Hypothesis
profile for CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI must pass or fail on the code alone: there the property tests draw the
# same examples every run (a new random draw that finds an old bug would
# block an unrelated change).  Local runs keep drawing new examples, which is
# how bugs are found; add each one found as an explicit test.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"


@pytest.fixture
def real_fixtures() -> Path:
    """The folder of real agent transcripts kept in the repository."""
    return FIXTURES
