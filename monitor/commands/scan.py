"""``loopwatch scan``: run the detectors over finished log files."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from monitor.commands.common import ConfigError, add_config_options, config_from_args, fail
from monitor.events import Level

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.scan import ScanReport

HELP = "scan log files offline and report loops (exit 1 if any reached warn)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="log files or directories; '-' reads standard input"
    )
    add_config_options(parser)
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per loop episode (docs/episodes.md)"
    )
    parser.add_argument(
        "--detections",
        action="store_true",
        help="with --json: one JSON object per detection instead (a loop's every repeat)",
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        metavar="NAME",
        help="force a format instead of detecting it per file (a line format, or "
        "one of the documents: chat, cline, openhands, swe-agent)",
    )
    parser.add_argument(
        "--min-level",
        default="notice",
        metavar="LEVEL",
        help="report detections at or above LEVEL (default: notice)",
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="re-scan sessions stored in this loopwatch database instead of "
        "files (what-if: try another --preset on your own history)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar (it is shown on stderr only when that is a terminal)",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        metavar="N",
        help="worker processes, sessions shared among them (default: every usable "
        "core for inputs of 4 MB or more, else 1); the detections are the same "
        "whatever N",
    )
    parser.add_argument(
        "--session",
        action="append",
        metavar="ID",
        help="with --db: only this session (an id or unique prefix; repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from monitor.formats import format_names
    from monitor.formats.documents import DOCUMENT_FORMATS
    from monitor.scan import expand_paths, scan, unreadable

    try:
        config = config_from_args(args)
    except ConfigError as exc:
        return fail(str(exc))
    try:
        min_level = Level.parse(args.min_level)
    except ValueError as exc:
        return fail(f"--min-level: {exc}")
    names = sorted({*format_names(), *DOCUMENT_FORMATS})
    if args.fmt is not None and args.fmt not in names:
        return fail(f"--format: unknown format {args.fmt!r} (expected one of: {', '.join(names)})")
    if args.jobs is not None and args.jobs < 1:
        return fail("--jobs: expected a number of processes, 1 or more")
    if args.db is not None:
        if args.paths:
            return fail("scan: give PATHs or --db, not both")
        from monitor.commands.stored import scan_database

        return scan_database(args, config, min_level)
    if args.detections and not args.json:
        return fail("scan: --detections goes with --json")
    if args.session:
        return fail("scan: --session needs --db")
    if not args.paths:
        return fail("scan: name at least one PATH (or '-' for standard input)")
    expanded = expand_paths(args.paths)
    if not expanded:
        return fail(
            f"scan: nothing to scan in {', '.join(args.paths)}: no agent logs there "
            "(*.jsonl, *.ndjson, *.traj, or .json trajectories)"
        )
    for path in expanded:
        if path == "-":
            continue
        why = unreadable(path)
        if why is not None:
            return fail(f"{path}: cannot read: {why}")
    from monitor.scan_jobs import ScanAborted, default_jobs

    jobs = args.jobs if args.jobs is not None else default_jobs(expand_paths(args.paths))
    try:
        from monitor.progress import Progress

        progress = None if args.quiet else Progress(sys.stderr)
        report = scan(args.paths, config, fmt=args.fmt, progress=progress, jobs=jobs)
    except OSError as exc:
        return fail(f"{exc.filename or ''}: cannot read: {exc.strerror or exc}")
    except ScanAborted as exc:
        return fail(f"scan: {exc}")
    return _print_report(report, args, min_level, config)


def _print_report(report: ScanReport, args: argparse.Namespace, min_level: Level, config: Config) -> int:
    """The episodes (or detections) on stdout, the bad lines on stderr; the exit status."""
    from monitor.episode_output import format_scan

    out = sys.stdout
    if args.json:
        from monitor.episode_output import write_scan_json

        write_scan_json(sys.stdout, report.detections, args.detections, min_level, config)
    else:
        out.write(format_scan(report, config, min_level) + "\n")
    for problem in report.problems[:200]:
        print(f"loopwatch: skipped {problem}", file=sys.stderr)
    if report.problem_count > 200:
        print(f"loopwatch: … {report.problem_count - 200} more bad lines", file=sys.stderr)
    if report.nothing_read:
        print("loopwatch: nothing given could be read as agent events", file=sys.stderr)
        return 2
    return report.exit_code
