#!/usr/bin/env python3
"""A toy agent that gets stuck in a loop and listens to loopwatch.

It keeps running the same failing tool call (``bash ls /no/such/dir``) — a
textbook loop — while streaming its events to the monitor with
:class:`monitor.client.LoopwatchClient`.  When the monitor injects a message,
the agent "reads" it, changes approach, and finishes; a ``kill`` message or
SIGTERM makes it end its session and exit.

    loopwatch watch --headless &            # or the TUI
    python examples/example_agent.py        # watch it get flagged, then inject

Options: ``--socket PATH`` or ``--address HOST:PORT --token T`` to reach the
monitor; ``--steps 0`` loops until told otherwise; ``--ignore-sigterm`` plays
an agent that only SIGKILL stops; ``--stubborn`` one that reads injected
messages and kill requests and loops on regardless.  It prints one line per thing that
happens (``READY``, ``DETECTION``, ``INJECT``, ``CHANGED``, ``DONE``) so
scripts and tests can follow it.  It keeps working when no monitor runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

try:
    from monitor.client import LoopwatchClient
except ModuleNotFoundError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from monitor.client import LoopwatchClient


def say(*parts: object) -> None:
    print(*parts, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", help="the monitor's Unix socket (default: its default path)")
    parser.add_argument("--address", help="HOST:PORT of a monitor listening on TCP")
    parser.add_argument("--token", help="token for TCP (default: $LOOPWATCH_TOKEN)")
    parser.add_argument("--session", help="session id (default: a fresh one)")
    parser.add_argument("--steps", type=int, default=20, help="loop iterations before giving up (0: forever)")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds between tool calls")
    parser.add_argument(
        "--ignore-sigterm", action="store_true", help="ignore SIGTERM (only SIGKILL stops it)"
    )
    parser.add_argument(
        "--stubborn", action="store_true", help="read injected messages and kill requests but keep looping"
    )
    args = parser.parse_args(argv)

    nudges: list[str] = []
    stop = threading.Event()

    def on_control(message: dict) -> None:
        # Runs on the client's thread: just record what the agent should act on.
        kind = message.get("type")
        if kind == "inject":
            nudges.append(str(message.get("text", "")))
            say("INJECT", message.get("text", "").splitlines()[0] if message.get("text") else "")
        elif kind == "detection":
            say("DETECTION", message.get("level"), message.get("detector"), message.get("count"))
        elif kind == "ack":
            say("ACK")
        elif kind == "kill":
            say("KILL requested by the operator")
            if not args.stubborn:
                stop.set()

    client = LoopwatchClient(
        agent="example-agent",
        session=args.session,
        socket_path=args.socket,
        address=args.address,
        token=args.token,
        on_control=on_control,
    )

    def on_sigterm(signum: int, frame: object) -> None:
        say("SIGTERM")
        client.session_end("terminated")
        client.close(timeout=0.5)
        os._exit(143)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_sigterm else on_sigterm)

    client.session_start()
    connected = client.wait_connected(1.0)
    say("READY", f"session={client.session}", f"pid={os.getpid()}", f"connected={connected}")
    client.message("user", "List the files in the build output directory.")

    step = 0
    status = "gave_up"
    while not stop.is_set() and (args.steps == 0 or step < args.steps):
        step += 1
        if nudges and not args.stubborn:
            # The nudge worked: do something different and finish.
            client.message("assistant", "I keep getting the same error; trying a different directory.")
            call = client.tool_call("bash", {"cmd": "ls ."})
            client.tool_result(call, "\n".join(sorted(os.listdir("."))[:20]))
            client.message("assistant", "The build output is not there; the task cannot proceed as asked.")
            say("CHANGED", "approach after", step, "steps")
            status = "ok"
            break
        call = client.tool_call("bash", {"cmd": "ls /no/such/dir"})
        client.tool_result(call, "ls: cannot access '/no/such/dir': No such file or directory", is_error=True)
        time.sleep(args.delay)
    else:
        if stop.is_set():
            status = "killed"
    client.session_end(status)
    client.close(timeout=1.0)
    say("DONE", status, f"sent={client.sent}", f"dropped={client.dropped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
