"""One event in full, as a document: for the event view and the clipboard.

:func:`event_record` turns a live :class:`~monitor.events.Event` or a stored
``events()`` dict into one plain dict; :func:`event_document` renders it as a
:class:`rich.text.Text` (tool arguments pretty-printed as JSON, results and
messages in full, every character literal) and :func:`event_plain` as plain
text for the clipboard.  Nothing here parses markup; control characters
become visible pictures (see :mod:`monitor.ui.literal`).
"""

from __future__ import annotations

from typing import Any

import orjson
from rich.style import Style
from rich.text import Text

from monitor.events import Event
from monitor.ui.literal import literal, visible
from monitor.ui.render import DEFAULT_PALETTE, Palette, date_time

FIELDS = (
    "seq",
    "ts",
    "type",
    "session",
    "agent",
    "role",
    "tool",
    "call_id",
    "args",
    "is_error",
    "content",
    "content_length",
    "file",
    "line",
    "status",
    "pid",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "meta",
)


def event_record(event: Any) -> dict[str, Any]:
    """The fields of ``event`` (an :class:`Event` or a stored row dict)."""
    if isinstance(event, Event):
        return {
            "seq": event.seq,
            "ts": event.ts,
            "type": event.kind.value,
            "session": event.session,
            "agent": event.agent,
            "role": event.role,
            "tool": event.tool or (event.call.tool if event.call is not None else None),
            "call_id": event.call_id,
            "args": event.args,
            "is_error": event.is_error,
            "content": event.content,
            "content_length": len(event.content or ""),
            "file": event.source,
            "line": event.line,
            "status": event.status,
            "pid": event.pid,
            "input_tokens": event.input_tokens,
            "output_tokens": event.output_tokens,
            "cost_usd": event.cost_usd,
            "meta": event.meta or {},
        }
    record = {name: event.get(name) for name in FIELDS}
    if isinstance(record["args"], (str, bytes)):
        try:
            record["args"] = orjson.loads(record["args"])
        except orjson.JSONDecodeError:
            pass
    record["content"] = record["content"] or ""
    record["content_length"] = record["content_length"] or len(record["content"])
    return record


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (strings that are not JSON stay as they are)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def title_line(record: dict[str, Any]) -> str:
    """``#12  tool_call  bash  2026-01-01 09:00:07`` (plain; seconds: steps of a loop are seconds apart)."""
    parts = [f"#{record.get('seq') or 0}", str(record.get("type") or "?")]
    if record.get("tool"):
        parts.append(str(record["tool"]))
    if record.get("role"):
        parts.append(f"({record['role']})")
    if record.get("is_error"):
        parts.append("ERROR")
    parts.append(date_time(record.get("ts"), seconds=True))
    return "  ".join(parts)


def _facts(record: dict[str, Any]) -> list[tuple[str, str]]:
    facts = []
    where = record.get("file") or ""
    if record.get("line") is not None:
        where = f"{where}:{record['line']}"
    for label, value in (
        ("session", record.get("session")),
        ("agent", record.get("agent")),
        ("source", where),
        ("call id", record.get("call_id")),
        ("status", record.get("status")),
        ("pid", record.get("pid")),
    ):
        if value not in (None, ""):
            facts.append((label, str(value)))
    tokens = [f"{record[k]:,} {k.split('_')[0]}" for k in ("input_tokens", "output_tokens") if record.get(k)]
    if tokens:
        facts.append(("tokens", " / ".join(tokens)))
    if record.get("cost_usd"):
        facts.append(("cost", f"${record['cost_usd']:.4f}"))
    return facts


def _clip_note(record: dict[str, Any]) -> str:
    shown, full = len(record.get("content") or ""), int(record.get("content_length") or 0)
    if full > shown:
        return f"(the database keeps the head and tail of these {full:,} characters)"
    return ""


def event_sections(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(heading, body) pairs: arguments, content, metadata (plain strings)."""
    sections = []
    if record.get("args"):
        sections.append(("Arguments", pretty_json(record["args"])))
    if record.get("content"):
        heading = (
            "Error"
            if record.get("is_error")
            else {"tool_result": "Result", "message": "Message"}.get(str(record.get("type")), "Content")
        )
        sections.append((heading, record["content"]))
    if record.get("meta"):
        sections.append(("Metadata", pretty_json(record["meta"])))
    return sections


def event_document(record: dict[str, Any], palette: Palette = DEFAULT_PALETTE, search: str = "") -> Text:
    """The whole event as literal text; ``search`` matches are highlighted."""
    doc = Text()
    doc.append_text(
        literal(
            title_line(record),
            style=palette.fg("level-critical", bold=True) if record.get("is_error") else Style(bold=True),
        )
    )
    doc.append("\n")
    for label, value in _facts(record):
        doc.append(f"{label:>9}  ", style="dim")
        doc.append_text(literal(value, multiline=True))
        doc.append("\n")
    for heading, body in event_sections(record):
        doc.append(f"\n── {heading} ", style="bold")
        doc.append("─" * 8 + "\n", style="dim")
        doc.append_text(literal(body, multiline=True))
        doc.append("\n")
        if heading not in ("Arguments", "Metadata") and _clip_note(record):
            doc.append(_clip_note(record) + "\n", style="dim italic")
    if search:
        doc.highlight_words([search], palette.bg("repeat-highlight") + Style(bold=True), case_sensitive=False)
    return doc


def event_plain(record: dict[str, Any]) -> str:
    """The whole event as plain text (for the clipboard and exports)."""
    lines = [visible(title_line(record))]
    lines += [f"{label}: {visible(value)}" for label, value in _facts(record)]
    for heading, body in event_sections(record):
        lines += ["", f"{heading}:", visible(body, multiline=True)]
    return "\n".join(lines) + "\n"
