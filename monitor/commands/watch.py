"""``loopwatch watch``: follow agents live (log files and sockets), in the TUI or headless.

``--headless`` prints each detection as it happens (``--json``: the objects
``scan --json`` prints, plus ``ts``) and runs until Ctrl-C or SIGTERM, which
stop it cleanly: sources stop, everything queued is processed, the database
is flushed and closed.  Without it the Textual dashboard opens over the same
pipeline (:class:`LiveWatch`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
import time
from typing import Any, TextIO

import orjson

from monitor.commands.common import (
    ConfigError, add_config_options, add_ui_options, config_from_args, fail, ui_problem,
)
from monitor.config import Config
from monitor.events import Level

HELP = "watch agents live: tail log files and accept agent sockets (TUI, or --headless)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="log files, directories (watched recursively for *.jsonl) or quoted globs")
    parser.add_argument("--headless", action="store_true", help="no TUI: print detections as they happen")
    parser.add_argument("--json", action="store_true", help="with --headless: one JSON object per detection")
    parser.add_argument("--min-level", default="notice", metavar="LEVEL",
                        help="with --headless: print detections at or above LEVEL (default: notice)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-start", action="store_true",
                       help="replay the existing content of every file")
    start.add_argument("--from-end", action="store_true",
                       help="read only lines appended from now on")
    parser.add_argument("--recent", type=float, default=15.0, metavar="MINUTES",
                        help="by default, files modified in the last MINUTES (15) are replayed "
                             "(their last 8 MiB), older ones are read from their end")
    parser.add_argument("--format", dest="fmt", metavar="NAME",
                        help="force a line format instead of detecting it per file")
    parser.add_argument("--claude", action="store_true", help="also watch Claude Code's transcripts")
    parser.add_argument("--codex", action="store_true", help="also watch Codex CLI's rollouts")
    parser.add_argument("--socket", metavar="PATH", help="Unix socket for agents (default: in the runtime dir)")
    parser.add_argument("--no-socket", action="store_true", help="do not accept agent connections")
    parser.add_argument("--listen", metavar="HOST:PORT", help="also accept agents over TCP (needs a token)")
    parser.add_argument("--token", metavar="T", help="TCP token (default: $LOOPWATCH_TOKEN)")
    parser.add_argument("--db", metavar="PATH", help="SQLite database (default: in the user data dir)")
    parser.add_argument("--no-db", action="store_true", help="record nothing")
    add_config_options(parser)
    add_ui_options(parser, only_with="the TUI")


# -- the pipeline -----------------------------------------------------------------------------


class LiveWatch:
    """Store + hub + file and socket sources, started and stopped together.

    Build it anywhere; :meth:`start` and :meth:`stop` run on the loop that
    should own the hub (``asyncio.run`` headless, Textual's loop in the TUI).
    """

    def __init__(self, config: Config, *, paths: list[str], directories: list[str] | None = None,
                 fmt: str | None = None, start_policy: Any = None, db: str | None = None,
                 use_db: bool = True, socket_path: str | None = None, use_socket: bool = True,
                 listen: str | None = None, token: str | None = None):
        self.config = config
        self.paths = paths
        self.directories = directories or []
        self.fmt = fmt
        self.start_policy = start_policy
        self.db = db
        self.use_db = use_db
        self.socket_path = socket_path
        self.use_socket = use_socket
        self.listen = listen
        self.token = token
        self.store: Any = None
        self.hub: Any = None
        self.files: Any = None
        self.sockets: Any = None
        self.notes: list[str] = []  # what could not be started, for the operator

    def open_store(self) -> None:
        """Open the database (raises on an unusable one); a missing store module is a note."""
        if not self.use_db:
            return
        try:
            from monitor.store import Store
        except ImportError as exc:
            self.notes.append(f"not recording: the store is not available ({exc})")
            return
        store = Store.from_settings(self.config.store, self.db)
        store.start()
        self.store = store

    def build_hub(self) -> Any:
        from monitor.hub import Hub

        if self.hub is None:
            self.hub = Hub(self.config, self.store)
        return self.hub

    async def start(self) -> None:
        from monitor.sources.files import FileSource

        if self.store is None and self.use_db:
            self.open_store()
        hub = self.build_hub()
        await hub.start()
        if self.paths or self.directories:
            self.files = FileSource(self.paths, hub, fmt=self.fmt, start=self.start_policy,
                                    directories=self.directories)
            await self.files.start()
        if self.use_socket:
            try:
                from monitor.sources.sockets import SocketServer
            except ImportError as exc:
                self.notes.append(f"not accepting agent sockets: the socket server is not available ({exc})")
                return
            self.sockets = SocketServer(hub, self.config, unix_path=self.socket_path,
                                        listen=self.listen, token=self.token)
            await self.sockets.start()

    async def stop(self) -> None:
        """Stop the sources, process what they queued, flush and close the database."""
        if self.sockets is not None:
            await self.sockets.stop()
        if self.files is not None:
            await self.files.stop()
        if self.hub is not None:
            await self.hub.stop()
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    def describe(self) -> str:
        parts = []
        if self.files is not None:
            parts.append(f"watching {self.files.describe()} ({self.files.start_policy.describe()})")
        if self.sockets is not None:
            where = str(self.sockets.unix_path)
            if self.sockets.tcp_address:
                where += " and tcp {}:{}".format(*self.sockets.tcp_address)
            parts.append(f"agents may connect to {where}")
        parts.append(f"recording to {self.store.path}" if self.store is not None else "not recording")
        return "; ".join(parts)


# -- headless output ------------------------------------------------------------------------------


class HeadlessPrinter:
    """A hub subscriber that prints detections (stdout) and problems/actions (stderr)."""

    def __init__(self, *, as_json: bool, min_level: Level, out: TextIO, err: TextIO):
        from monitor.hub import ActionFinished, DetectionRaised, ProblemReported

        self.as_json = as_json
        self.min_level = min_level
        self.out = out
        self.err = err
        self.detections = 0
        self.worst = Level.NONE
        #: The updates it prints: subscribe with ``kinds=printer.kinds``.
        self.kinds: tuple[type, ...] = (DetectionRaised, ProblemReported, ActionFinished)

    def __call__(self, update: object) -> None:
        from monitor.hub import ActionFinished, DetectionRaised, ProblemReported

        if isinstance(update, DetectionRaised):
            self.detection(update.detection)
        elif isinstance(update, ProblemReported):
            self.err.write(f"loopwatch: {update.problem}\n")
            self.err.flush()
        elif isinstance(update, ActionFinished):
            a = update.action
            self.err.write(f"loopwatch: {a.who}: {a.kind} {a.session} -> {a.outcome}"
                           + (f" ({a.detail})" if a.detail else "") + "\n")
            self.err.flush()

    def detection(self, detection: Any) -> None:
        self.detections += 1
        self.worst = max(self.worst, detection.level)
        if detection.level < self.min_level:
            return
        if self.as_json:
            record = detection.to_dict()
            record["ts"] = detection.ts
            self.out.write(orjson.dumps(record).decode() + "\n")
        else:
            clock = time.strftime("%H:%M:%S", time.localtime(detection.ts))
            self.out.write(f"{clock} {detection.level.label.upper():<9} {detection.detector:<17} "
                           f"{detection.session}  {detection.where}  {detection.message}\n")
        # Consumers read this live through a pipe: never leave a detection in a buffer.
        self.out.flush()


async def run_headless(live: LiveWatch, printer: HeadlessPrinter) -> None:
    """Run until SIGINT/SIGTERM, then shut down with everything flushed."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stopping.set)
        except (NotImplementedError, RuntimeError):
            pass
    hub = live.build_hub()
    hub.subscribe(printer, kinds=printer.kinds)
    try:
        await live.start()
        for note in live.notes:
            printer.err.write(f"loopwatch: {note}\n")
        printer.err.write(f"loopwatch: {live.describe()}; Ctrl-C to stop\n")
        printer.err.flush()
        await stopping.wait()
    finally:
        await live.stop()
    stats = hub.stats()
    printer.err.write(
        f"loopwatch: stopped after {stats.events_total:,} events in {len(hub.sessions())} session(s); "
        f"{printer.detections} detection(s), worst {printer.worst.label}; "
        + ("database flushed and closed\n" if live.store is not None else "nothing recorded\n"))
    printer.err.flush()


# -- the command -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    from monitor.formats import format_names
    from monitor.sources.files import StartPolicy

    try:
        config = config_from_args(args)
    except ConfigError as exc:
        return fail(str(exc))
    if args.fmt is not None and args.fmt not in format_names():
        return fail(f"--format: unknown format {args.fmt!r} (expected one of: {', '.join(format_names())})")
    try:
        min_level = Level.parse(args.min_level)
    except ValueError as exc:
        return fail(f"--min-level: {exc}")
    if args.recent < 0:
        return fail("--recent: must not be negative")
    paths = list(args.paths) or list(config.sources.paths)
    if "-" in paths:
        return fail("watch: standard input cannot be watched; use 'loopwatch scan -'")
    directories: list[str] = []
    if args.claude or args.codex:
        from monitor.formats import locations

        if args.claude:
            directories.append(str(locations.claude_projects_dir()))
        if args.codex:
            directories.append(str(locations.codex_sessions_dir()))
    if args.from_end:
        mode = "end"
    elif args.from_start or config.sources.from_start:
        mode = "start"
    else:
        mode = "recent"
    policy = StartPolicy(mode=mode, recent_seconds=args.recent * 60.0)
    if args.socket or args.listen:
        config.sources = dataclasses.replace(config.sources, socket=args.socket or config.sources.socket,
                                             listen=args.listen or config.sources.listen)
    live = LiveWatch(config, paths=paths, directories=directories, fmt=args.fmt, start_policy=policy,
                     db=args.db, use_db=not args.no_db, socket_path=args.socket,
                     use_socket=not args.no_socket, listen=args.listen, token=args.token)
    if args.listen and not (args.token or os.environ.get("LOOPWATCH_TOKEN")):
        return fail("--listen needs a token: pass --token or set LOOPWATCH_TOKEN")
    if not paths and not directories and args.no_socket:
        return fail("watch: nothing to watch (name a PATH, or leave the agent socket on)")
    if not args.headless:
        problem = ui_problem(config, args.theme, "use --headless to watch without one")
        if problem:
            return fail(problem)
    try:
        live.open_store()
    except Exception as exc:
        return fail(f"cannot open the database: {exc}")

    if not args.headless:
        from monitor.ui.app import run_app

        return int(run_app(live, theme=args.theme) or 0)

    printer = HeadlessPrinter(as_json=args.json, min_level=min_level, out=sys.stdout, err=sys.stderr)
    try:
        asyncio.run(run_headless(live, printer))
    except OSError as exc:
        return fail(f"cannot watch: {exc.strerror or exc}")
    except Exception as exc:
        if type(exc).__name__ in ("SocketError", "StoreError"):
            return fail(str(exc))
        raise
    return 0
