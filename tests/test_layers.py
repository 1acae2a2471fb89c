"""The layers stay as drawn in ARCHITECTURE.md, and monitor/ holds no dead code.

Each import-linter contract in pyproject.toml is a test of its own, failing with
the contract's name and the offending import chain.  A contract that today's
code still breaks is marked ``xfail(strict=True)`` with the branch that fixes
it, so the merge that fixes it turns the mark into a failure to remove.
vulture runs over monitor/ with vulture_whitelist.py (what is used where it
cannot see).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = [
    c["name"]
    for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
]
#: Contracts today's code breaks -> the branch that fixes them.
BROKEN_UNTIL: dict[str, str] = {}


@pytest.fixture(scope="module")
def lint_report() -> str:
    code = "import sys\nfrom importlinter.cli import lint_imports\nsys.exit(lint_imports(no_cache=True))\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert "Contracts:" in result.stdout, result.stdout + result.stderr
    return result.stdout


def _broken_section(report: str, name: str) -> str:
    """The report's explanation for contract ``name`` (its import chains)."""
    part = report.split("Broken contracts", 1)[-1]
    match = re.search(rf"^{re.escape(name)}\n-+\n(.*?)(?=^\S.*\n-+\n|\Z)", part, re.S | re.M)
    return match.group(1).strip() if match else part


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name, marks=pytest.mark.xfail(strict=True, reason=f"fixed by the {BROKEN_UNTIL[name]} branch")
        )
        if name in BROKEN_UNTIL
        else name
        for name in CONTRACTS
    ],
)
def test_import_contract(lint_report: str, name: str):
    status = re.search(rf"^{re.escape(name)} (KEPT|BROKEN)", lint_report, re.M)
    assert status is not None, f"contract {name!r} not in the report:\n{lint_report}"
    assert status.group(1) == "KEPT", f"contract broken: {name}\n{_broken_section(lint_report, name)}"


def test_no_dead_code_in_monitor():
    """vulture over monitor/ (settings in pyproject.toml) finds nothing outside the whitelist."""
    result = subprocess.run(
        [sys.executable, "-m", "vulture"], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert result.returncode == 0, (
        "unused code (delete it, or add it to vulture_whitelist.py with the "
        f"reason):\n{result.stdout}{result.stderr}"
    )


def test_the_whitelist_names_only_what_exists():
    """Every name in vulture_whitelist.py is still in monitor/: a stale entry would hide new dead code."""
    import ast

    tree = ast.parse((ROOT / "vulture_whitelist.py").read_text(encoding="utf-8"))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names.discard("_")
    names.discard("object")
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "monitor").rglob("*.py"))
    stale = sorted(n for n in names if not re.search(rf"\b{re.escape(n)}\b", source))
    assert not stale, f"not in monitor/ any more, remove from vulture_whitelist.py: {stale}"
