#!/usr/bin/env python3
"""Sustained ingest from 200 socket clients: events/s, monitor CPU and memory.

    python benchmarks/bench_ingest_sockets.py                 # max rate, then 5,000 ev/s paced
    python benchmarks/bench_ingest_sockets.py --rate 5000 --duration 30
    python benchmarks/bench_ingest_sockets.py --quick --json

The monitor (real Hub + SocketServer + SQLite Store) runs in its own process
(``_socket_monitor.py``); the clients run in ``--procs`` load-generator
processes (``_socket_load.py``).  The monitor's events/s come from its own
counters (events the engine has processed), its CPU and RSS from psutil.  The
first ``--warmup`` seconds are left out of the rates.  ``--rate 0`` sends as
fast as the monitor accepts (its back-pressure sets the pace): the maximum
sustained ingest rate.  Memory must stay flat while the load goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent


def start_monitor(workdir: Path, use_db: bool) -> tuple[subprocess.Popen, Path]:
    sock = workdir / "lw.sock"
    cmd = [sys.executable, str(HERE / "_socket_monitor.py"), "--socket", str(sock), "--every", "0.5"]
    if use_db:
        cmd += ["--db", str(workdir / "bench.db")]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "READY":
        proc.kill()
        raise SystemExit(f"monitor did not start: {line!r}")
    return proc, sock


def run_load(args: argparse.Namespace, rate: float, duration: float) -> dict:
    """One measured run: returns events/s, CPU, RSS and the load generators' totals."""
    with tempfile.TemporaryDirectory(prefix="lw-bench-") as tmp:
        monitor, sock = start_monitor(Path(tmp), not args.no_db)
        mon = psutil.Process(monitor.pid)
        samples: list[dict] = []

        def collect() -> None:  # the monitor's counters, with its CPU and RSS at the same moment
            for line in monitor.stdout:
                try:
                    counters = json.loads(line)
                except ValueError:
                    continue
                try:
                    cpu = mon.cpu_times()
                    counters["cpu"] = cpu.user + cpu.system
                    counters["rss"] = mon.memory_info().rss
                except psutil.Error:
                    break
                samples.append(counters)

        reader = threading.Thread(target=collect, daemon=True)
        reader.start()
        launched = time.monotonic()
        per_proc = [
            args.clients // args.procs + (1 if i < args.clients % args.procs else 0)
            for i in range(args.procs)
        ]
        loads = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "_socket_load.py"),
                    "--socket",
                    str(sock),
                    "--clients",
                    str(n),
                    "--rate",
                    str(rate * n / args.clients),
                    "--duration",
                    str(duration),
                    "--prefix",
                    f"p{i}",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i, n in enumerate(per_proc)
        ]
        totals = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in loads]
        # The clients stop producing at launch + duration; closing then waits
        # for the monitor to take what is still buffered (the backlog).
        end_of_load = launched + duration
        # The backlog still in socket buffers is the monitor's to finish:
        # wait until every connection is read to its end and processed.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and monitor.poll() is None:
            last = samples[-1] if samples else None
            if (
                last
                and last["t"] > end_of_load
                and last["connections"] == 0
                and last["queued_batches"] == 0
                and last["events"] == last["received"]
            ):
                break
            time.sleep(0.1)
        drained = time.monotonic()
        monitor.stdin.close()  # stop: the monitor flushes everything and exits
        monitor.wait(timeout=120)
        reader.join(timeout=5)

    during = [s for s in samples if launched + args.warmup <= s["t"] <= end_of_load]
    if len(during) < 2:
        raise SystemExit("too few samples from the monitor; run longer (--duration)")
    start, end = during[0], during[-1]
    elapsed = end["t"] - start["t"]
    cpu = end["cpu"] - start["cpu"]
    sent = sum(t["sent"] for t in totals)
    return {
        "clients": args.clients,
        "target_rate": rate or "max",
        "events_per_sec": round((end["events"] - start["events"]) / elapsed),
        "cpu_percent": round(100 * cpu / elapsed, 1),
        # On a shared machine the monitor may get less than a core: this is
        # what one core of its own would sustain.
        "events_per_cpu_second": round((end["events"] - start["events"]) / cpu) if cpu else None,
        "rss_mb_start": round(start["rss"] / 2**20, 1),
        "rss_mb_peak": round(max(s["rss"] for s in during) / 2**20, 1),
        "rss_mb_end": round(end["rss"] / 2**20, 1),
        "events_sent": sent,
        "events_processed": samples[-1]["events"],
        "lost": sent - samples[-1]["events"],
        "detections_pushed": sum(t["detections"] for t in totals),
        "error_replies": sum(t["errors"] for t in totals),
        "connections_peak": max(s["connections"] for s in samples),
        "load_average": round(os.getloadavg()[0], 2),
        "seconds": round(elapsed, 1),
        "backlog_seconds": round(drained - end_of_load, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes")
    parser.add_argument(
        "--rate",
        type=float,
        action="append",
        help="events/s in total (0 = as fast as accepted); repeatable (default: 0 and 5000)",
    )
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--no-db", action="store_true", help="run without the SQLite store")
    parser.add_argument("--quick", action="store_true", help="short runs (for smoke tests)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per run")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup = 10.0, 3.0
    rates = args.rate or [0.0, 5000.0]
    for rate in rates:
        result = run_load(args, rate, args.duration)
        if args.json:
            print(json.dumps(result), flush=True)
            continue
        target = "max" if not rate else f"{rate:,.0f} ev/s"
        print(
            f"socket ingest, {result['clients']} clients, target {target}, "
            f"{'no store' if args.no_db else 'SQLite store'}, {result['seconds']} s measured:"
        )
        print(
            f"  processed {result['events_per_sec']:,} events/s; monitor CPU {result['cpu_percent']}% "
            f"(100% = one core) = {result['events_per_cpu_second']:,} events per CPU-second"
        )
        print(
            f"  monitor RSS {result['rss_mb_start']} MB -> peak {result['rss_mb_peak']} MB "
            f"-> {result['rss_mb_end']} MB"
        )
        print(
            f"  sent {result['events_sent']:,}, processed {result['events_processed']:,} "
            f"(lost {result['lost']}), detections pushed back {result['detections_pushed']:,}, "
            f"error replies {result['error_replies']}, peak connections {result['connections_peak']}"
        )
        print(f"  machine load average {result['load_average']} on {os.cpu_count()} CPUs")
        print(
            f"  backlog left in socket buffers when the clients stopped: "
            f"{result['backlog_seconds']} s to process"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
