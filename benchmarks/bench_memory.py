"""Memory: what the engine holds for one session after 100,000 events (issue 2).

Runs a synthetic single-session trace (mixed honest work and occasional
loops, see :mod:`monitor.demo.synthetic`) through the engine and measures the
session's footprint with :func:`tests.footprint.session_footprint` — every
object reachable from the session's engine state and escalation state,
counted once, shared objects (classes, settings, config) excluded — at a few
checkpoints, broken down by detector.  tracemalloc's net allocations over the
last stretch are shown too (bounded state: about zero, give or take the
contents of the windows).  Global detectors (swarm) hold state shared by all
sessions; their size is shown separately.

Target: under 64 KB for the session after 100,000 events.

``--otlp-sessions N`` measures the live monitor instead (issue 32, item 7):
N new sessions (one Claude Code ``tool_result`` each, current timestamps)
posted to a real OTLP receiver in 5 requests, the hub's RSS before and
after, with the default ``[sources] max_live_sessions(_per_source)`` bounds.

    python benchmarks/bench_memory.py [--events N] [--loop-rate R]
    python benchmarks/bench_memory.py --otlp-sessions 50000
"""

from __future__ import annotations

import tracemalloc

import orjson
from common import parser, table

TARGET = 64 * 1024


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], 100_000)
    p.add_argument("--loop-rate", type=float, default=0.02, help="share of steps that start a short loop")
    p.add_argument(
        "--sparklines",
        action="store_true",
        help="measure the engine as the live monitor runs it (keeping similarity histories for the sparklines)",
    )
    p.add_argument("--otlp-sessions", type=int, default=0, help="measure N new OTLP sessions in a live hub")
    args = p.parse_args(argv)
    if args.otlp_sessions:
        import asyncio

        return asyncio.run(otlp_sessions(args.otlp_sessions))

    from monitor.demo.synthetic import records
    from monitor.detect.engine import Engine
    from monitor.formats.lines import LineDecoder
    from tests.footprint import deep_size, session_footprint

    engine = Engine(sparklines=args.sparklines)
    decoder = LineDecoder("one-session.jsonl")
    stream = records(args.events, sessions=1, seed=args.seed, loop_rate=args.loop_rate)
    checkpoints = sorted({min(args.events, n) for n in (1_000, 10_000, args.events // 2, args.events)})
    rows = []
    footprint: dict[str, int] = {}
    line = 0
    traced_from = max(0, args.events - min(10_000, args.events // 2))
    growth = None
    for checkpoint in checkpoints:
        while line < checkpoint:
            if line == traced_from and growth is None:
                tracemalloc.start()
                before = tracemalloc.take_snapshot()
                growth = 0
            line += 1
            events, _ = decoder.feed(orjson.dumps(next(stream)), line, now=0.0)
            for event in events:
                engine.process(event)
        (session,) = engine.sessions
        footprint = session_footprint(engine, session)
        rows.append((f"after {checkpoint:,} events", footprint["total"], footprint["total"] / 1024))
    if tracemalloc.is_tracing():
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        growth = sum(stat.size_diff for stat in after.compare_to(before, "filename"))

    title = "one session's engine memory" + (
        " (with sparkline histories, as in the monitor)" if args.sparklines else " (as in scan)"
    )
    print(table(title, ("checkpoint", "bytes", "KB"), rows))
    parts = sorted(((k, v) for k, v in footprint.items() if k != "total"), key=lambda kv: -kv[1])
    print()
    print(
        table(
            f"breakdown after {args.events:,} events (detectors share events: parts overlap)",
            ("part", "bytes", "KB"),
            [(k, v, v / 1024) for k, v in parts],
        )
    )
    shared = sum(deep_size(d) for d in engine.global_detectors)
    print(f"global detectors (shared by all sessions): {shared:,} bytes")
    if growth is not None:
        print(
            f"tracemalloc net allocations over the last {args.events - traced_from:,} events "
            f"(session and global detectors together): {growth:,} bytes"
        )
    total = footprint["total"]
    verdict = "OK" if total < TARGET else "ABOVE TARGET"
    print(f"target < {TARGET // 1024} KB for the session: {total / 1024:.1f} KB  [{verdict}]")
    return 0


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


async def otlp_sessions(count: int) -> int:
    import gc
    import json
    import time

    from monitor.config import build_config
    from monitor.hub import Hub
    from monitor.sources.otlp import OtlpReceiver
    from tests.test_otlp import post

    def body(numbers: range) -> bytes:
        def attr(key, value):
            return {"key": key, "value": {"stringValue": str(value)}}

        now = time.time_ns()
        records = [
            {
                "timeUnixNano": str(now + n),
                "attributes": [
                    attr("event.name", "tool_result"),
                    attr("session.id", f"s{n:07d}"),
                    attr("tool_name", "Bash"),
                    attr("success", "true"),
                    attr("tool_use_id", f"t{n}"),
                ],
            }
            for n in numbers
        ]
        resource = {"attributes": [attr("service.name", "agent"), attr("host.name", "h")]}
        return json.dumps(
            {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]}
        ).encode()

    config = build_config({})
    hub = Hub(config)
    await hub.start()
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), loopback_needs_token=False)
    await otlp.start()
    step = max(1, count // 5)
    bodies = [body(range(start, min(count, start + step))) for start in range(0, count, step)]
    gc.collect()
    before = _rss_mb()
    for data in bodies:
        await post(otlp, "/v1/logs", data)
        await otlp.flushed()
        await hub.join()
    gc.collect()
    after = _rss_mb()
    live = sum(1 for s in hub.lifecycle.sessions.values() if s.status == "live")
    sources = config.sources
    print(
        f"{count:,} new OTLP sessions in {len(bodies)} requests (max_live_sessions "
        f"{sources.max_live_sessions:,}, per source {sources.max_live_sessions_per_source:,}): "
        f"RSS {before:.0f} -> {after:.0f} MB; live {live:,}, closed to stay within the bounds "
        f"{hub.lifecycle.evicted:,}, held {len(hub.lifecycle.sessions):,}"
    )
    await otlp.stop()
    await hub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
