"""Helpers shared by the benchmarks: tables, argument parsing, per-detector timing."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python benchmarks/x.py` from a checkout
    sys.path.insert(0, str(ROOT))


def parser(description: str, events: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--events", type=int, default=events, help=f"events to run (default {events:,})")
    p.add_argument("--seed", type=int, default=1, help="seed of the synthetic trace")
    return p


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with a title, right-aligned numbers."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    rule = "-" * len(line(cells[0]))
    out = [title, rule, line(cells[0]), rule] + [line(r) for r in cells[1:]] + [rule]
    return "\n".join(out)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        return f"{value:,.2f}" if value >= 1 else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class DetectorTimer:
    """Wraps every registered detector's ``observe`` (a turn detector's
    ``judge``, which the engine calls instead) to record time per call.

    Install it before creating the engine: sessions keep bound methods.

    The wrapper costs time of its own on every call: the clock read inside the
    timed span is charged to the detector, the rest (the extra call, the
    bookkeeping) to no one.  :meth:`overhead` estimates that rest, so that a
    profile does not count it as the engine's."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.worst: dict[str, float] = {}

    def clear(self) -> None:
        """Forget what was recorded so far (e.g. a warm-up)."""
        for table in (self.total, self.worst):
            for name in table:
                table[name] = 0.0
        for name in self.calls:
            self.calls[name] = 0

    @contextmanager
    def installed(self) -> Iterator[DetectorTimer]:
        from monitor.detect import REGISTRY
        from monitor.detect.base import TurnDetector

        originals = {}
        for name, cls in REGISTRY.items():
            method = "judge" if issubclass(cls, TurnDetector) else "observe"
            originals[cls] = (method, cls.__dict__.get(method))
            setattr(cls, method, self._wrap(name, getattr(cls, method)))
        try:
            yield self
        finally:
            for cls, (method, original) in originals.items():
                if original is None:
                    delattr(cls, method)
                else:
                    setattr(cls, method, original)

    def overhead(self, samples: int = 200_000) -> float:
        """Seconds the wrappers added outside their timed spans over the calls
        recorded: the calls times what a wrapped call of a method that does
        nothing costs beyond the plain call and beyond its own timed span
        (measured here, the best of five rounds)."""

        class Idle:
            def observe(self, event: object, view: object) -> None:
                return None

        probe = DetectorTimer()
        timed = probe._wrap("idle", Idle.observe)
        idle, plain = Idle(), Idle.observe
        best = float("inf")
        for _ in range(5):
            probe.clear()
            started = time.perf_counter()
            for _ in range(samples):
                timed(idle, None, None)
            wrapped = time.perf_counter() - started
            started = time.perf_counter()
            for _ in range(samples):
                plain(idle, None, None)
            bare = time.perf_counter() - started
            best = min(best, (wrapped - bare - probe.total["idle"]) / samples)
        return max(0.0, best) * sum(self.calls.values())

    def _wrap(self, name: str, observe):
        clock = time.perf_counter
        total, calls, worst = self.total, self.calls, self.worst
        total[name] = 0.0
        calls[name] = 0
        worst[name] = 0.0

        def timed(detector, event, view):
            started = clock()
            try:
                return observe(detector, event, view)
            finally:
                spent = clock() - started
                total[name] += spent
                calls[name] += 1
                if spent > worst[name]:
                    worst[name] = spent

        return timed
