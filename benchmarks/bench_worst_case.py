"""Worst case: 1 MB tool results, arguments and messages must not make detection slow (issue 2).

Feeds one session (plus a second one for the swarm detector) events whose
content is 1 MB each — results that repeat exactly, nearly, or not at all;
errors; test reports; assistant messages that repeat, chant, or differ; huge
arguments — straight into the engine (no parsing: detection cost only) and
reports the cost of each event, by kind of event and by detector.

Target: no single event costs more than 2 ms of detection.  Both CPU time of
this thread (what detection itself costs) and wall time (which includes the
machine's other load) are shown; the verdict uses CPU time.  The garbage
collector is paused while timing, as its pauses are not detection work.

    python benchmarks/bench_worst_case.py [--events N]
"""

from __future__ import annotations

import gc
import random
import statistics
import time

from common import DetectorTimer, parser, table

MB = 1024 * 1024
TARGET_MS = 2.0


def _text(rng: random.Random, size: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz     \n") -> str:
    block = "".join(rng.choice(alphabet) for _ in range(4096))
    return (block * (size // len(block) + 1))[:size]


def cases(rng: random.Random):
    """(label, factory) pairs; each factory returns the events of one round."""
    from monitor.events import Event, Kind

    unique = [_text(random.Random(i), MB) for i in range(4)]
    same = _text(rng, MB)
    near = [same[: MB // 2] + str(i) + same[MB // 2 + 1 :] for i in range(4)]
    failing = (
        "FAILED tests/test_big.py::test_case - AssertionError: assert 1 == 2\n" * (MB // 70)
        + "=== 15000 failed, 3 passed in 12.3s ==="
    )
    many_failures = (
        "".join(
            f"FAILED tests/test_big.py::test_case_{i} - AssertionError: assert {i} == {i + 1} "
            f"at 0x{i:08x} in {i / 7:.2f}s\n"
            for i in range(MB // 100)
        )
        + "=== 10485 failed, 3 passed in 12.3s ==="
    )
    chant = "I will now fix the import so the importer works again. " * (MB // 56)
    fenced = "```\n" + _text(rng, MB - 8) + "\n```"
    seq = [0]

    def pair(session: str, tool: str, args: dict, content: str, error: bool = False):
        seq[0] += 1
        cid = f"c{seq[0]}"
        return [
            Event(
                Kind.TOOL_CALL,
                session,
                float(seq[0]),
                source="bench",
                line=seq[0],
                tool=tool,
                args=args,
                call_id=cid,
            ),
            Event(
                Kind.TOOL_RESULT,
                session,
                float(seq[0]) + 0.5,
                source="bench",
                line=seq[0],
                content=content,
                call_id=cid,
                is_error=error,
            ),
        ]

    def message(session: str, text: str, role: str = "assistant"):
        seq[0] += 1
        return [
            Event(Kind.MESSAGE, session, float(seq[0]), source="bench", line=seq[0], role=role, content=text)
        ]

    return [
        ("result 1 MB, identical", lambda: pair("s1", "bash", {"command": "cat big.log"}, same)),
        (
            "result 1 MB, nearly identical",
            lambda: pair("s1", "bash", {"command": "cat big.log"}, rng.choice(near)),
        ),
        (
            "result 1 MB, all different",
            lambda: pair("s1", "read_file", {"path": f"f{rng.randrange(99)}"}, rng.choice(unique)),
        ),
        ("error 1 MB", lambda: pair("s1", "bash", {"command": "make"}, "Exit code 2\n" + same, True)),
        (
            "test report 1 MB, one failure",
            lambda: pair("s1", "bash", {"command": "pytest -q"}, "Exit code 1\n" + failing, True),
        ),
        (
            "test report 1 MB, 10k failures",
            lambda: pair("s1", "bash", {"command": "pytest -q"}, "Exit code 1\n" + many_failures, True),
        ),
        (
            "args 1 MB (write_file)",
            lambda: pair("s1", "write_file", {"path": "big.txt", "content": same}, "ok"),
        ),
        ("command 1 MB", lambda: pair("s1", "bash", {"command": "echo " + rng.choice(near)}, "ok")),
        (
            "swarm: same 1 MB error, 2 sessions",
            lambda: pair(rng.choice(("s1", "s2")), "fetch", {"url": "https://x"}, same, True),
        ),
        ("message 1 MB, identical", lambda: message("s1", same)),
        ("message 1 MB, nearly identical", lambda: message("s1", rng.choice(near))),
        ("message 1 MB, all different", lambda: message("s1", rng.choice(unique))),
        ("message 1 MB, chanting", lambda: message("s1", chant)),
        ("message 1 MB, fenced code", lambda: message("s1", fenced)),
        ("user message 1 MB", lambda: message("s1", rng.choice(unique), role="user")),
    ]


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], 280)
    args = p.parse_args(argv)

    from monitor.detect.engine import Engine
    from monitor.events import Event, Kind

    rng = random.Random(args.seed)
    print("building 1 MB inputs…")
    kinds = cases(rng)
    timer = DetectorTimer()
    costs: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in kinds}
    rounds = max(1, args.events // (len(kinds) * 2))
    # The timer goes in before the engine exists: sessions keep bound methods.
    with timer.installed():
        engine = Engine()
        # Warm up: compile regexes, create sessions, fill windows with small events.
        for n in range(50):
            for session in ("s1", "s2"):
                engine.process(
                    Event(
                        Kind.TOOL_CALL,
                        session,
                        float(n),
                        tool="bash",
                        args={"command": f"ls {n}"},
                        call_id=f"w{n}",
                    )
                )
                engine.process(
                    Event(Kind.TOOL_RESULT, session, float(n), content=f"out {n}", call_id=f"w{n}")
                )
        timer.clear()
        gc.collect()
        gc.disable()
        try:
            for _ in range(rounds):
                for label, make in kinds:
                    for event in make():
                        cpu, wall = time.thread_time(), time.perf_counter()
                        engine.process(event)
                        costs[label].append(
                            ((time.thread_time() - cpu) * 1e3, (time.perf_counter() - wall) * 1e3)
                        )
        finally:
            gc.enable()

    rows = []
    worst_cpu = 0.0
    for label, values in costs.items():
        cpu = [c for c, _ in values]
        wall = [w for _, w in values]
        worst_cpu = max(worst_cpu, max(cpu))
        rows.append((label, len(values), statistics.mean(cpu), max(cpu), statistics.mean(wall), max(wall)))
    total = sum(len(v) for v in costs.values())
    print()
    print(
        table(
            f"detection cost per event, 1 MB inputs ({total:,} events)",
            ("input", "events", "mean cpu ms", "max cpu ms", "mean wall ms", "max wall ms"),
            rows,
        )
    )
    rows = [
        (
            name,
            timer.calls[name],
            timer.total[name] / max(1, timer.calls[name]) * 1e3,
            timer.worst[name] * 1e3,
        )
        for name in sorted(timer.total, key=lambda n: -timer.worst[n])
    ]
    print()
    print(
        table("per detector (wall, with timing overhead)", ("detector", "calls", "mean ms", "worst ms"), rows)
    )
    verdict = "OK" if worst_cpu < TARGET_MS else "ABOVE TARGET"
    print(f"target: every event < {TARGET_MS} ms of detection: worst {worst_cpu:.3f} ms cpu  [{verdict}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
