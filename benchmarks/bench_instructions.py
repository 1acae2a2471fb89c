"""Instructions per event of `loopwatch scan`, counted by valgrind (noise-free).

Wall-clock rates on a shared machine move by 20 % from run to run, which hides
any change smaller than that.  The number of machine instructions a scan
executes does not move: this benchmark runs the scan of the same synthetic
trace as ``bench_scan`` under ``valgrind --tool=callgrind`` and reports

* instructions per event for the raw parse (``orjson.loads`` per line), the
  engine floor (every detector disabled) and the full scan;
* with ``--per-detector``, what each detector adds: the full scan minus the
  scan with that one detector disabled (shared work, such as a call's key,
  is charged to none of them);
* with ``--without NAME,...``, the scan with those detectors disabled as well
  (``--without stale_outcome``: the scan of the detectors before issue 31);
* the instruction budget of the throughput target: at the machine's measured
  instructions per second, how many instructions one event may cost.

Each figure is (instructions of the run − instructions of the same run over
an empty file) / events, so start-up and imports are not counted; the hash
seed is fixed, so runs of the same code give (nearly) the same count.  Runs go
two at a time (the counts do not depend on it).  Needs ``valgrind``
(``apt-get install valgrind``); without it the benchmark says so and exits 0.

    python benchmarks/bench_instructions.py [--events 30000] [--per-detector] [--without NAMES]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from common import ROOT, parser, table

TARGET = 40_000  # events/s on one core, as in bench_scan (issue 19)

#: Run in the child: scan FILE with the detectors named in argv[2] disabled
#: ("*" disables all), or just parse it (argv[2] == "parse").
_CHILD = r"""
import sys
import orjson
path, off = sys.argv[1], sys.argv[2]
if off == "parse":
    with open(path, "rb") as handle:
        for line in handle:
            orjson.loads(line)
else:
    from monitor.config import build_config
    from monitor.detect import REGISTRY
    from monitor.scan import scan
    names = set(REGISTRY) if off == "*" else set(filter(None, off.split(",")))
    scan([path], build_config({"detectors": {n: {"enabled": False} for n in names}}))
"""


def instructions(path: str, off: str) -> int:
    """Instructions executed by one child run (callgrind's total)."""
    # Its profile goes to a scratch folder: only the total on stderr is read.
    with tempfile.TemporaryDirectory(prefix="loopwatch-callgrind-") as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/callgrind.out",
                sys.executable,
                "-c",
                _CHILD,
                path,
                off,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            # A fixed hash seed: str hashes decide dict and set layouts, and with
            # them a few percent of the count from run to run.
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"},
        )
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run failed ({off!r}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def instructions_per_second() -> float:
    """This machine's rate running the interpreter, to turn a rate target
    into an instruction budget: a short scan timed natively."""
    from monitor.demo.synthetic import write_trace
    from monitor.scan import scan

    with tempfile.TemporaryDirectory(prefix="loopwatch-rate-") as folder:
        path = os.path.join(folder, "trace.jsonl")
        write_trace(path, 20_000, 100, seed=7)
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            scan([path])
            best = min(best, time.process_time() - started)
        empty = os.path.join(folder, "empty.jsonl")
        open(empty, "wb").close()
        per_event = (instructions(path, "") - instructions(empty, "")) / 20_000
    return per_event / (best / 20_000)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], 30_000)
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--per-detector", action="store_true", help="also what each detector adds (slower)")
    p.add_argument("--without", default="", metavar="NAMES", help="also the scan without these detectors")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): no instruction counts.")
        return 0

    from monitor.demo.synthetic import write_trace
    from monitor.detect import REGISTRY

    folder = tempfile.mkdtemp(prefix="loopwatch-bench-")
    path = os.path.join(folder, "trace.jsonl")
    empty = os.path.join(folder, "empty.jsonl")
    open(empty, "wb").close()
    write_trace(path, args.events, args.sessions, seed=args.seed)
    runs = {
        "parse": (path, "parse"),
        "parse0": (empty, "parse"),
        "floor": (path, "*"),
        "scan": (path, ""),
        "scan0": (empty, ""),
    }
    without = ",".join(sorted(filter(None, args.without.split(","))))
    unknown = set(filter(None, without.split(","))) - set(REGISTRY)
    if unknown:
        p.error(f"no such detector: {', '.join(sorted(unknown))}")
    if without:
        runs["without"] = (path, without)
    if args.per_detector:
        runs.update({name: (path, name) for name in REGISTRY})
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = dict(zip(runs, pool.map(lambda run: instructions(*run), runs.values())))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    n = args.events

    def per_event(total: int, base: str) -> float:
        return (total - counts[base]) / n

    parse = per_event(counts["parse"], "parse0")
    floor = per_event(counts["floor"], "scan0")
    full = per_event(counts["scan"], "scan0")
    rows = [
        ("raw parse (lines + orjson.loads)", parse, 1.0),
        ("engine floor (scan, no detectors)", floor, floor / parse),
        ("scan (+ all detectors, policy)", full, full / parse),
    ]
    if without:
        cost = per_event(counts["without"], "scan0")
        rows.append((f"scan without {without}", cost, cost / parse))
    print(f"{n:,} events in {args.sessions} sessions, counted in {time.perf_counter() - started:.0f} s")
    print()
    print(table("instructions per event (callgrind)", ("stage", "instructions", "ratio to parse"), rows))
    if args.per_detector:
        added = sorted(
            ((name, full - per_event(counts[name], "scan0")) for name in REGISTRY), key=lambda row: -row[1]
        )
        shared = full - floor - sum(cost for _, cost in added)
        rows = [(name, cost, f"{cost / full:.1%}") for name, cost in added]
        rows.append(("shared by several (keys, refs, turns)", shared, f"{shared / full:.1%}"))
        print()
        print(
            table(
                "what each detector adds (full scan minus the scan without it)",
                ("detector", "instructions/event", "share"),
                rows,
            )
        )
    rate = instructions_per_second()
    budget = rate / TARGET
    print()
    print(
        f"this machine runs the scan at ~{rate / 1e9:.2f} G instructions/s: the target of "
        f"{TARGET:,} events/s allows ~{budget:,.0f} instructions per event; the scan uses "
        f"{full:,.0f} ({full / budget:.1f}x the budget), the engine floor alone {floor:,.0f} "
        f"({floor / budget:.0%} of it)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
