"""Append-to-detection latency for tailed log files (target: p99 <= 150 ms).

A writer *process* appends looping tool calls to ``--files`` native logs at
random (Poisson) moments; each call record carries ``ts`` = the wall-clock time
just before its ``write()``.  The monitor (this process: FileSource → Hub →
Engine → SQLite store) timestamps every ``exact_repeat`` detection as it is
published; latency = publish time − the call's ``ts``.

    .venv/bin/python benchmarks/bench_latency_files.py [--seconds 20] [--files 20] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def writer(directory: str, files: int, rate: float, seconds: float) -> None:
    """Append identical calls (each a detection once the loop is established) at ``rate`` calls/s."""
    handles = [open(os.path.join(directory, f"agent-{i:03}.jsonl"), "a", buffering=1) for i in range(files)]
    counters = [0] * files
    end = time.time() + seconds
    rng = random.Random(7)
    while time.time() < end:
        time.sleep(rng.expovariate(rate))
        i = rng.randrange(files)
        n = counters[i]
        counters[i] += 1
        f = handles[i]
        call = {
            "type": "tool_call",
            "session": f"lat-{i}",
            "id": f"c{n}",
            "name": "bash",
            "args": {"cmd": "cat missing.txt"},
            "ts": time.time(),
        }
        f.write(json.dumps(call) + "\n")
        result = {
            "type": "tool_result",
            "session": f"lat-{i}",
            "id": f"c{n}",
            "content": "cat: missing.txt: No such file",
            "is_error": True,
            "ts": time.time(),
        }
        f.write(json.dumps(result) + "\n")
    for f in handles:
        f.close()


async def monitor(args: argparse.Namespace) -> dict:
    from monitor.config import build_config
    from monitor.hub import Hub
    from monitor.sources.files import FileSource, StartPolicy
    from monitor.store import Store
    from monitor.updates import DetectionRaised

    tmp = Path(tempfile.mkdtemp(prefix="lw-bench-lat-"))
    logs = tmp / "logs"
    logs.mkdir()
    store = None if args.no_db else Store(tmp / "bench.db")
    if store is not None:
        store.start()
    hub = Hub(build_config({}), store)
    latencies: list[float] = []
    warmup_until = time.time() + args.warmup

    def on_update(update: object) -> None:
        if isinstance(update, DetectionRaised) and update.detection.detector == "exact_repeat":
            now = time.time()
            if update.detection.ts >= warmup_until:
                latencies.append(now - update.detection.ts)

    hub.subscribe(on_update)
    await hub.start()
    source = FileSource([str(logs)], hub, start=StartPolicy("start"))
    await source.start()
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--writer",
            str(logs),
            str(args.files),
            str(args.rate),
            str(args.seconds + args.warmup),
        ]
    )
    while proc.poll() is None:
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # let the last appends arrive (the writer has exited)
    await source.stop()
    await hub.stop()
    if store is not None:
        store.close()
    latencies.sort()
    if not latencies:
        raise SystemExit("no detections measured")

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000

    return {
        "detections": len(latencies),
        "files": args.files,
        "calls_per_sec": args.rate,
        "store": not args.no_db,
        "p50_ms": round(pct(50), 1),
        "p90_ms": round(pct(90), 1),
        "p99_ms": round(pct(99), 1),
        "max_ms": round(latencies[-1] * 1000, 1),
        "mean_ms": round(statistics.mean(latencies) * 1000, 1),
        "loadavg": os.getloadavg(),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rate", type=float, default=100.0, help="tool calls per second, all files together")
    parser.add_argument("--no-db", action="store_true", help="no SQLite store in the pipeline")
    args = parser.parse_args()
    result = asyncio.run(monitor(args))
    print(json.dumps(result))
    verdict = "PASS" if result["p99_ms"] <= 150 else "FAIL"
    print(
        f"file append-to-detection latency: p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms "
        f"over {result['detections']} detections -> {verdict} (target p99 <= 150 ms)"
    )


if __name__ == "__main__":
    main()
