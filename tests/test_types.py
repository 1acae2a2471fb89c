"""Types are checked by the suite: `mypy` over monitor/ is clean.

The configuration is `[tool.mypy]` in pyproject.toml: default mode for all of
monitor/, the strict set of flags for monitor/formats/, monitor/detect/ and
monitor/events.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_is_clean():
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
