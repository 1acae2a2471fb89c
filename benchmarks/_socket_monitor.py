"""The monitor side of the socket benchmarks, run as its own process.

    python benchmarks/_socket_monitor.py --socket PATH [--db PATH]

Starts the real pipeline (Hub + SocketServer, and a SQLite Store unless
``--db ''``; with ``--otlp-port-file`` an OTLP receiver and with ``--watch``
a file source too, all sharing the socket server's fair ingest pump as in
``watch``), prints ``READY`` once agents may connect, then one JSON line of
counters every ``--every`` seconds, and stops cleanly (everything flushed) when
its standard input closes.  Running it apart from the load generator keeps the
two from sharing one interpreter and its GIL, and lets the driver measure the
monitor's own CPU and memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.config import build_config  # noqa: E402
from monitor.hub import Hub  # noqa: E402
from monitor.sources.sockets import SocketServer  # noqa: E402


def _pending_events(otlp) -> int:
    """OTLP events left in pending files at stop (what `watch` reads at its next start)."""
    if otlp is None or otlp.pending is None:
        return 0
    from monitor.sources.otlp_pending import read, waiting

    return sum(len(read(path)[0]) for path in waiting(otlp.pending))


async def serve(args: argparse.Namespace) -> None:
    overrides = {"sources": {"max_connections": args.max_connections}}
    config = build_config(overrides, preset=args.preset)
    store = None
    if args.db:
        from monitor.store import Store

        store = Store(args.db)
        store.start()
    hub = Hub(config, store)
    await hub.start()
    server = SocketServer(hub, config, unix_path=args.socket)
    await server.start()
    otlp = None
    if args.otlp_port_file:  # the OTLP receiver too, on a free loopback port written there
        from monitor.sources.otlp import OtlpReceiver

        # As in `watch`: what is accepted but unprocessed at stop goes to a pending file.
        pending = Path(args.otlp_port_file).parent / "otlp-state"
        otlp = OtlpReceiver(
            hub, ("127.0.0.1", 0), loopback_needs_token=False, ingest=server.ingest, pending=pending
        )
        await otlp.start()
        Path(args.otlp_port_file).write_text(str(otlp.address[1]))
    files = None
    if args.watch:  # a log file followed from its start, as `watch --from-start` would
        from monitor.sources.files import FileSource, StartPolicy

        files = FileSource([args.watch], hub, start=StartPolicy("start"), ingest=server.ingest)
        await files.start()
    print("READY", flush=True)

    loop = asyncio.get_running_loop()
    lag = {"max": 0.0}

    async def measure_lag() -> None:
        # How long the event loop went without turning (what any reply waits for at worst).
        while True:
            before, cpu, pcpu = loop.time(), time.thread_time(), time.process_time()
            await asyncio.sleep(0.005)
            late = loop.time() - before - 0.005
            if late > lag.get("max", 0.0):
                lag["max"], lag["cpu"], lag["pcpu"] = (
                    late,
                    time.thread_time() - cpu,
                    time.process_time() - pcpu,
                )

    lag_task = asyncio.create_task(measure_lag())
    stdin_closed = asyncio.Event()
    loop.add_reader(sys.stdin.fileno(), lambda: sys.stdin.buffer.read1(4096) or stdin_closed.set())
    try:
        while not stdin_closed.is_set():
            try:
                async with asyncio.timeout(args.every):
                    await stdin_closed.wait()
            except TimeoutError:
                pass
            print(
                json.dumps(
                    {
                        "t": time.monotonic(),
                        "events": hub.events_total,
                        "received": server.events + (otlp.accepted if otlp is not None else 0),
                        "otlp_throttled": otlp.throttled if otlp is not None else 0,
                        "detections": hub.detections_total,
                        "problems": hub.problems_total,
                        "connections": len(server.connections),
                        "queued_batches": hub._queue.qsize(),
                        "ingest_pending": server.ingest.pending,
                        "ingest_batches": server.ingest.batches,
                        "batch_size": server.ingest.batch_size,
                        "max_loop_lag": round(lag.pop("max", 0.0), 4),
                        "lag_cpu": round(lag.pop("cpu", 0.0), 4),
                        "lag_process_cpu": round(lag.pop("pcpu", 0.0), 4),
                        "slowest_round": round(server.ingest.slowest_round, 4),
                        "file_events": sum(tf.events for tf in files.by_path.values()) if files else 0,
                        "file_pauses": hub.file_pauses,
                        "store_slices": server.ingest.store_waits,
                        "store_dropped": store.stats.dropped if store is not None else 0,
                        "store_spilled": store.stats.spilled if store is not None else 0,
                        "store_pending": store.stats.pending if store is not None else 0,
                    }
                ),
                flush=True,
            )
            server.ingest.slowest_round = 0.0
    finally:
        lag_task.cancel()
        loop.remove_reader(sys.stdin.fileno())
        stopping = time.monotonic()
        if otlp is not None:
            await otlp.stop()
        if files is not None:
            await files.stop()
        await server.stop()
        await hub.stop()
        if store is not None:
            await asyncio.to_thread(store.close)
        stats = store.stats if store is not None else None
        print(
            json.dumps(
                {
                    "final": True,
                    "stop_seconds": round(time.monotonic() - stopping, 3),
                    "store_dropped": stats.dropped if stats else 0,
                    "store_spilled": stats.spilled if stats else 0,
                    "ingest_left": server.ingest.left,
                    "otlp_pending": _pending_events(otlp),
                }
            ),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--db", default="")
    parser.add_argument("--preset", default="balanced")
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--max-connections", type=int, default=1024)
    parser.add_argument("--profile", help="write a cProfile of the monitor to this file")
    parser.add_argument("--otlp-port-file", help="also receive OTLP/HTTP; write its port to this file")
    parser.add_argument("--watch", help="also follow this log file from its start")
    args = parser.parse_args()
    if args.profile:
        import cProfile

        cProfile.runctx(
            "asyncio.run(serve(args))", globals(), {"args": args, "serve": serve}, filename=args.profile
        )
    else:
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
