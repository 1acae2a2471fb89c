"""Style is checked by the suite: `ruff check` and `ruff format --check` over the whole tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> str:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    assert found, "ruff is a test dependency: pip install -e '.[test]'"
    return found


def test_ruff_lint_is_clean():
    done = subprocess.run([_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_applied():
    done = subprocess.run(
        [_ruff(), "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, "run `ruff format .`:\n" + done.stdout + done.stderr
