"""Running the cyclic garbage collector rarely while a scan or a live hub runs.

Neither makes reference cycles worth collecting (events, detector state and
store rows go by reference counting), so at CPython's default threshold (700)
the collector only costs time; see benchmarks/README.md for what it cost.
Holders may overlap (a scan inside a running hub, two hubs): the first
threshold is the largest any holder asks for, and it is put back as it was
when the last one lets go, unless someone else changed it meanwhile.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_holds: list[int] = []
_before: tuple[int, ...] | None = None
_applied: int | None = None  # the first threshold set by the last _apply


def _apply() -> None:
    global _applied
    assert _before is not None
    _applied = max(_before[0], *_holds)
    gc.set_threshold(_applied, *_before[1:])


def hold(threshold: int) -> None:
    """Raise the collector's first threshold to at least ``threshold`` until :func:`release`."""
    global _before
    if not _holds:
        _before = gc.get_threshold()
    _holds.append(threshold)
    _apply()


def release(threshold: int) -> None:
    """Undo one :func:`hold` of ``threshold``."""
    global _before, _applied
    _holds.remove(threshold)
    if _before is None:
        return
    if gc.get_threshold()[0] != _applied:  # changed by someone else: theirs stands
        if not _holds:
            _before = _applied = None
        return
    if _holds:
        _apply()
        return
    gc.set_threshold(*_before)
    _before = _applied = None


@contextmanager
def rare_collections(threshold: int) -> Iterator[None]:
    """:func:`hold` ``threshold`` for the length of the ``with`` block."""
    hold(threshold)
    try:
        yield
    finally:
        release(threshold)
