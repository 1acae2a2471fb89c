"""One line for a file that is none of the supported formats.

A binary file, or a JSON document nobody writes agent logs in, is one piece
of bad input, not one problem per physical line: :func:`is_binary` spots the
first kind before any line is decoded, :func:`describe` says what a file is
(its top-level keys, its first record) so the user sees why it was refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from monitor.formats.base import Problem
from monitor.formats.compressed import Decompressed, codec_of
from monitor.safeopen import open_regular_stream

#: What ``scan`` reads, as the one-line refusal lists it.
SUPPORTED = (
    "native loopwatch JSONL, Claude Code transcripts, Codex rollouts, chat messages "
    "(OpenAI / Anthropic, mini-swe-agent .traj.json; a JSON document, array or JSONL), "
    "SWE-agent .traj, Gemini CLI chats, saved histories and stream-json, Trae Agent trajectories, GitHub Copilot CLI events.jsonl, Cursor agent transcripts, Aider .aider.chat.history.md, Cline / Roo Code api_conversation_history.json, OpenHands events (V0 or V1 JSON, a V1 conversation folder) and evaluation / resolver output.jsonl, Vorflux span exports, pi-agent / OpenClaw sessions, Anthropic managed-agents event logs, OpenCode opencode.db and storage/, Goose sessions.db"
)
#: Bytes looked at to tell binary from text.
PEEK_BYTES = 8192
#: Largest file parsed whole to say what document it is.
DESCRIBE_MAX_BYTES = 64 * 1024 * 1024
_KEYS_SHOWN = 6


def is_binary(head: bytes) -> bool:
    """True for bytes no text log holds: a NUL, or a quarter of them not UTF-8
    (a log with some Latin-1 in it is text, reported line by line)."""
    if b"\0" in head:
        return True
    if head.isascii():
        return False
    text = head.decode("utf-8", errors="replace")
    return text.count("\ufffd") * 4 > len(text)


def _keys(value: dict[str, Any]) -> str:
    names = [str(k) for k in list(value)[:_KEYS_SHOWN]]
    return ", ".join(names) + (", …" if len(value) > _KEYS_SHOWN else "")


def _what(value: object) -> str:
    if isinstance(value, dict):
        return f"a JSON document with keys {_keys(value)}" if value else "an empty JSON object"
    if isinstance(value, list):
        first = value[0] if value else None
        tail = f" (the first an object with keys {_keys(first)})" if isinstance(first, dict) and first else ""
        return f"a JSON array of {len(value)} item(s){tail}"
    return f"a JSON {type(value).__name__}"


def describe(path: Path, first_problem: str | None = None) -> str:
    """What ``path`` holds, in a phrase (``a JSON document with keys info, …``)."""
    try:
        size = path.stat().st_size
        raw_file = open_regular_stream(path, follow=True)  # (never blocks: monitor/safeopen.py)
        with Decompressed(path, fileobj=raw_file) if codec_of(path) else raw_file as stream:
            head = stream.read(PEEK_BYTES)
            if is_binary(head):
                packed = f" once decompressed ({codec_of(path)})" if codec_of(path) else ""
                return f"binary data ({size:,} bytes){packed}, not a text log"
            raw = head + stream.read(DESCRIBE_MAX_BYTES) if size <= DESCRIBE_MAX_BYTES else None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if raw is not None:
        try:
            return _what(orjson.loads(raw))
        except orjson.JSONDecodeError:
            pass
    for line in head.splitlines():
        if line.strip():
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                break
            if isinstance(record, dict):
                return f"JSON lines whose first record has keys {_keys(record)}"
            return f"JSON lines whose first record is {_what(record)}"
    why = f" ({first_problem})" if first_problem else ""
    return f"text that is not JSON lines{why}"


def refusal(source: str, what: str) -> Problem:
    """The one problem reported for a file of no supported format."""
    return Problem(source, None, f"not a supported format: {what}; supported: {SUPPORTED}")
