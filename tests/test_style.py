"""Style is checked by the suite: `ruff check` and `ruff format --check` over the whole tree.

The contributors' pre-commit hooks (.pre-commit-config.yaml) run the same ruff."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
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


def test_pre_commit_runs_the_pinned_ruff_and_the_venv_mypy():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pinned = next(spec.split("==")[1] for spec in extra if spec.startswith("ruff=="))
    rev = re.search(r"ruff-pre-commit\n\s+rev: v(\S+)", config)
    assert rev and rev.group(1) == pinned, f"set the ruff-pre-commit rev to v{pinned}"
    assert "entry: .venv/bin/mypy" in config


def test_pre_commit_refuses_a_commit_subject_of_72_characters():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    hook = re.search(r"id: commit-subject\n(?:\s+\w+: .*\n)*?\s+entry: '(.+)'", config)
    assert hook, "the commit-subject hook is in .pre-commit-config.yaml"
    assert "commit-msg" in config.split("repos:")[0], "pre-commit install installs the commit-msg hook"
    # pygrep --multiline: one search over the file, MULTILINE | DOTALL, on bytes
    too_long = re.compile(hook.group(1).encode(), re.MULTILINE | re.DOTALL)
    assert too_long.search(b"x" * 72 + b"\n\nbody\n")
    assert not too_long.search(b"x" * 71 + b"\n\n" + b"a body line may be long " * 10 + b"\n")
