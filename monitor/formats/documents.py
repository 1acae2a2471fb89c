"""Whole-document formats (offline trajectories) for ``scan``.

Filled in by the trajectory adapters; until one claims a file, line formats apply.
"""

from __future__ import annotations

from pathlib import Path

from monitor.events import Event
from monitor.formats.base import Problem


def claims(path: Path) -> bool:
    """True when ``path`` is a whole-document trajectory this module reads."""
    return False


def name_of(path: Path) -> str:
    return "unknown"


def load(path: Path) -> tuple[list[Event], list[Problem]]:
    raise ValueError(f"{path}: not a trajectory document")
