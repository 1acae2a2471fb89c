"""Types are checked by the suite: `mypy` over monitor/ is clean.

The configuration is `[tool.mypy]` in pyproject.toml: default mode for all of
monitor/, the strict set of flags for monitor/formats/, monitor/detect/ and
monitor/events.py.

mypy takes about 10 s of one core and the suite runs in one process on two:
when this test is collected, ``tests/conftest.py`` starts mypy at once
(:func:`start_mypy`) and it runs beside the other tests; the test reads what
it said.  Run alone, the test starts it itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_MYPY: list[subprocess.Popen[str]] = []


def start_mypy() -> subprocess.Popen[str]:
    """The one mypy run of this session (a fresh check, no cache), started on the first call."""
    if not _MYPY:
        _MYPY.append(
            subprocess.Popen(
                [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary"],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return _MYPY[0]


def stop_mypy() -> None:
    """End the run if the session ends before the test read it."""
    for proc in _MYPY:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_mypy_is_clean():
    proc = start_mypy()
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout + stderr
