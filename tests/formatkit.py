"""Helpers for format tests: decode a file the way ``scan`` does, count what came out."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from monitor.events import Event, Kind
from monitor.formats.lines import LineDecoder
from monitor.scan import read_events


def decode_file(path: Path | str, fmt: str | None = None) -> tuple[list[Event], LineDecoder]:
    """Every event of a line-format file, and the decoder (for its problems and format)."""
    decoder = LineDecoder(str(path), fmt=fmt)
    return list(read_events(str(path), decoder)), decoder


def counts(events: Iterable[Event]) -> dict[str, int]:
    """How many tool calls, results, user and assistant messages."""
    tally: Counter[str] = Counter()
    for event in events:
        if event.kind is Kind.MESSAGE:
            tally[f"{event.role}_messages"] += 1
        elif event.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT):
            tally[f"{event.kind.value}s"] += 1
        else:
            tally[event.kind.value] += 1
    return dict(tally)


def write_jsonl(path: Path, records: Iterable[dict[str, Any] | str]) -> Path:
    """Write records (dicts as JSON, strings verbatim) one a line."""
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(record if isinstance(record, str) else json.dumps(record))
            out.write("\n")
    return path
