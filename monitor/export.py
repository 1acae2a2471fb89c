"""Export one stored session: a JSON document and a Markdown report.

``loopwatch show SESSION --format json|markdown`` and the detail view's export
key both use :func:`session_document` (read from the store) and
:func:`markdown_report` / :func:`json_report`; :func:`write_exports` writes the
files safely (never through a symlink, never into a FIFO: a new file beside
the target, then an atomic rename).

The Markdown report reads on its own: a summary, its loop episodes (one per
loop, however many repeats), a timeline of detections and operator actions,
each detection with its nudge and its evidence events, the nudges sent.  The
store keeps the first detection of each episode's rungs, not one per repeat,
so the export of a long-looping session stays small.  Agent text goes into fenced code blocks whose fence is longer
than any backtick run inside, with control characters made visible, so
neither Markdown nor a terminal interprets it.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from monitor.cost import spend_text, stored_loop_cost
from monitor.text import printable

#: Evidence events quoted per detection in the Markdown report (the JSON has all).
EVIDENCE_SHOWN = 12


def visible(text: Any) -> str:
    """``text`` with control characters (ESC, BEL, …) and bidi controls shown as pictures; newlines kept."""
    return printable(text or "")


def when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def session_document(store: Any, session: str) -> dict[str, Any]:
    """Everything recorded about ``session``: row, loop episodes (each with its
    rungs), detections (each with its evidence events), actions, and how many
    events are stored."""
    row = store.get_session(session)
    if row is None:
        raise LookupError(f"no stored session {session!r}")
    detections = store.detections(session)
    wanted: set[int] = {
        ref["seq"]
        for d in detections
        for ref in d.get("evidence") or ()
        if isinstance(ref, dict) and isinstance(ref.get("seq"), int)
    }
    events: dict[int, dict] = {}
    for seq in sorted(wanted):
        for event in store.events(session, offset=max(0, seq - 1), limit=1):
            if event.get("seq") == seq:
                events[seq] = event
    for detection in detections:
        seqs = [ref.get("seq") for ref in detection.get("evidence") or () if isinstance(ref, dict)]
        detection["evidence_events"] = [events[s] for s in seqs if s in events]
    loops = stored_loop_cost(row)
    return {
        "session": row,
        "events_stored": store.count_events(session),
        "loop_cost": loops.to_dict() if loops is not None else None,
        "episodes": _episodes(store, session),
        "detections": detections,
        "actions": store.actions(session),
    }


def _episodes(store: Any, session: str) -> list[dict[str, Any]]:
    """The session's episodes, each with the rungs it climbed."""
    episodes = store.episodes(session)
    rungs: dict[Any, list[dict[str, Any]]] = {}
    for rung in store.episode_rungs(session):
        rungs.setdefault(rung.get("episode"), []).append(
            {k: rung.get(k) for k in ("ts", "seq", "level", "detector", "message", "count")}
        )
    for episode in episodes:
        episode["rungs"] = rungs.get(episode.get("id"), [])
    return episodes


def json_report(document: dict[str, Any]) -> str:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n"


def fenced(text: str, info: str = "") -> str:
    """``text`` in a code fence longer than any backtick run in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{visible(text).rstrip()}\n{fence}"


def inline(text: Any) -> str:
    """Agent text on one Markdown line (no markup effect, no control characters)."""
    flat = " ".join(visible(text).split())
    return re.sub(r"([\\`*_{}\[\]<>#|])", r"\\\1", flat)


def event_text(event: dict[str, Any]) -> str:
    """One event as plain text: what it is, its arguments, its content."""
    head = f"#{event.get('seq')} {event.get('type')}"
    if event.get("tool"):
        head += f" {event['tool']}"
    if event.get("is_error"):
        head += " (error)"
    head += f" at {when(event.get('ts'))}"
    if event.get("file"):
        head += f" — {event['file']}" + (f":{event['line']}" if event.get("line") is not None else "")
    parts = [head]
    if event.get("args"):
        parts.append(orjson.dumps(event["args"], option=orjson.OPT_INDENT_2).decode())
    if event.get("content"):
        parts.append(str(event["content"]))
    return "\n".join(parts)


def _timeline(document: dict[str, Any]) -> list[str]:
    items: list[tuple[float, int, str]] = []
    for d in document["detections"]:
        items.append(
            (
                d.get("ts") or 0.0,
                0,
                f"- {when(d.get('ts'))} — **{d.get('level')}** "
                f"`{d.get('detector')}` at event #{d.get('seq')}: {inline(d.get('message'))}"
                + (f" _({inline(d['suppressed'])})_" if d.get("suppressed") else "")
                + (f" — loop so far {spend_text(d['cost'])}" if spend_text(d.get("cost")) else ""),
            )
        )
    for a in document["actions"]:
        detail = f" — {inline(a['detail'])}" if a.get("detail") else ""
        items.append(
            (
                a.get("ts") or 0.0,
                1,
                f"- {when(a.get('ts'))} — operator **{a.get('kind')}** "
                f"by {inline(a.get('who'))}: {a.get('outcome')}{detail}",
            )
        )
    return [line for _, _, line in sorted(items, key=lambda item: (item[0], item[1]))] or [
        "_Nothing happened._"
    ]


def markdown_report(document: dict[str, Any]) -> str:
    """The session as a Markdown report that reads well on its own."""
    s = document["session"]
    first, last = s.get("first_seen"), s.get("last_seen")
    seconds = int(last - first) if first and last else 0
    lines = [
        f"# loopwatch session `{inline(s['id'])}`",
        "",
        f"Exported {when(datetime.now().timestamp())}. Times are local.",
        "",
        "| | |",
        "|---|---|",
        f"| Agent | {inline(s.get('agent') or '-')} |",
        f"| Source | {inline(s.get('source') or '-')} |",
        f"| Seen | {when(first)} → {when(last)} ({seconds // 60} min {seconds % 60} s) |",
        f"| Status | {s.get('status') or '-'} |",
        f"| Level | {s.get('level') or 'watching'} (peak {s.get('peak') or s.get('level') or 'watching'})"
        + (f" — `{s['detector']}`: {inline(s.get('reason'))}" if s.get("detector") else "")
        + " |",
        f"| Events | {s.get('events') or 0:,} ({document['events_stored']:,} stored) |",
        f"| Loop episodes | {len(document.get('episodes') or [])} |",
        f"| Detections | {len(document['detections'])} (the first of each rung of each episode) |",
        f"| Loop cost | {spend_text(document.get('loop_cost')) or '-'} |",
        f"| Operator actions | {len(document['actions'])} |",
        "",
        "## Timeline",
        "",
        *_timeline(document),
        "",
        "## Loop episodes",
        "",
        *_episode_lines(document.get("episodes") or []),
        "",
        "## Detections",
        "",
    ]
    if not document["detections"]:
        lines.append("_No detections._")
    for n, d in enumerate(document["detections"], 1):
        lines += _detection_lines(n, d)
    lines += _nudge_lines(document["actions"])
    lines += _last_events_lines(document.get("events") or [])
    return "\n".join(lines).rstrip() + "\n"


def _episode_lines(episodes: list[dict[str, Any]]) -> list[str]:
    """One paragraph per episode: its peak, detectors, count, span and how it ended."""
    if not episodes:
        return ["_No loop episodes._"]
    lines = []
    for e in episodes:
        state = f"closed: {e['closed']}" if e.get("state") == "closed" else "open"
        rungs = " → ".join(r.get("level") or "?" for r in e.get("rungs") or [])
        lines += [
            f"- **Episode {e.get('number')}** — **{e.get('peak')}** — "
            f"{', '.join(f'`{inline(d)}`' for d in e.get('detectors') or [])}: {inline(e.get('message'))} "
            f"(×{e.get('count') or 0}, {e.get('detections') or 0} detections, events "
            f"#{e.get('first_seq')}–#{e.get('last_seq')}, {when(e.get('first_ts'))} → {when(e.get('last_ts'))}; "
            f"{state})" + (f"; rungs {rungs}" if rungs else ""),
        ]
    return lines


def _last_events_lines(events: list[dict[str, Any]]) -> list[str]:
    """``show --events N``'s last events, each quoted as the evidence is."""
    if not events:
        return []
    lines = ["", f"## Last {len(events)} events", ""]
    for event in events:
        lines += [fenced(event_text(event)), ""]
    return lines


def _detection_lines(n: int, d: dict[str, Any]) -> list[str]:
    """The report's section on detection ``n``: message, loop cost, nudge, evidence."""
    lines = [
        f"### {n}. {d.get('level')} — `{d.get('detector')}` at event #{d.get('seq')}",
        "",
        f"{inline(d.get('message'))} (count {d.get('count') or 0}, score {d.get('score') or 0:.2f},"
        f" {when(d.get('ts'))})",
        "",
    ]
    if spend_text(d.get("cost")):
        lines += [f"Loop so far: {spend_text(d['cost'])} since {when(d['cost'].get('since'))}.", ""]
    if d.get("nudge"):
        lines += ["Nudge:", "", fenced(d["nudge"]), ""]
    evidence = d.get("evidence_events") or []
    if evidence:
        lines += [f"Evidence ({len(evidence)} events):", ""]
        for event in evidence[:EVIDENCE_SHOWN]:
            lines += [fenced(event_text(event)), ""]
        if len(evidence) > EVIDENCE_SHOWN:
            lines += [f"_… {len(evidence) - EVIDENCE_SHOWN} more in the JSON export._", ""]
    return lines


def _nudge_lines(actions: list[dict[str, Any]]) -> list[str]:
    """The report's list of the nudges the operator sent, with their outcome."""
    sent = [a for a in actions if a.get("kind") == "inject"]
    lines = ["## Nudges sent", ""]
    if not sent:
        lines.append("_None._")
    for a in sent:
        lines += [
            f"- {when(a.get('ts'))} by {inline(a.get('who'))}: **{a.get('outcome')}**"
            + (f" — {inline(a['detail'])}" if a.get("detail") else ""),
            "",
            fenced(a.get("text") or ""),
            "",
        ]
    return lines


def safe_name(session: str) -> str:
    """A file name stem for ``session`` (anything unusual becomes ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", session).strip(".") or "session"


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a new temporary file and an atomic rename:
    an existing symlink or FIFO at ``path`` is replaced, never followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_exports(store: Any, session: str, directory: Path) -> list[Path]:
    """``<session>.md`` and ``<session>.json`` in ``directory``; returns their paths."""
    document = session_document(store, session)
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"loopwatch-{safe_name(session)}"
    paths = [directory / f"{stem}.md", directory / f"{stem}.json"]
    write_file(paths[0], markdown_report(document))
    write_file(paths[1], json_report(document))
    return paths
