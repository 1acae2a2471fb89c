"""``sources.reporting.submit_new``: a re-read file's problems reach the operator once, with bounded memory."""

from __future__ import annotations

from monitor.formats.base import Problem
from monitor.sources import reporting


class Collect:
    def __init__(self) -> None:
        self.calls: list[tuple[list, list, object]] = []

    async def submit(self, events, problems, position=None) -> None:
        self.calls.append((events, problems, position))


async def test_each_problem_once_and_the_memory_bounded(monkeypatch):
    sink, reported = Collect(), set()
    bad = [Problem("f.db", 3, "torn row"), Problem("f.db", 4, "torn row")]
    await reporting.submit_new(sink, reported, bad)
    await reporting.submit_new(sink, reported, bad)  # read again: nothing new, nothing submitted
    await reporting.submit_new(sink, reported, bad, where_read={"offset": 9})  # a position still goes
    assert [(len(p), pos) for _, p, pos in sink.calls] == [(2, None), (0, {"offset": 9})]
    monkeypatch.setattr(reporting, "REPORTED_MAX", 3)
    await reporting.submit_new(sink, reported, [Problem("f.db", n, "x") for n in range(10, 12)])
    assert reported == set()  # past the bound the memory starts again
