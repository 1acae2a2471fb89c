"""``loopwatch hook claude|codex``: the command an agent's hook configuration runs.

Reads the hook event JSON on stdin, forwards it to the running monitor and
prints the operator's answer (see :mod:`monitor.hooks`).  Always exits 0.
``loopwatch hook`` is dispatched by :func:`monitor.cli.main` before the other
commands are imported, so a hook call costs little more than Python's start.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "forward an agent hook event (JSON on stdin) to the monitor and print its answer"
AGENT_CHOICES = ("claude", "codex")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", choices=AGENT_CHOICES, help="which agent's hook protocol to speak")
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="the monitor's socket (default: $LOOPWATCH_SOCKET, else the user runtime dir)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="give up on the monitor after this long in total (default: $LOOPWATCH_HOOK_TIMEOUT, else 0.5)",
    )
    parser.add_argument(
        "--stop-blocks",
        type=int,
        metavar="N",
        help="hold an agent's stop at most N times in a row (default: $LOOPWATCH_STOP_BLOCKS, else 1)",
    )


def run(args: argparse.Namespace) -> int:
    import os

    from monitor.hooks import STOP_BLOCKS_ENV, run_hook

    if args.stop_blocks is not None:
        os.environ[STOP_BLOCKS_ENV] = str(max(args.stop_blocks, 0))

    return run_hook(
        args.agent,
        sys.stdin.buffer,
        sys.stdout,
        sys.stderr,
        path=Path(args.socket).expanduser() if args.socket else None,
        timeout=args.timeout,
    )


def main(argv: list[str]) -> int:
    """``loopwatch hook …`` without building the whole CLI (a hook must be fast)."""
    parser = argparse.ArgumentParser(prog="loopwatch hook", description=HELP)
    configure(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        # Exit status 2 from a PreToolUse hook would block the agent's tool
        # call: a misconfigured hook exits 0 too (argparse said why on stderr).
        return 0
    return run(args)
