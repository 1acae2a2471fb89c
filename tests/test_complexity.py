"""radon finds no block of cyclomatic complexity 21 or more in ``monitor/detect/``.

Issue 29 made detect/ plain; this keeps it so.  A block at 21+ is radon's
grade D or worse: a function a newcomer cannot change safely.  Split it.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 21


def _too_complex() -> list[str]:
    """``path:line name (complexity)`` of every block in detect/ at LIMIT or over."""
    found = []
    for path in sorted((ROOT / "monitor" / "detect").rglob("*.py")):
        # cc_visit lists functions, classes and (again, flattened) methods.
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity >= LIMIT:
                where = path.relative_to(ROOT)
                found.append(f"{where}:{block.lineno} {block.name} ({block.complexity})")
    return found


def test_no_block_in_detect_reaches_complexity_21() -> None:
    assert _too_complex() == []
