"""``loopwatch watch``: follow agents live (log files and sockets), in the TUI or headless.

``--headless`` prints each loop episode as it opens, escalates and closes
(``--json``: one object per change, docs/episodes.md; ``--detections``: each
detection, as ``scan --json --detections`` prints it plus ``ts``) and runs until Ctrl-C or SIGTERM, which
stop it cleanly: sources stop, everything queued is processed, the database
is flushed and closed.  Without it the Textual dashboard opens over the same
pipeline (:class:`~monitor.hub.live.LiveMonitor`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import stat
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from monitor import episode_output
from monitor.commands.common import (
    ConfigError,
    add_config_options,
    add_ui_options,
    config_from_args,
    fail,
    ui_config_problem,
    ui_problem,
)
from monitor.cost import spend_text
from monitor.detect.episodes import EpisodeChange
from monitor.events import Level
from monitor.hub.reads import sessions_heard
from monitor.text import printable
from monitor.updates import ActionFinished, DetectionRaised, EpisodeChanged, ProblemReported, WaitingNotice

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.hub.live import LiveMonitor
    from monitor.sources.files import StartPolicy

HELP = "watch agents live: tail log files and accept agent sockets (TUI, or --headless)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="log files, directories (watched recursively for *.jsonl) or quoted globs",
    )
    parser.add_argument(
        "--headless", action="store_true", help="no TUI: print loop episodes as they open, escalate and close"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="with --headless: one JSON object per episode change (docs/episodes.md)",
    )
    parser.add_argument(
        "--detections",
        action="store_true",
        help="with --headless: print every detection instead (a loop's every repeat)",
    )
    parser.add_argument(
        "--min-level",
        default="notice",
        metavar="LEVEL",
        help="with --headless: print detections at or above LEVEL (default: notice)",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-start", action="store_true", help="replay the existing content of every file")
    start.add_argument("--from-end", action="store_true", help="read only lines appended from now on")
    parser.add_argument(
        "--recent",
        type=float,
        default=15.0,
        metavar="MINUTES",
        help="by default, files modified in the last MINUTES (15) are replayed "
        "(their last 8 MiB), older ones are read from their end",
    )
    parser.add_argument(
        "--format", dest="fmt", metavar="NAME", help="force a line format instead of detecting it per file"
    )
    parser.add_argument("--claude", action="store_true", help="also watch Claude Code's transcripts")
    parser.add_argument("--codex", action="store_true", help="also watch Codex CLI's rollouts")
    parser.add_argument("--gemini", action="store_true", help="also watch Gemini CLI's chats")
    parser.add_argument(
        "--opencode", action="store_true", help="also watch OpenCode's sessions (opencode.db)"
    )
    parser.add_argument("--goose", action="store_true", help="also watch Goose's sessions (sessions.db)")
    parser.add_argument("--cursor", action="store_true", help="also watch Cursor's agent transcripts")
    parser.add_argument("--copilot", action="store_true", help="also watch GitHub Copilot CLI's sessions")
    parser.add_argument(
        "--aider", action="store_true", help="also watch Aider's .aider.chat.history.md in this folder"
    )
    _add_listener_options(parser)
    parser.add_argument("--db", metavar="PATH", help="SQLite database (default: in the user data dir)")
    parser.add_argument("--no-db", action="store_true", help="record nothing")
    add_config_options(parser)
    add_ui_options(parser, only_with="the TUI")


def _add_listener_options(parser: argparse.ArgumentParser) -> None:
    """Where agents reach the monitor: socket, TCP, OTLP; and the metrics endpoint."""
    parser.add_argument(
        "--socket", metavar="PATH", help="Unix socket for agents (default: in the runtime dir)"
    )
    parser.add_argument("--no-socket", action="store_true", help="do not accept agent connections")
    parser.add_argument("--listen", metavar="HOST:PORT", help="also accept agents over TCP (needs a token)")
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the TCP and OTLP token from this file (mode 0600); default: $LOOPWATCH_TOKEN",
    )
    parser.add_argument(
        "--token",
        metavar="T",
        help="TCP and OTLP token on the command line (deprecated: visible to every user in ps)",
    )
    parser.add_argument(
        "--otlp",
        nargs="?",
        const="127.0.0.1:4318",
        metavar="[HOST:]PORT",
        help="also receive OpenTelemetry (OTLP/HTTP /v1/logs and /v1/traces) from agents "
        "or a Collector (default 127.0.0.1:4318; other hosts need the token)",
    )
    parser.add_argument(
        "--metrics",
        nargs="?",
        const="127.0.0.1:9464",
        metavar="[HOST:]PORT",
        help="serve Prometheus metrics at /metrics (default 127.0.0.1:9464; off unless given)",
    )
    parser.add_argument(
        "--otlp-export",
        metavar="URL",
        help="send each loop detection as OpenTelemetry (a log event, and a span event on the "
        "session's trace when known) to this OTLP/HTTP endpoint, e.g. http://localhost:4318 "
        "(default: [export] otlp_url)",
    )


# -- the TCP token ------------------------------------------------------------------------------


class TokenError(ValueError):
    """The TCP token cannot be read safely."""


def resolve_token(token: str | None, token_file: str | None, err: TextIO) -> str | None:
    """The TCP token from ``--token-file``, ``$LOOPWATCH_TOKEN`` or (with a warning) ``--token``.

    A command line is readable by every local user (``ps``, ``/proc/<pid>/cmdline``),
    so ``--token`` still works but says so; a token file must not be readable by
    group or others, like an ssh key."""
    if token and token_file:
        raise TokenError("use either --token-file or --token, not both")
    if token_file:
        path = Path(token_file).expanduser()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise TokenError(f"the token file {path} is not a regular file")
            if stat.S_IMODE(info.st_mode) & 0o077:
                raise TokenError(
                    f"the token file {path} is readable by others "
                    f"(mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it"
                )
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        lines = data.decode("utf-8", "replace").splitlines()
        value = lines[0].strip() if lines else ""
        if not value:
            raise TokenError(f"the token file {path} is empty")
        return value
    if token:
        err.write(
            "loopwatch: warning: --token is visible to every local user in ps; "
            "use --token-file PATH or LOOPWATCH_TOKEN instead\n"
        )
        return token
    return os.environ.get("LOOPWATCH_TOKEN") or None


# -- the pipeline ------------------------------------------------------------------------------


def announce_to_doctor(where: dict[str, str | None] | None) -> None:
    """Tell `loopwatch doctor` where this monitor listens and records (``None``: it stopped)."""
    from monitor.commands.doctor import clear_monitor_state, write_monitor_state

    if where is None:
        clear_monitor_state()
    else:
        write_monitor_state(**where)


# -- headless output ------------------------------------------------------------------------------


class HeadlessPrinter:
    """A hub subscriber that prints loop episodes as they open, escalate and
    close -- or with ``detections`` every detection -- (stdout) and
    problems/actions (stderr).

    With a store (:meth:`hold_until_stored`), a detection or an episode
    change is printed only once its row is committed, so whatever a consumer read is in the database even
    after a SIGKILL; the delay is one transaction while the store's writer is
    idle, at most its ``flush_ms`` (200 ms by default) plus one under load.
    """

    def __init__(
        self, *, as_json: bool, min_level: Level, out: TextIO, err: TextIO, detections: bool = False
    ):
        self.as_json = as_json
        #: Print every detection (the output before episodes), not the episodes' changes.
        self.each_detection = detections
        self.min_level = min_level
        self.out = out
        self.err = err
        self.detections = 0
        self.worst = Level.NONE
        #: The updates it prints: subscribe with ``kinds=printer.kinds``.
        self.kinds: tuple[type, ...] = (
            DetectionRaised,
            EpisodeChanged,
            ProblemReported,
            ActionFinished,
            WaitingNotice,
        )
        self.store: Any = None
        self._held: deque[tuple[int, Any]] = deque()  # (store position, detection)

    def hold_until_stored(self, store: Any, loop: asyncio.AbstractEventLoop) -> None:
        """Print each detection only after the store committed it."""
        self.store = store

        def written(done: int) -> None:  # on the store's writer thread
            try:
                loop.call_soon_threadsafe(self.release)
            except RuntimeError:  # the loop is closed: release() runs at the end
                pass

        store.on_written(written)

    def release(self) -> None:
        """Print the held detections the store has committed (all, once it is closed)."""
        written = self.store.written() if self.store is not None else float("inf")
        while self._held and self._held[0][0] <= written:
            self._print(self._held.popleft()[1])

    def __call__(self, update: object) -> None:
        if isinstance(update, DetectionRaised):
            self.detection(update.detection)
        elif isinstance(update, EpisodeChanged):
            if not self.each_detection and episode_output.printed(update.change, self.min_level):
                self._hold(update.change)
        elif isinstance(update, ProblemReported):
            self.err.write(f"loopwatch: {update.problem}\n")
            self.err.flush()
        elif isinstance(update, WaitingNotice):
            self.waiting(update)
        elif isinstance(update, ActionFinished):
            a = update.action
            self.err.write(
                f"loopwatch: {a.who}: {a.kind} {a.session} -> {a.outcome}"
                + (f" ({a.detail})" if a.detail else "")
                + "\n"
            )
            self.err.flush()

    def waiting(self, notice: WaitingNotice) -> None:
        """A session has waited for the person too long: one line (JSON with ``--json``)."""
        if self.as_json:
            record = {"type": "waiting", "session": notice.session, "since": notice.since}
            record.update({"why": notice.why, "asks": notice.asks})
            self.out.write(orjson.dumps(record).decode() + "\n")
            self.out.flush()
            return
        asks = f": {printable(notice.asks)}" if notice.asks else ""
        self.err.write(f"loopwatch: {printable(notice.session)} waits for input ({notice.why}){asks}\n")
        self.err.flush()

    def detection(self, detection: Any) -> None:
        self.detections += 1
        self.worst = max(self.worst, detection.level)
        if detection.level < self.min_level or not self.each_detection:
            return
        self._hold(detection)

    def _hold(self, printed: Any) -> None:
        if self.store is not None:
            # The hub queued its rows before publishing it: wait for them.
            self._held.append((self.store.position(), printed))
            self.release()
            return
        self._print(printed)

    def _print(self, detection: Any) -> None:
        if isinstance(detection, EpisodeChange):
            text = (
                episode_output.change_json(detection)
                if self.as_json
                else episode_output.change_line(detection)
            )
            self.out.write(text + "\n")
            self.out.flush()
            return
        if self.as_json:
            record = detection.to_dict()
            record["ts"] = detection.ts
            self.out.write(orjson.dumps(record).decode() + "\n")
        else:
            try:
                clock = time.strftime("%H:%M:%S", time.localtime(detection.ts))
            except (OverflowError, OSError, ValueError):  # a time no clock shows
                clock = "--:--:--"
            cost = spend_text(getattr(detection, "cost", None))
            self.out.write(
                f"{clock} {detection.level.label.upper():<9} {detection.detector:<17} "
                f"{detection.session}  {detection.where}  {detection.message}"
                + (f"  [loop so far {cost}]" if cost else "")
                + "\n"
            )
        # Consumers read this live through a pipe: never leave a detection in a buffer.
        self.out.flush()


async def run_headless(live: LiveMonitor, printer: HeadlessPrinter) -> None:
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
    if live.store is not None:
        printer.hold_until_stored(live.store, loop)
    try:
        if await _started(live, stopping):
            for note in live.notes:
                printer.err.write(f"loopwatch: {note}\n")
            printer.err.write(f"loopwatch: {live.describe()}; Ctrl-C to stop\n")
            printer.err.flush()
            await stopping.wait()
    finally:
        await live.stop()
        printer.release()  # the store is closed: whatever is still held
    stats = hub.stats()
    printer.err.write(
        f"loopwatch: stopped after {stats.events_total:,} events in {len(sessions_heard(hub))} session(s); "
        f"{printer.detections} detection(s), worst {printer.worst.label}; " + store_outcome(live.store) + "\n"
    )
    printer.err.flush()


async def _started(live: LiveMonitor, stopping: asyncio.Event) -> bool:
    """Start ``live``; False when a signal came first.  Starting reads existing
    files (``--from-start``), which pauses while the store is behind -- for as
    long as a full disk lasts -- and SIGTERM must not wait for it."""
    start = asyncio.ensure_future(live.start())
    signalled = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({start, signalled}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    if not start.done():
        start.cancel()
        await asyncio.gather(start, return_exceptions=True)
        return False
    start.result()  # (its errors are the command's)
    return True


def store_outcome(store: Any) -> str:
    """How the database ended: only a store that lost nothing is "flushed and closed"."""
    if store is None:
        return "nothing recorded"
    lost = store.losses()
    if lost:
        return f"DATABASE INCOMPLETE: {lost}"
    return "database flushed and closed"


# -- the command -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    from monitor.formats import format_names
    from monitor.hub.live import LiveMonitor

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
    directories, agent_paths = _agent_locations(args)
    paths += [p for p in agent_paths if p not in paths]
    policy = _start_policy(args, config)
    if args.socket or args.listen:
        socket, listen = args.socket or config.sources.socket, args.listen or config.sources.listen
        config.sources = dataclasses.replace(config.sources, socket=socket, listen=listen)
    try:
        token = resolve_token(args.token, args.token_file, sys.stderr)
    except TokenError as exc:
        return fail(str(exc))
    live = LiveMonitor(
        config,
        paths=paths,
        directories=directories,
        fmt=args.fmt,
        start_policy=policy,
        db=args.db,
        use_db=not args.no_db,
        socket_path=args.socket,
        use_socket=not args.no_socket,
        listen=args.listen,
        token=token,
        otlp=args.otlp,
        metrics=args.metrics,
        announce=announce_to_doctor,
        otlp_export=args.otlp_export,
    )
    problem = _listener_problem(args, token, config) or _watch_problem(args, config, paths, directories)
    if problem:
        return fail(problem)
    try:
        live.open_store()
    except Exception as exc:
        return fail(f"cannot open the database: {exc}")

    if not args.headless:
        from monitor.ui.app import run_app

        status = int(run_app(config, live.running, theme=args.theme, notes=live.notes) or 0)
        return incomplete(live.store, sys.stderr) or status
    return _watch_headless(args, live, min_level)


def _agent_locations(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The agents' own session folders, and files or globs, that --claude, --codex, --opencode … name."""
    from monitor.formats.locations import AGENTS, locations

    directories: list[str] = []
    paths: list[str] = []
    for agent in AGENTS:
        if getattr(args, agent, False):
            for where in locations(agent):
                (directories if where.kind == "dir" else paths).append(where.path)
    return directories, paths


def _start_policy(args: argparse.Namespace, config: Config) -> StartPolicy:
    """Where in each file watching starts (--from-end, --from-start, else --recent)."""
    from monitor.sources.files import StartPolicy

    if args.from_end:
        mode = "end"
    elif args.from_start or config.sources.from_start:
        mode = "start"
    else:
        mode = "recent"
    return StartPolicy(mode=mode, recent_seconds=args.recent * 60.0)


def _listener_problem(args: argparse.Namespace, token: str | None, config: Config) -> str | None:
    """Why --otlp, --metrics or --listen cannot listen where asked (OTLP needs the token, on loopback too
    unless the config opts out; a non-loopback --metrics needs one)."""
    if args.otlp:
        from monitor.sources.otlp import OtlpError, parse_address, token_problem

        try:
            host, port = parse_address(args.otlp)
        except OtlpError as exc:
            return str(exc)
        problem = token_problem(
            host, port, token or os.environ.get("LOOPWATCH_TOKEN"), config.sources.otlp_loopback_needs_token
        )
        if problem:
            return problem
    export = args.otlp_export or config.export.otlp_url
    if export:
        from monitor.otlp_export import ExportError, base_url

        try:
            base_url(export)
        except ExportError as exc:
            return str(exc)
    if args.metrics:
        from monitor.sources.otlp import OtlpError, is_loopback, parse_address

        try:
            host, _port = parse_address(args.metrics)
        except OtlpError as exc:
            return str(exc).replace("--otlp", "--metrics")
        if not is_loopback(host) and not token:
            return f"--metrics {args.metrics}: a non-loopback address needs a token"
    if args.listen and not token:
        return "--listen needs a token: use --token-file PATH or set LOOPWATCH_TOKEN"
    return None


def _watch_problem(
    args: argparse.Namespace, config: Config, paths: list[str], directories: list[str]
) -> str | None:
    """Why watching cannot start: nothing to watch, or no terminal UI to show it in."""
    if not paths and not directories and args.no_socket and not args.otlp:
        return "watch: nothing to watch (name a PATH, or leave the agent socket on)"
    if not args.headless:
        return ui_problem(config, args.theme, "use --headless to watch without one")
    return ui_config_problem(config)


def _watch_headless(args: argparse.Namespace, live: LiveMonitor, min_level: Level) -> int:
    """``watch --headless``: print detections until stopped."""
    from monitor.sources.otlp import OtlpError
    from monitor.sources.sockets import SocketError
    from monitor.store import StoreError

    printer = HeadlessPrinter(
        as_json=args.json, min_level=min_level, out=sys.stdout, err=sys.stderr, detections=args.detections
    )
    try:
        asyncio.run(run_headless(live, printer))
    except OSError as exc:
        return fail(f"cannot watch: {exc.strerror or exc}")
    except (SocketError, StoreError, OtlpError) as exc:
        return fail(str(exc))
    return EXIT_INCOMPLETE if live.store is not None and live.store.losses() else 0


#: Exit status of a watch that lost rows (a full disk, a stopped writer): its database is incomplete.
EXIT_INCOMPLETE = 3


def incomplete(store: Any, err: TextIO) -> int:
    """After the TUI: say once on stderr what the store lost; EXIT_INCOMPLETE if anything."""
    lost = store.losses() if store is not None else None
    if not lost:
        return 0
    err.write(f"loopwatch: DATABASE INCOMPLETE: {lost}\n")
    return EXIT_INCOMPLETE
