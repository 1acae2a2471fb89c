"""Synthetic mixed traces: many sessions of plausible agent work, fast to generate.

:func:`records` yields native-format records (dicts) for ``sessions`` agents
working in parallel, interleaved at random: reading files, editing, running
tests that fail and then pass, polling a job whose output moves, talking,
reporting usage, now and then compacting — and, at ``loop_rate``, falling
into short loops (the same call again, an A-B cycle, a failing command
retried).  Deterministic for a given ``seed``.  Used by the benchmarks
(``benchmarks/bench_*.py``) and the engine's property tests.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import orjson

_WORDS = (
    "the a of to and in is that for it with as on be this are by from at or an not which "
    "file test function module error value result config parser handler request response "
    "cache session token build install import return class method update check fix add "
    "remove change run debug log output input data list item index count path line user "
    "server client query field schema type string number object array null true false"
).split()
_TOOLS_READ = ("read_file", "Read", "view")
_DIRS = ("src", "lib", "app", "tests", "docs", "pkg", "internal", "web")


class _Agent:
    """One synthetic session: a little state machine emitting records."""

    def __init__(self, sid: str, rng: random.Random, ts: float, loop_rate: float, result_chars: int):
        self.sid = sid
        self.rng = rng
        self.ts = ts
        self.loop_rate = loop_rate
        self.result_chars = result_chars
        self.n = 0
        self.job = 0
        self.progress = 0
        self.failing = 0
        self.loop: list[tuple[str, dict[str, Any], str, bool]] = []
        self.started = False

    def _text(self, words: int) -> str:
        rng = self.rng
        return " ".join(rng.choice(_WORDS) for _ in range(words))

    def _blob(self) -> str:
        """A tool output of varying size, made of repeated random lines (cheap to build)."""
        rng = self.rng
        size = int(rng.expovariate(1.0 / self.result_chars)) + 20
        line = f"{self._text(8)} {rng.randrange(10**6)}\n"
        return (line * (size // len(line) + 1))[:size]

    def _rec(self, **fields: Any) -> dict[str, Any]:
        self.ts += self.rng.uniform(0.2, 4.0)
        fields["session"] = self.sid
        fields["ts"] = round(self.ts, 3)
        return fields

    def _call(self, name: str, args: dict[str, Any], content: str, error: bool = False) -> list[dict]:
        self.n += 1
        cid = f"{self.sid}-{self.n}"
        return [
            self._rec(type="tool_call", id=cid, name=name, args=args),
            self._rec(type="tool_result", id=cid, content=content, is_error=error),
        ]

    def step(self) -> list[dict[str, Any]]:
        rng = self.rng
        if not self.started:
            self.started = True
            return [
                self._rec(
                    type="session_start",
                    agent=rng.choice(("claude", "codex", "demo")),
                    pid=rng.randrange(1000, 60000),
                ),
                self._rec(type="message", role="user", content=self._text(20)),
            ]
        if self.loop:
            name, args, content, error = self.loop.pop()
            return self._call(name, args, content, error)
        roll = rng.random()
        if roll < self.loop_rate:
            self.loop = self._loop_calls()
            return self.step()
        if roll < 0.40:
            path = f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}_{rng.randrange(500)}.py"
            return self._call(rng.choice(_TOOLS_READ), {"path": path}, self._blob())
        if roll < 0.55:
            path = f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}.py"
            return self._call(
                "edit_file",
                {"path": path, "old": self._text(4), "new": self._text(5)},
                f"The file {path} has been updated.",
            )
        if roll < 0.65:
            return self._test_run()
        if roll < 0.72:
            self.progress = (self.progress + rng.randrange(3, 15)) % 100
            return self._call("check_job", {"job": f"job-{self.job}"}, f"running: {self.progress}% done")
        if roll < 0.80:
            return self._call(
                "grep", {"pattern": rng.choice(_WORDS) + str(self.n), "path": rng.choice(_DIRS)}, self._blob()
            )
        if roll < 0.93:
            return [self._rec(type="message", role="assistant", content=self._text(rng.randrange(8, 80)))]
        if roll < 0.985:
            return [
                self._rec(
                    type="usage",
                    input_tokens=rng.randrange(500, 20000),
                    output_tokens=rng.randrange(50, 2000),
                    cost_usd=round(rng.uniform(0.001, 0.05), 4),
                )
            ]
        if roll < 0.99:
            return [self._rec(type="compaction")]
        self.job += 1
        return [self._rec(type="message", role="user", content=self._text(15))]

    def _loop_calls(self) -> list[tuple[str, dict[str, Any], str, bool]]:
        """The calls of a loop about to start: a repeat, an A-B cycle or a retried failure."""
        rng = self.rng
        kind = rng.randrange(3)
        if kind == 0:  # the same call again and again
            call = (
                "bash",
                {"command": f"ls {rng.choice(_DIRS)}/missing"},
                "ls: cannot access: No such file",
                True,
            )
            return [call] * rng.randrange(2, 5)
        elif kind == 1:  # A-B cycle
            a = ("read_file", {"path": f"{rng.choice(_DIRS)}/a.py"}, "def a(): pass", False)
            b = ("bash", {"command": "pytest -q"}, "1 failed, 3 passed in 0.2s", True)
            return [a, b] * rng.randrange(2, 4)
        else:  # a failing command retried in variations
            return [
                (
                    "bash",
                    {"command": f"python app.py --try {i}"},
                    "ModuleNotFoundError: No module named 'requests'",
                    True,
                )
                for i in range(rng.randrange(2, 5))
            ]

    def _test_run(self) -> list[dict[str, Any]]:
        """A test run: failing a few times in a row now and then, else passing."""
        rng = self.rng
        if self.failing <= 0 and rng.random() < 0.3:
            self.failing = rng.randrange(1, 5)
        if self.failing > 0:
            self.failing -= 1
            out = (
                f"FAILED tests/test_{rng.choice(_WORDS)}.py::test_{self.n} - assert {self.n} == 0\n"
                f"{self.failing + 1} failed, {20 + self.n % 7} passed in 0.{self.n % 9}s"
            )
            return self._call("bash", {"command": "pytest -q"}, f"Exit code 1\n{out}", True)
        return self._call("bash", {"command": "pytest -q"}, f"{30 + self.n % 50} passed in 1.2s")


def records(
    events: int,
    sessions: int = 100,
    *,
    seed: int = 0,
    loop_rate: float = 0.02,
    result_chars: int = 400,
    start: float = 1_750_000_000.0,
) -> Iterator[dict[str, Any]]:
    """``events`` native records from ``sessions`` interleaved synthetic agents."""
    rng = random.Random(seed)
    agents = [
        _Agent(f"agent-{i:03d}", random.Random(seed * 1_000_003 + i), start + i, loop_rate, result_chars)
        for i in range(sessions)
    ]
    emitted = 0
    while emitted < events:
        for record in agents[rng.randrange(sessions)].step():
            yield record
            emitted += 1
            if emitted >= events:
                return


def write_trace(path: str, events: int, sessions: int = 100, **kwargs: Any) -> int:
    """Write a synthetic trace as native JSONL; return its size in bytes."""
    size = 0
    with open(path, "wb") as out:
        batch: list[bytes] = []
        for record in records(events, sessions, **kwargs):
            batch.append(orjson.dumps(record))
            if len(batch) >= 10_000:
                chunk = b"\n".join(batch) + b"\n"
                out.write(chunk)
                size += len(chunk)
                batch.clear()
        if batch:
            chunk = b"\n".join(batch) + b"\n"
            out.write(chunk)
            size += len(chunk)
    return size
