"""A load generator for the socket benchmarks: many agent connections in one process.

    python benchmarks/_socket_load.py --socket PATH --clients 100 --rate 2500 --duration 20

Each client is one Unix socket connection speaking for one session.  It sends
a realistic mix (mostly distinct tool calls with results, some messages and
usage records, and every 100 steps a short exact-repeat loop that the
detectors flag), paced to ``rate`` events per second in total, or as fast as
the monitor accepts them with ``--rate 0`` (the monitor's back-pressure then
sets the pace).  Replies (detections) are read and counted.  Prints one JSON
line with totals at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import orjson

TOOLS = ("bash", "read_file", "grep", "edit_file")


def session_lines(session: str, steps: int) -> list[bytes]:
    """``steps`` agent steps (2-3 events each) for one session, pre-serialized."""
    out: list[bytes] = []
    for step in range(steps):
        looping = step % 100 >= 96  # 4 identical calls in a row every 100 steps
        tool = "bash" if looping else TOOLS[step % len(TOOLS)]
        args = {"cmd": "make test"} if looping else {"path": f"src/module_{step % 997}.py", "line": step}
        call = f"{session}-{step}"
        out.append(
            orjson.dumps({"type": "tool_call", "session": session, "id": call, "name": tool, "args": args})
        )
        result = "FAILED tests/test_x.py::test_y" if looping else f"ok {step}: " + "x" * (step % 200)
        out.append(
            orjson.dumps(
                {
                    "type": "tool_result",
                    "session": session,
                    "id": call,
                    "content": result,
                    "is_error": looping,
                }
            )
        )
        if step % 10 == 9:
            out.append(
                orjson.dumps(
                    {
                        "type": "message",
                        "session": session,
                        "role": "assistant",
                        "content": f"Step {step}: looked at module {step % 997}, moving on.",
                    }
                )
            )
        if step % 25 == 24:
            out.append(
                orjson.dumps(
                    {
                        "type": "usage",
                        "session": session,
                        "input_tokens": 1200 + step,
                        "output_tokens": 80,
                        "cost_usd": 0.002,
                    }
                )
            )
    return [line + b"\n" for line in out]


class Totals:
    sent = 0
    detections = 0
    errors = 0
    disconnected = 0


async def agent(path: str, session: str, rate: float, stop_at: float, totals: Totals) -> None:
    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)

    async def read_replies() -> None:
        try:
            while line := await reader.readline():
                kind = orjson.loads(line).get("type")
                if kind == "detection":
                    totals.detections += 1
                elif kind == "error":
                    totals.errors += 1
        except (ConnectionError, OSError):
            pass

    replies = asyncio.create_task(read_replies())
    writer.write(orjson.dumps({"type": "hello", "agent": "bench"}) + b"\n")
    writer.write(orjson.dumps({"type": "session_start", "session": session, "agent": "bench"}) + b"\n")
    totals.sent += 1
    lines = session_lines(session, 1000)
    chunk = 5 if rate else 50
    interval = chunk / rate if rate else 0.0
    next_at = time.monotonic()
    i = 0
    try:
        while time.monotonic() < stop_at:
            batch = [lines[(i + k) % len(lines)] for k in range(chunk)]
            i += chunk
            writer.write(b"".join(batch))
            await writer.drain()
            totals.sent += chunk
            if interval:
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
    except (ConnectionError, OSError):
        totals.disconnected += 1  # the monitor went away: nothing more to measure here
    finally:
        writer.close()  # graceful: what is buffered still reaches the monitor
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass
        replies.cancel()


async def main_async(args: argparse.Namespace) -> None:
    totals = Totals()
    per_client = args.rate / args.clients if args.rate else 0.0
    stop_at = time.monotonic() + args.duration
    await asyncio.gather(
        *(agent(args.socket, f"{args.prefix}-{n}", per_client, stop_at, totals) for n in range(args.clients))
    )
    print(
        json.dumps(
            {
                "sent": totals.sent,
                "detections": totals.detections,
                "errors": totals.errors,
                "disconnected": totals.disconnected,
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rate", type=float, default=0.0, help="events/s in total (0: as fast as accepted)")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--prefix", default="load")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
