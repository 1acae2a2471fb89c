"""A simulated agent, run as a real process: ``python -m monitor.demo.agent``.

    python -m monitor.demo.agent --scenario exact_repeat --log /tmp/demo/exact_repeat.jsonl
                                 [--socket PATH] [--interval 0.35] [--steps N] [--echo]

It writes a native JSONL log (one record a line, flushed as written) at a
realistic pace — a few events a second — starting with a ``session_start``
that carries its pid, and performs its scenario (see
:mod:`monitor.demo.scenarios`).  With ``--socket`` it also streams the same
events to a running monitor over its socket (then watch the socket *or* the
log directory, not both, or every event counts twice).

Between steps it follows its inbox ``<log>.inbox.jsonl`` (and the socket's
control messages): ``{"type": "inject", "text": …}`` writes a user message
with the text and switches a looping agent to honest work; ``{"type": "ack"}``
is noted; ``{"type": "kill"}``, SIGTERM or SIGINT end the session
(``session_end``) and the process.  It also exits when its parent dies, so a
crashed demo leaves no agents behind.

``--instant`` writes without pausing and with synthetic timestamps (for
bundled example logs); ``--inject-at N`` simulates an inject before step N.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from monitor.demo.scenarios import SCENARIOS, steps

TASKS = {
    "poll_progress": "Build the release artifacts for every target and check each one.",
    "edit_test": "Make the failing test suites pass, one module at a time.",
    "paging": "Go through the service logs and report anything unusual.",
    "exact_repeat": "Package the build artifacts from build/.",
    "ab_cycle": "Get the app to start locally.",
    "same_error": "Start the web service and confirm it answers on port 8080.",
    "monologue": "Fix the stale cache entries after a profile update.",
    "chanting": "Fix the CSV importer so it accepts quoted fields.",
    "stuck_tests": "Fix the discount calculation; tests/test_discount.py must pass.",
}


class Log:
    """Writes records to the log (flushed per line) and, optionally, to a monitor socket."""

    def __init__(
        self, path: Path, session: str, *, client: Any = None, echo: bool = False, clock: Any = time.time
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "wb")
        self.session = session
        self.client = client
        self.echo = echo
        self.clock = clock

    def write(self, record: dict[str, Any]) -> None:
        record = {
            "type": record["type"],
            "session": self.session,
            "ts": round(self.clock(), 3),
            **{k: v for k, v in record.items() if k != "type"},
        }
        line = orjson.dumps(record)
        self.file.write(line + b"\n")
        self.file.flush()
        if self.client is not None:
            fields = dict(record)
            self.client.event(fields.pop("type"), **fields)
        if self.echo:
            sys.stdout.write(line.decode() + "\n")
            sys.stdout.flush()

    def close(self) -> None:
        self.file.close()
        if self.client is not None:
            self.client.flush(2.0)
            self.client.close()


def note(echo: bool, text: str) -> None:
    if echo:
        sys.stdout.write(f"# {text}\n")
        sys.stdout.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m monitor.demo.agent", description="A simulated agent for the loopwatch demo."
    )
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--log", required=True, type=Path, help="native JSONL log to write (truncated)")
    parser.add_argument("--socket", help="also stream events to the monitor's socket at this path")
    parser.add_argument("--session", help="session id (default: the log file's stem)")
    parser.add_argument("--interval", type=float, default=0.35, help="mean seconds between events")
    parser.add_argument(
        "--think",
        type=float,
        default=None,
        help="mean seconds before an assistant message (default: max(1.2, 4 x interval))",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the pid)")
    parser.add_argument("--steps", type=int, default=0, help="stop after N steps (0: run until stopped)")
    parser.add_argument("--echo", action="store_true", help="print each record and control message")
    parser.add_argument("--instant", action="store_true", help="no pauses; synthetic timestamps")
    parser.add_argument("--start", type=float, default=1_750_000_000.0, help="first timestamp with --instant")
    parser.add_argument(
        "--inject-at", type=int, default=0, metavar="N", help="simulate an operator inject before step N"
    )
    parser.add_argument(
        "--parent",
        type=int,
        default=0,
        metavar="PID",
        help="exit when this process (the launcher) is gone (default: the parent at start)",
    )
    parser.add_argument("--inject-text", default="You are repeating yourself. Stop and try something else.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    session = args.session or args.log.name.removesuffix(".jsonl")
    rng = random.Random(args.seed if args.seed is not None else os.getpid())
    stop = threading.Event()
    why = ["terminated"]  # how the session ends if stopped: a signal, or "killed" by a kill message
    parent = args.parent or os.getppid()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run(args, session, rng, stop, why, parent)
    finally:  # main() may be called in-process (write_examples): leave the handlers as found
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _open_log(
    args: argparse.Namespace, session: str, clock: Callable[[], float], controls: deque[dict]
) -> Log:
    """The session's log, and (with --socket) a client that also sends it to the monitor."""
    client = None
    if args.socket:
        from monitor.client import LoopwatchClient

        client = LoopwatchClient(
            agent=f"demo-{args.scenario}",
            session=session,
            socket_path=args.socket,
            on_control=controls.append,
        )
    return Log(args.log, session, client=client, echo=args.echo, clock=clock)


def _write_start(log: Log, args: argparse.Namespace) -> None:
    """The session's start and its task, the user's first message."""
    scenario = SCENARIOS[args.scenario]
    start = {
        "type": "session_start",
        "agent": f"demo-{args.scenario}",
        "pid": os.getpid(),
        "meta": {"demo": True, "scenario": scenario.name, "honest": scenario.honest},
    }
    if args.instant:
        del start["pid"]  # a generated log outlives this process: no pid to signal later
    log.write(start)
    log.write({"type": "message", "role": "user", "content": TASKS[scenario.name]})


def _obey(
    messages: list[dict],
    args: argparse.Namespace,
    log: Log,
    why: list[str],
    stop: threading.Event,
    recover: Callable[[], Iterator[list[dict[str, Any]]]],
) -> Iterator[list[dict[str, Any]]] | None:
    """Act on the operator's messages; the honest work to go on with after an inject (else None)."""
    work = None
    for message in messages:
        kind = message.get("type")
        if kind == "inject":
            text = str(message.get("text") or "")
            note(args.echo, f"inject: {text}")
            log.write({"type": "message", "role": "user", "content": text})
            work = recover()  # visibly change course: honest work from here on
        elif kind == "ack":
            note(args.echo, "ack")
        elif kind == "kill":
            note(args.echo, "kill")
            why[0] = "killed"
            stop.set()
    return work


def _run(
    args: argparse.Namespace,
    session: str,
    rng: random.Random,
    stop: threading.Event,
    why: list[str],
    parent: int,
) -> int:
    """Write the session: start, the task, then steps until stopped, killed or done."""
    # A model takes a while to write a reply: an assistant message comes after a
    # longer pause than a tool result (and so counts as a turn of its own).
    think = args.think if args.think is not None else max(1.2, 4 * args.interval)
    fake = [args.start]

    def pause(record: dict[str, Any]) -> bool:
        """Wait before writing ``record``; True when asked to stop meanwhile."""
        seconds = think if record.get("role") == "assistant" else args.interval
        seconds *= rng.uniform(0.6, 1.4)
        if args.instant:
            fake[0] += seconds
            return False
        return stop.wait(seconds)

    clock = (lambda: fake[0]) if args.instant else time.time

    from monitor.client import InboxReader  # the inbox format is the control module's

    # Messages that were in the inbox before this run are not for this run.
    inbox = InboxReader(args.log, from_start=False)
    controls: deque[dict] = deque()
    log = _open_log(args, session, clock, controls)
    _write_start(log, args)
    work, recover = steps(args.scenario, rng, prefix=f"{session}-c")
    status, step = "done", 0
    try:
        while not args.steps or step < args.steps:
            step += 1
            messages = inbox.read()
            while controls:
                messages.append(controls.popleft())
            if args.inject_at and step == args.inject_at:
                messages.append({"type": "inject", "text": args.inject_text})
            work = _obey(messages, args, log, why, stop, recover) or work
            if stop.is_set():
                status = why[0]
                break
            if os.getppid() != parent:
                status = "orphaned"  # the demo that started us is gone
                break
            step_records = next(work, None)
            if step_records is None:
                break  # the scenario has nothing more to do
            for record in step_records:
                if pause(record):
                    break
                log.write(record)
        log.write({"type": "session_end", "status": status})
    finally:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
