"""Helpers shared by the security tests: a looping native log naming a pid, and polling with a deadline."""

from __future__ import annotations

import asyncio
import json
import time

SLEEPER = "import time; time.sleep(120)"
DEADLINE = 20.0


def loop_lines(session: str, ts: float, n: int = 12, pid: int | None = None) -> str:
    """A session start naming ``pid`` then ``n`` identical failing calls (terminate level by 10)."""
    start = {"type": "session_start", "session": session, "ts": ts, "agent": "a"}
    if pid is not None:
        start["pid"] = pid
    out = [json.dumps(start)]
    for i in range(n):
        out.append(
            json.dumps(
                {
                    "type": "tool_call",
                    "session": session,
                    "ts": ts + i,
                    "id": f"c{i}",
                    "name": "bash",
                    "args": {"cmd": "ls /nope"},
                }
            )
        )
        out.append(
            json.dumps(
                {
                    "type": "tool_result",
                    "session": session,
                    "ts": ts + i + 0.5,
                    "id": f"c{i}",
                    "content": "ls: /nope: no such file",
                    "is_error": True,
                }
            )
        )
    return "\n".join(out) + "\n"


async def until(predicate, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
