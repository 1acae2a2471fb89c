"""``loopwatch history``: list past sessions from the store."""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime

from monitor.commands.common import ConfigError, add_ui_options, fail, shorten, ui_problem
from monitor.commands.stored import (
    add_db_options,
    dumps,
    fmt_duration,
    fmt_time,
    level_label,
    open_store,
)
from monitor.config import load_config
from monitor.cost import stored_loop_cost
from monitor.events import Level
from monitor.store.search import MAX_HITS, search

HELP = "list past sessions recorded in the database (newest first)"

#: Widest session id shown in the table; longer ones end in "…" (``show``
#: accepts the shortened id as a prefix).
SESSION_WIDTH = 36
#: Matching events listed under the table by ``--search`` (``--matches``).
DEFAULT_MATCHES = 20
_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """Epoch seconds from ``2d``/``12h``/``30m``/``1w`` ago or an ISO date/time
    (local time unless it names a zone).  Raises ValueError."""
    now = time.time() if now is None else now
    match = _AGO.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise ValueError(f"expected an age like 2d, 12h, 30m, 1w or an ISO date/time, got {text!r}") from None


def configure(parser: argparse.ArgumentParser) -> None:
    add_db_options(parser)
    parser.add_argument(
        "--agent", metavar="NAME", help="only sessions of agents whose name contains NAME (any case)"
    )
    parser.add_argument(
        "--since", metavar="WHEN", help="only sessions seen since WHEN: 2d, 12h, 30m, 1w or an ISO date/time"
    )
    parser.add_argument(
        "--level",
        metavar="LEVEL",
        help="only sessions that reached LEVEL or above (notice, warn, critical, terminate)",
    )
    parser.add_argument(
        "--search",
        metavar="TEXT",
        help="full-text search: sessions whose events (tool, arguments, output, "
        "messages) contain every word of TEXT — or whose id, agent or source "
        "contains TEXT — and the matching events (word* for a prefix)",
    )
    parser.add_argument(
        "--limit", type=int, default=50, metavar="N", help="at most N sessions (default: 50; 0 = all)"
    )
    parser.add_argument(
        "--matches",
        type=int,
        default=DEFAULT_MATCHES,
        metavar="N",
        help=f"with --search: list at most N matching events (default: {DEFAULT_MATCHES}; "
        f"0 = all found, up to {MAX_HITS}); --json has them all",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per session")
    parser.add_argument("--tui", action="store_true", help="browse the history in the TUI")
    add_ui_options(parser, only_with="--tui")


def run(args: argparse.Namespace) -> int:
    from monitor.store import StoreError

    try:
        return _run(args)
    except StoreError as exc:  # a damaged database found while reading: what to do, no traceback
        return fail(str(exc))


def _run(args: argparse.Namespace) -> int:
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        return fail(f"--since: {exc}")
    try:
        level = Level.parse(args.level).label if args.level else None
    except ValueError as exc:
        return fail(f"--level: {exc}")
    if args.limit < 0:
        return fail("--limit: must not be negative")
    if args.matches < 0:
        return fail("--matches: must not be negative")
    config = None
    if args.tui:
        try:
            config = load_config(args.config)
        except ConfigError as exc:
            return fail(str(exc))
        problem = ui_problem(config, args.theme, "list them without it: `loopwatch history`")
        if problem:
            return fail(problem)
    store = open_store(args, config)
    if isinstance(store, str):
        return fail(store)
    try:
        if args.tui:
            from monitor.ui.app import run_history

            return int(
                run_history(
                    config,
                    store,
                    theme=args.theme,
                    agent=args.agent,
                    since=since,
                    level=level,
                    text=args.search,
                    limit=args.limit or None,
                )
                or 0
            )
        hits: list[dict] = []
        if args.search:
            rows, hits = search(
                store, args.search, agent=args.agent, since=since, level=level, limit=args.limit or None
            )
        else:
            rows = store.list_sessions(agent=args.agent, since=since, level=level, limit=args.limit or None)
        report_losses(store.lost_rows())
    finally:
        store.close()
    return _print_sessions(args, rows, hits)


def _print_sessions(args: argparse.Namespace, rows: list[dict], hits: list[dict]) -> int:
    """The sessions found (and with --search the matching events), as a table or JSON lines."""
    out = sys.stdout
    if args.json:
        by_session: dict[str, list[dict]] = {}
        for hit in hits:
            by_session.setdefault(hit["session"], []).append(hit)
        for row in rows:
            if args.search:
                row = {**row, "matches": by_session.get(row["id"], [])}
            out.write(dumps(row) + "\n")
        return 0
    if not rows:
        print("no sessions match", file=sys.stderr)
        return 0
    out.write(format_table(rows) + "\n")
    if hits:
        shown = hits[: args.matches] if args.matches else hits
        out.write(f"\nevents matching {args.search!r} (newest first):\n" + format_hits(shown) + "\n")
        if len(shown) < len(hits):
            more = f"{len(hits) - len(shown):,}" + ("+" if len(hits) >= MAX_HITS else "")
            print(f"(… {more} more matching events; --matches 0 lists all found)", file=sys.stderr)
    if args.limit and len(rows) == args.limit:
        print(f"(the newest {args.limit} sessions; --limit 0 lists all)", file=sys.stderr)
    return 0


def report_losses(runs: list[dict]) -> None:
    """Say on stderr (so --json stays clean) which runs could not record everything."""
    for run in runs:
        print(
            f"warning: the monitor run recorded until {fmt_time(run['ts'])} lost "
            f"{run['dropped'] + run['failed']:,} rows ({run['dropped']:,} dropped: queue and spill "
            f"file full; {run['failed']:,} refused by SQLite"
            + (f": {run['reason']}" if run.get("reason") else "")
            + ")",
            file=sys.stderr,
        )


def format_hits(hits: list[dict]) -> str:
    """One line per matching event: session, #seq, time, kind and tool, snippet."""
    from monitor.export import visible

    lines = []
    for hit in hits:
        what = f"{hit['type']} {hit['tool']}" if hit.get("tool") else hit["type"]
        snippet = " ".join(visible(hit.get("snippet")).split())
        lines.append(
            f"  {shorten(hit['session'], SESSION_WIDTH)}  #{hit['seq']:<5} {fmt_time(hit['ts'])}  "
            f"{shorten(what, 28):<28}  {shorten(snippet, 110)}"
        )
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    """Sessions as an aligned text table."""
    header = (
        "LAST SEEN",
        "SESSION",
        "AGENT",
        "ORIGIN",
        "EVENTS",
        "EPISODES",
        "DURATION",
        "LEVEL",
        "PEAK",
        "STATUS",
        "LOOP COST",
        "DETECTOR",
    )
    table = [header]
    for row in rows:
        first, last = row.get("first_seen"), row.get("last_seen")
        table.append(
            (
                fmt_time(last),
                shorten(row["id"], SESSION_WIDTH),
                shorten(row.get("agent") or "-", 16),
                row.get("origin") or "-",
                f"{row.get('events') or 0:,}",
                f"{row.get('episodes') or 0:,}",
                fmt_duration(last - first if first is not None and last is not None else None),
                level_label(row, "level"),
                level_label(row),
                row.get("status") or "-",
                loop_cost.short() if (loop_cost := stored_loop_cost(row)) is not None else "-",
                shorten(row.get("detector") or "-", 20),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    right = {4, 5, 10}  # numbers line up on the right
    lines = []
    for r in table:
        cells = [r[i].rjust(widths[i]) if i in right else r[i].ljust(widths[i]) for i in range(len(header))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
