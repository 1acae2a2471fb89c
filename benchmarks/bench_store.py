"""SQLite write rate of the store with batching.

Writes the same stream of realistic events (tool calls and results with a few
hundred characters of output, 50 sessions, plus a detection every 100 events)
through :class:`monitor.store.Store` at several batch sizes and prints a table:
events committed per second (wall time from the first ``add_events`` to
``flush`` returning), events per CPU-second of the whole process (writer +
row building; the fairer number on a shared machine), transactions, and the
time callers spent inside ``add_events`` (row building + back-pressure).

    .venv/bin/python benchmarks/bench_store.py [--events N] [--batch-sizes 1,100,500] [--fts on,off]

``--fts off`` drops the full-text index's triggers after the store opens and
makes the writer's per-batch indexing statement a no-op, to measure what
keeping the index costs (the ``fts`` column).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.detect.base import Detection  # noqa: E402
from monitor.events import Event, Kind, Level  # noqa: E402
from monitor.store import Store, transactions  # noqa: E402
from monitor.store.schema import FTS_INDEX_NEW  # noqa: E402

SESSIONS = 50  # default; --sessions changes it
CHUNK = 100  # events per add_events call, like the hub's batches


def make_events(count: int, sessions: int = SESSIONS) -> list[Event]:
    events = []
    for i in range(count):
        session = f"session-{i % sessions:04d}"
        seq = i // sessions + 1
        if i % 2 == 0:
            event = Event(
                Kind.TOOL_CALL,
                session,
                1_700_000_000.0 + i * 0.01,
                source=f"/logs/{session}.jsonl",
                line=seq,
                tool="bash",
                args={"cmd": f"pytest tests/test_{i % 7}.py -x"},
                call_id=f"c{i}",
            )
        else:
            event = Event(
                Kind.TOOL_RESULT,
                session,
                1_700_000_000.0 + i * 0.01,
                source=f"/logs/{session}.jsonl",
                line=seq,
                call_id=f"c{i - 1}",
                content=("F" * 40 + "\n") * 8 + f"FAILED test_{i % 7} - AssertionError {i}",
            )
        event.seq = seq
        events.append(event)
    return events


def detection_for(event: Event) -> Detection:
    return Detection(
        "exact_repeat",
        Level.WARN,
        0.8,
        "same call again",
        "bash:pytest",
        count=3,
        session=event.session,
        source=event.source,
        line=event.line,
        ts=event.ts,
        seq=event.seq,
    )


def run(batch_size: int, events: list[Event], directory: Path, fts: bool = True) -> dict:
    path = directory / f"bench-{batch_size}-{'fts' if fts else 'nofts'}.db"
    store = Store(path, batch_size=batch_size, flush_ms=200, block_seconds=600)
    store.start()
    transactions.FTS_INDEX_NEW = FTS_INDEX_NEW if fts else "SELECT ?"  # the writer's batch indexing
    if not fts:
        with sqlite3.connect(path) as conn:
            for trigger in ("events_ai", "events_ad", "events_au"):
                conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    in_add = 0.0
    cpu_started = time.process_time()
    started = time.perf_counter()
    for index in range(0, len(events), CHUNK):
        chunk = events[index : index + CHUNK]
        before = time.perf_counter()
        store.add_events(chunk)
        store.add_detections([detection_for(chunk[-1])])
        in_add += time.perf_counter() - before
    store.flush(timeout=None)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    stats = store.stats
    store.close()
    size = sum(p.stat().st_size for p in directory.glob(f"{path.name}*"))
    return {
        "batch": batch_size,
        "fts": "on" if fts else "off",
        "events": stats.events,
        "seconds": elapsed,
        "rate": stats.events / elapsed,
        "cpu_rate": stats.events / cpu,
        "transactions": stats.transactions,
        "add_us": in_add / len(events) * 1e6,
        "dropped": stats.dropped,
        "mb": size / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--batch-sizes", default="1,100,500")
    parser.add_argument("--fts", default="on,off", help="with and/or without the full-text index")
    parser.add_argument(
        "--sessions", type=int, default=SESSIONS, help="sessions the events are spread over, round robin"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    events = make_events(args.events, args.sessions)
    print(
        f"{args.events:,} events ({args.sessions} sessions, ~{len(events[1].content)} chars per "
        f"result) through Store, flush_ms=200, WAL, synchronous=NORMAL"
    )
    print(
        f"{'batch':>6} {'fts':>4} {'events':>8} {'seconds':>8} {'events/s':>10} {'ev/cpu-s':>9} {'txns':>7} "
        f"{'add µs/ev':>10} {'dropped':>8} {'db MB':>7}"
    )
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
        for size, fts in [(size, mode == "on") for size in sizes for mode in args.fts.split(",")]:
            r = run(size, events, Path(tmp), fts)
            print(
                f"{r['batch']:>6} {r['fts']:>4} {r['events']:>8,} {r['seconds']:>8.2f} {r['rate']:>10,.0f} "
                f"{r['cpu_rate']:>9,.0f} "
                f"{r['transactions']:>7,} {r['add_us']:>10.1f} {r['dropped']:>8} {r['mb']:>7.1f}"
            )


if __name__ == "__main__":
    main()
