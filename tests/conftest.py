"""Shared fixtures: paths to the real transcripts (``tests/fixtures``, copied
with their provenance in its README) and the scenario corpus; the Hypothesis
profile for CI."""

from __future__ import annotations

import os
import time
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


@pytest.fixture
def utc(monkeypatch):
    """Local time is UTC for the test: the UI shows local times, snapshots must not depend on the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True, scope="session")
def _hook_state_dir(tmp_path_factory: pytest.TempPathFactory):
    """Hook calls (in-process and subprocesses) leave their traces in a temporary
    directory, never in the user's ~/.local/state."""
    previous = os.environ.get("LOOPWATCH_STATE_DIR")
    os.environ["LOOPWATCH_STATE_DIR"] = str(tmp_path_factory.mktemp("hook-state"))
    yield
    if previous is None:
        os.environ.pop("LOOPWATCH_STATE_DIR", None)
    else:
        os.environ["LOOPWATCH_STATE_DIR"] = previous


def pytest_collection_finish(session: pytest.Session) -> None:
    """mypy (tests/test_types.py) starts as soon as it is known to be run: it runs beside the tests
    (in one process; under pytest-xdist each worker collects every test, so there the test starts it)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if any(item.nodeid.endswith("test_types.py::test_mypy_is_clean") for item in session.items):
        from tests.test_types import start_mypy

        start_mypy()


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests.test_types import stop_mypy

    stop_mypy()
