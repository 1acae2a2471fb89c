"""Run every loopwatch benchmark and print their tables (``make bench``).

Each benchmark runs in its own process (so memory and warm caches do not leak
from one into the next).  ``--events N`` is passed on to the benchmarks that
take it, ``--quick`` to those that have a quick mode, to run smaller;
``--only NAME`` picks benchmarks by name (repeatable).  Benchmarks report
numbers; they are not pass/fail tests, but the exit status is 1 if one crashed.

    python benchmarks/run_all.py [--events N] [--quick] [--only scan] [--only memory]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmarks() -> list[Path]:
    """Every ``bench_*.py`` beside this file, in name order."""
    return sorted(HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, help="events per benchmark (default: each one's own)")
    parser.add_argument("--quick", action="store_true", help="quick mode where a benchmark has one")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only bench_NAME.py (repeatable)")
    args = parser.parse_args(argv)
    chosen = [p for p in benchmarks() if not args.only or p.stem.removeprefix("bench_") in args.only]
    if not chosen:
        print(f"no benchmark matches {args.only}", file=sys.stderr)
        return 2
    failed = []
    for path in chosen:
        command = [sys.executable, str(path)]
        source = path.read_text(encoding="utf-8")
        if args.events and '"--events"' in source:
            command += ["--events", str(args.events)]
        if args.quick and '"--quick"' in source:
            command.append("--quick")
        print(f"\n=== {path.stem} ({' '.join(command[1:])})", flush=True)
        started = time.perf_counter()
        result = subprocess.run(command)
        print(
            f"=== {path.stem}: {'ok' if result.returncode == 0 else 'FAILED'} "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        if result.returncode != 0:
            failed.append(path.stem)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
