"""``loopwatch demo``: the monitor on a set of simulated agents.

The agents (``monitor.demo``) are real subprocesses writing native JSONL logs
in a temporary directory and following their inbox files; some work honestly,
some loop in different ways.  The monitor tails their logs exactly as ``watch``
would, records to a temporary database unless ``--db`` is given, and opens
the dashboard — or, with ``--headless``, prints what happens for
``--duration`` seconds while answering warnings on its own (auto-inject, and
auto-kill at ``terminate``) so that the whole loop — detect, nudge, stop — can
be seen without a terminal UI.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.commands.common import (
    ConfigError,
    add_config_options,
    add_ui_options,
    config_from_args,
    fail,
    shorten,
    ui_problem,
)

if TYPE_CHECKING:
    from monitor.hub import Hub
    from monitor.hub.live import LiveMonitor

HELP = "run the monitor on built-in simulated agents (start here)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help="record to this database (default: a temporary one)")
    parser.add_argument(
        "--headless",
        action="store_true",
        help="no TUI: print detections and actions; answer warnings automatically",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=30.0,
        metavar="S",
        help="with --headless: stop after S seconds (default: 30)",
    )
    parser.add_argument(
        "--auto",
        action="store_true",
        help="in the TUI too, inject nudges and kill at terminate automatically",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary directory (agents' logs, and the database unless --db)",
    )
    add_config_options(parser)
    add_ui_options(parser, only_with="the TUI")


#: How often ended agent processes are reaped.
REAP_SECONDS = 1.0


class DemoRun:
    """Temporary directory, the live pipeline and the agent processes."""

    def __init__(self, config: Any, db: str | None, keep: bool = False):
        self.config = config
        self.directory = Path(tempfile.mkdtemp(prefix="loopwatch-demo-"))
        self.db = db or str(self.directory / "loopwatch.db")
        self.keep = keep
        # A database kept from an earlier demo: this run's sessions get their own ids (the same
        # names would join the earlier run's sessions across the gap).
        self.run_tag = time.strftime("%H%M%S") if db and Path(db).expanduser().exists() else ""
        self.processes: list[Any] = []
        self.live: LiveMonitor | None = None

    def build(self) -> LiveMonitor:
        from monitor.commands.watch import announce_to_doctor
        from monitor.hub.live import LiveMonitor
        from monitor.sources.paths import StartPolicy

        logs = self.directory / "agents"
        logs.mkdir()
        self.live = LiveMonitor(
            self.config,
            paths=[str(logs)],
            start_policy=StartPolicy(mode="start"),
            db=self.db,
            use_socket=False,
            announce=announce_to_doctor,
        )
        self.live.open_store()
        return self.live

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Hub]:
        """Pipeline started, then the agents; everything stopped on exit."""
        from monitor.demo import start_agents, stop_agents

        live = self.live or self.build()
        async with live.running() as hub:
            reaper: asyncio.Task | None = None
            try:
                self.processes = await asyncio.to_thread(
                    start_agents, self.directory / "agents", run_tag=self.run_tag
                )
                reaper = asyncio.create_task(self._reap())
                yield hub
            finally:
                if reaper is not None:
                    reaper.cancel()
                await asyncio.to_thread(stop_agents, self.processes)

    async def _reap(self, every: float = REAP_SECONDS) -> None:
        """Collect the exit status of agents that end (a kill from the TUI, or their own end), so
        none stays a zombie until the demo exits."""
        while True:
            for process in self.processes:
                process.poll()
            await asyncio.sleep(every)

    def abandon(self) -> None:
        """Stop the agents and remove the files without the event loop (it is stuck)."""
        from monitor.demo import stop_agents

        stop_agents(self.processes, timeout=2.0)
        self.cleanup()

    def cleanup(self) -> None:
        """Remove the agents' logs and the temporary database (unless --keep)."""
        if not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)


def _check_demo_module() -> str | None:
    try:
        import monitor.demo  # noqa: F401
    except ImportError as exc:
        return f"the simulated agents (monitor.demo) are not available: {exc}"
    return None


async def _headless(run: DemoRun, duration: float) -> int:
    from monitor.commands.watch import HeadlessPrinter
    from monitor.events import Level
    from monitor.updates import DetectionRaised

    printer = HeadlessPrinter(as_json=False, min_level=Level.WARN, out=sys.stdout, err=sys.stderr)
    live = run.build()
    hub = live.build_hub()
    hub.subscribe(printer, kinds=printer.kinds)
    started = time.monotonic()
    first_warn: float | None = None

    def watch_first(update: object) -> None:
        nonlocal first_warn
        detection = getattr(update, "detection", None)
        if first_warn is None and detection is not None and detection.level >= Level.WARN:
            first_warn = time.monotonic() - started

    hub.subscribe(watch_first, kinds=(DetectionRaised,))
    stop = _stop_on_signals()
    killed = None
    async with run.running() as hub:
        print(
            f"loopwatch demo: {len(run.processes)} agents in {run.directory / 'agents'}; "
            f"recording to {run.db}; {duration:g} s",
            file=sys.stderr,
        )
        if not await _stopped_within(stop, duration * 2 / 3):
            killed = await _demonstrate_kill(hub, run.processes)
            await _stopped_within(stop, duration / 3)
        processes = list(run.processes)
        exited = [p for p in processes if p.poll() is not None]
    sessions = sorted(hub.sessions(), key=lambda s: s.id)
    print("\nsession              agent            level      events  status", file=sys.stderr)
    for info in sessions:
        print(
            f"{shorten(info.id, 20):<20} {shorten(info.agent or '-', 16):<16} {info.level.label:<10} "
            f"{info.events:>6}  {info.status}",
            file=sys.stderr,
        )
    print(
        f"\nfirst warning after {first_warn:.1f} s" if first_warn is not None else "\nno warning",
        file=sys.stderr,
    )
    print(
        f"{len(exited)} of {len(processes)} agent processes had exited before the demo ended"
        + (f" (pid {killed.pid}, killed by loopwatch, exit status {killed.poll()})" if killed else ""),
        file=sys.stderr,
    )
    return 0 if first_warn is not None else 1


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGHUP (the terminal closed), so the demo ends
    as it does after --duration: agents stopped, temporary files removed."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return stop


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds``; True as soon as ``stop`` is set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _demonstrate_kill(hub: Any, processes: list[Any]) -> Any:
    """Play the operator once: kill the live session that warned the most.

    Returns the process that was killed (or None)."""
    from monitor.events import Level

    candidates = [s for s in hub.sessions() if s.status == "live" and s.pid and s.level >= Level.NOTICE]
    if not candidates:
        candidates = [s for s in hub.sessions() if s.status == "live" and s.pid]
    if not candidates:
        return None
    target = max(candidates, key=lambda s: (s.level, s.events))
    print(f"loopwatch demo: operator kills {target.id}: {hub.describe_kill(target.id)}", file=sys.stderr)
    record = await hub.act("kill", target.id)
    print(f"loopwatch demo: kill {target.id} -> {record.outcome} ({record.detail})", file=sys.stderr)
    return next((p for p in processes if p.pid == target.pid), None)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        return fail(str(exc))
    problem = _check_demo_module()
    if problem:
        return fail(problem)
    if args.headless or args.auto:
        config.control = dataclasses.replace(
            config.control,
            auto_inject=True,
            auto_kill=True,
            kill_grace_seconds=min(config.control.kill_grace_seconds, 2.0),
        )
    if args.headless:
        if args.duration <= 0:
            return fail("--duration: must be positive")
        demo = DemoRun(config, args.db, keep=args.keep)
        try:
            return asyncio.run(_headless(demo, args.duration))
        except KeyboardInterrupt:
            return 130
        finally:
            demo.cleanup()
    problem = ui_problem(config, args.theme, "use `loopwatch demo --headless` to run it without one")
    if problem:
        return fail(problem)
    from monitor.ui.app import run_app

    demo = DemoRun(config, args.db, keep=args.keep)
    try:
        demo.build()
    except Exception as exc:
        return fail(f"cannot open the database: {exc}")
    try:
        where = "a temporary database" if args.db is None else args.db
        note = (
            "Demo: simulated agents start now; some will loop within seconds. Select a warning, "
            f"press i to inject the nudge (watch the agent change course) or K (shift+k) to kill it. "
            f"Recording to {where}. ? lists every key."
        )
        return run_app(config, demo.running, theme=args.theme, notes=[note], last_resort=[demo.abandon])
    finally:
        demo.cleanup()
