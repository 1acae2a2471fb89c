"""``loopwatch show SESSION``: one stored session's summary, detections and actions."""

from __future__ import annotations

import argparse
import sys

from monitor.commands.common import fail
from monitor.commands.stored import (
    add_db_options,
    dumps,
    fmt_duration,
    fmt_time,
    level_label,
    open_store,
    resolve_session,
)
from monitor.text import printable

HELP = "show one recorded session: summary, detections and operator actions"

#: Detections printed in the text view (the newest; --json has them all).
MAX_DETECTIONS = 200


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="session id (or a unique prefix)")
    add_db_options(parser)
    parser.add_argument(
        "--events", type=int, default=0, metavar="N", help="also list the last N stored events"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON object: session, detections, actions (and events)"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="json: the export document (detections with their evidence events); "
        "markdown: a report that reads on its own (same as the detail view's "
        "export key)",
    )


def run(args: argparse.Namespace) -> int:
    from monitor.store import StoreError

    try:
        return _run(args)
    except StoreError as exc:  # a damaged database found while reading: what to do, no traceback
        return fail(str(exc))


def _run(args: argparse.Namespace) -> int:
    if args.events < 0:
        return fail("--events: must not be negative")
    if args.json and args.format != "text":
        return fail(
            f"--json and --format {args.format}: choose one (--json is the summary as JSON; "
            "--format json the export document with each detection's evidence)"
        )
    store = open_store(args)
    if isinstance(store, str):
        return fail(store)
    try:
        try:
            session_id = resolve_session(store, args.session)
        except LookupError as exc:
            return fail(str(exc))
        if args.format != "text":
            from monitor.export import json_report, markdown_report, session_document

            document = session_document(store, session_id)
            if args.events:
                stored = document["events_stored"]
                document["events"] = store.events(
                    session_id, offset=max(stored - args.events, 0), limit=args.events
                )
            report = json_report(document) if args.format == "json" else markdown_report(document)
            sys.stdout.write(report)
            return 0
        session = store.get_session(session_id)
        stored = store.count_events(session_id)
        detections = store.detections(session_id)
        episodes = store.episodes(session_id)
        actions = store.actions(session_id)
        marked = store.false_positives(session_id).get(session_id, [])
        events = (
            store.events(session_id, offset=max(stored - args.events, 0), limit=args.events)
            if args.events
            else []
        )
    finally:
        store.close()
    if args.json:
        document = {
            "session": session,
            "events_stored": stored,
            "episodes": episodes,
            "detections": detections,
            "actions": actions,
            "false_positives": marked,
        }
        if args.events:
            document["events"] = events
        sys.stdout.write(dumps(document) + "\n")
        return 0
    sys.stdout.write(format_session(session, stored, detections, actions, events, episodes, marked) + "\n")
    return 0


def format_session(
    session: dict,
    stored: int,
    detections: list[dict],
    actions: list[dict],
    events: list[dict],
    episodes: list[dict] | None = None,
    false_positives: list[dict] | None = None,
) -> str:
    first, last = session.get("first_seen"), session.get("last_seen")
    duration = fmt_duration(last - first if first is not None and last is not None else None)
    total = session.get("events") or 0
    kept = f"{total:,}" if stored == total else f"{total:,} ({stored:,} kept; retention)"
    lines = [
        f"session {session['id']}",
        f"  agent      {session.get('agent') or '-'}   origin {session.get('origin') or '-'}"
        f"   pid {session.get('pid') if session.get('pid') is not None else '-'}"
        f"   parent {session.get('parent') or '-'}",
        f"  source     {session.get('source') or '-'}",
        f"  seen       {fmt_time(first)} → {fmt_time(last)}  ({duration})",
        f"  status     {session.get('status') or '-'}",
        f"  level      {level_label(session, 'level')} (peak {level_label(session)})"
        + (f" — {session['detector']}: {session['reason']}" if session.get("detector") else ""),
        f"  events     {kept}",
        "",
        *_episode_lines(episodes or []),
        *_false_positive_lines(false_positives or []),
        "",
        f"detections ({len(detections)}: the first of each rung)",
    ]
    if not detections:
        lines.append("  none")
    shown = detections[-MAX_DETECTIONS:]
    if len(detections) > len(shown):
        lines.append(f"  … {len(detections) - len(shown)} earlier (see --json)")
    for d in shown:
        where = d.get("file") or ""
        if d.get("line") is not None:
            where += f":{d['line']}"
        lines.append(
            f"  {fmt_time(d['ts'])}  {d['level']:<9} {d['detector']:<17} "
            f"×{d.get('count') or 0:<3} {d.get('message') or ''}"
            + (f"  [{d['suppressed']}]" if d.get("suppressed") else "")
        )
        if where:
            lines.append(f"  {'':19}  at {where}")
    lines += ["", f"actions ({len(actions)})"]
    if not actions:
        lines.append("  none")
    for a in actions:
        text = f" {a['text']!r}" if a.get("text") else ""
        detail = f" — {a['detail']}" if a.get("detail") else ""
        lines.append(f"  {fmt_time(a['ts'])}  {a['kind']:<14} by {a['who']:<10} {a['outcome']}{detail}{text}")
    if events:
        lines += ["", f"last {len(events)} event(s)"]
        for e in events:
            lines.append(f"  #{e['seq']:<6} {fmt_time(e['ts'])}  {_event_summary(e)}")
    return "\n".join(lines)


def _episode_lines(episodes: list[dict]) -> list[str]:
    """``show``'s loop episodes: one line each (the latest MAX_DETECTIONS)."""
    lines = [f"loop episodes ({len(episodes)})"]
    if not episodes:
        lines.append("  none")
    shown = episodes[-MAX_DETECTIONS:]
    if len(episodes) > len(shown):
        lines.append(f"  … {len(episodes) - len(shown)} earlier (see --json)")
    for e in shown:
        state = f"closed: {e['closed']}" if e.get("state") == "closed" else "open"
        lines.append(
            printable(
                f"  #{e['number']:<3} {fmt_time(e['first_ts'])}  {e['peak']:<9} {'+'.join(e['detectors'])}  "
                f"×{e.get('count') or 0} {e.get('message') or ''}"
            )
        )
        lines.append(
            f"  {'':24}{e.get('detections') or 0} detection(s), events #{e.get('first_seq')}–#{e.get('last_seq')}"
            f" until {fmt_time(e['last_ts'])}; {state}"
        )
    return lines


def _false_positive_lines(marks: list[dict]) -> list[str]:
    """The patterns marked a false positive: muted in this session since then (a restart keeps them)."""
    if not marks:
        return []
    lines = ["", f"false positives ({len(marks)}: patterns no longer flagged in this session)"]
    for mark in marks:
        lines.append(
            printable(
                f"  since {fmt_time(mark['since'])}  {mark['detector']:<17} {_cut(mark['pattern'], 90)}"
            )
        )
    return lines


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _event_summary(event: dict, width: int = 100) -> str:
    from monitor.store.rows import event_from_row

    return event_from_row(event).summary(width)
