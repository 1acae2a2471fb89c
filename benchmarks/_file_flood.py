"""A log growing by millions of lines, for bench_overload's ``file-flood`` scenario.

    python benchmarks/_file_flood.py --path LOG --lines 3000000

Appends ``--lines`` native-format messages (a person and the agent taking
turns, no two alike: honest work at flood rate, so what is stored is the
events, not a detection per line) to ``--path`` as fast as it can, 5,000 at a
time, prints the count written, then waits to be killed (the monitor keeps
reading the backlog meanwhile).
"""

from __future__ import annotations

import argparse
import json
import time


def lines(start: int, count: int, session: str) -> str:
    return "".join(
        json.dumps(
            {
                "type": "message",
                "session": session,
                "role": "user" if n % 2 else "assistant",
                "content": f"step {n}: {'why' if n % 2 else 'because'} {n * 7919 % 10007}",
            }
        )
        + "\n"
        for n in range(start, start + count)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", required=True)
    parser.add_argument("--lines", type=int, default=3_000_000)
    parser.add_argument("--session", default="flood")
    args = parser.parse_args()
    started = time.monotonic()
    with open(args.path, "a") as out:
        for start in range(0, args.lines, 5000):
            out.write(lines(start, min(5000, args.lines - start), args.session))
            out.flush()
    print(json.dumps({"lines": args.lines, "seconds": round(time.monotonic() - started, 2)}), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
