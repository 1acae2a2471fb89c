"""Helpers for the commands that read the store: ``history``, ``show`` and
``scan --db`` (not a subcommand itself)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime

import orjson

from monitor.commands.common import ConfigError, fail
from monitor.config import Config, load_config
from monitor.events import Level


def add_db_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="the loopwatch database (default: [store] path in the config, "
        "else loopwatch.db in the user data dir)",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="TOML config file (only its [store] path is used here)"
    )


def open_store(args: argparse.Namespace, config: Config | None = None):
    """The store named by ``--db``/the config, for reading; or an error string."""
    from monitor.store import Store, StoreError, resolve_db_path

    if config is None and args.db is None:
        try:
            config = load_config(getattr(args, "config", None))
        except ConfigError as exc:
            return str(exc)
    path = resolve_db_path(args.db, config.store if config is not None else None)
    if not path.exists():
        return f"no loopwatch database at {path} (it is created by `loopwatch watch`)"
    store = Store(path)
    try:
        store.get_session("")  # opens (and if needed upgrades) the file now, to fail early
    except StoreError as exc:
        return str(exc)
    return store


def resolve_session(store, text: str) -> str:
    """The session id ``text`` names (exactly or as a unique prefix); raises LookupError."""
    text = text.rstrip("…")  # pasted from a shortened id in the history table
    if store.get_session(text) is not None:
        return text
    matches = store.find_sessions(text)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no stored session {text!r} (see `loopwatch history`)")
    raise LookupError(
        f"{text!r} matches several sessions: {', '.join(matches[:8])}" + (" …" if len(matches) > 8 else "")
    )


def fmt_time(ts: float | None) -> str:
    """Local date and time to the second, or '-'."""
    if ts is None:
        return "-"
    try:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):  # stored before times were range-checked
        return f"ts {ts!r}"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def level_label(row: dict, key: str = "peak") -> str:
    return row.get(key) or Level.NONE.label


def dumps(value: object) -> str:
    return orjson.dumps(value, default=str).decode()


def scan_database(args: argparse.Namespace, config: Config, min_level: Level) -> int:
    """``loopwatch scan --db``: re-scan stored sessions with this config/preset."""
    from monitor.episode_output import format_scan
    from monitor.scan import scan_store
    from monitor.scan_jobs import SHARD_MIN_BYTES

    store = open_store(args, config)
    if isinstance(store, str):
        return fail(store)
    try:
        if args.session:
            try:
                ids = list(dict.fromkeys(resolve_session(store, s) for s in args.session))
            except LookupError as exc:
                return fail(str(exc))
        else:
            ids = store.session_ids()
        started = time.perf_counter()
        from monitor.scan_jobs import ScanAborted, usable_cores

        jobs = (
            args.jobs
            if args.jobs is not None
            else (usable_cores() if store.path.stat().st_size >= SHARD_MIN_BYTES else 1)
        )
        try:
            report = scan_store(store, None if not args.session else ids, config, jobs=jobs)
        except ScanAborted as exc:
            return fail(f"scan: {exc}")
        elapsed = time.perf_counter() - started
        out = sys.stdout
        if args.json:
            from monitor.episode_output import write_scan_json

            write_scan_json(sys.stdout, report.detections, args.detections, min_level, config)
        else:
            out.write(format_scan(report, config, min_level) + "\n")
            out.write(what_if(store, ids, report, config.preset) + "\n")
            print(f"loopwatch: re-scanned {report.events:,} events in {elapsed:.2f}s", file=sys.stderr)
        return report.exit_code
    finally:
        store.close()


def what_if(store, ids: list[str], report, preset: str) -> str:
    """Which sessions would end at another level than the one recorded live."""
    recorded = {row["id"]: row for row in store.list_sessions(limit=None)}
    now: dict[str, Level] = {}
    for detection in report.detections:
        now[detection.session] = max(now.get(detection.session, Level.NONE), detection.level)
    changed = []
    for session in ids:
        before = Level.parse(level_label(recorded.get(session, {})))
        after = now.get(session, Level.NONE)
        if before != after:
            changed.append((session, before, after))
    if not changed:
        return (
            f"what-if (preset {preset}): no session ends at another level than recorded "
            f"({len(ids)} session(s))"
        )
    width = max(len("SESSION"), *(len(s) for s, _, _ in changed[:50]))
    lines = [
        f"what-if (preset {preset}): {len(changed)} of {len(ids)} session(s) end at "
        f"another level than recorded",
        f"  {'SESSION':<{width}}  {'RECORDED':<9}  NOW",
    ]
    for session, before, after in changed[:50]:
        arrow = "▲" if after > before else "▼"
        lines.append(f"  {session:<{width}}  {before.label:<9}  {after.label} {arrow}")
    if len(changed) > 50:
        lines.append(f"  … {len(changed) - 50} more")
    return "\n".join(lines)
