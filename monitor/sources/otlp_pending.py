"""OTLP events answered 200 but not yet processed when the monitor stops.

An exporter answered 200 never sends its batch again, and processing a
backlog of up to :data:`~monitor.sources.otlp.MAX_BACKLOG_EVENTS` events at
stop took seconds under a flood (SIGTERM must stop the monitor within 2 s).
So at stop what the receiver's lane still holds is written, as native
records, to a pending file in the state directory
(``otlp-pending-<time>-<pid>.jsonl``, mode 0600, created ``O_EXCL |
O_NOFOLLOW`` in a private directory of ours: never through a link, never a
FIFO), and the next ``watch --otlp`` reads every pending file first (oldest
first), hands their events to the hub before any new request, and removes
them.  ``doctor`` says when one is waiting.  Nothing is lost, and stopping
costs one write however long the backlog (50,000 events: a few MB).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from monitor.events import Event, Kind
from monitor.formats.base import Problem
from monitor.formats.native import NativeDecoder

PREFIX = "otlp-pending-"
SUFFIX = ".jsonl"
#: Pending files read at one start (each holds one stop's backlog).
MAX_FILES = 64

_BY_KIND: dict[Kind, tuple[tuple[str, str], ...]] = {
    Kind.SESSION_START: (("agent", "agent"), ("pid", "pid"), ("parent", "parent")),
    Kind.MESSAGE: (("role", "role"), ("content", "content")),
    Kind.TOOL_CALL: (("call_id", "id"), ("tool", "name"), ("args", "args")),
    Kind.TOOL_RESULT: (("call_id", "id"), ("content", "content"), ("is_error", "is_error")),
    Kind.USAGE: (
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cost_usd", "cost_usd"),
    ),
    Kind.SESSION_END: (("status", "status"),),
}


def native(event: Event) -> dict[str, Any]:
    """``event`` as the native record that decodes back to it (its meta as extra fields)."""
    record: dict[str, Any] = {"type": event.kind.value, "session": event.session, "ts": event.ts}
    for attribute, key in _BY_KIND.get(event.kind, ()):
        value = getattr(event, attribute)
        if value is not None:
            record[key] = value
    if event.kind is Kind.SESSION_START:
        record["meta"] = event.meta
    else:
        record.update({k: v for k, v in event.meta.items() if k not in record})
    return record


def _private(directory: Path) -> str | None:
    from monitor.hooks import state_dir_problem

    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make {directory}: {exc.strerror or exc}"
    return state_dir_problem(directory)


def park(directory: Path, events: list[Event]) -> tuple[Path | None, str]:
    """Write ``events`` to a new pending file: (its path, "") or (None, why not)."""
    if not events:
        return None, ""
    problem = _private(directory)
    if problem is not None:
        return None, problem
    path = directory / f"{PREFIX}{time.time_ns():020d}-{os.getpid()}{SUFFIX}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        return None, f"cannot create {path}: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            for event in events:
                line = {"source": event.source, "record": native(event)}
                stream.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
    except (OSError, ValueError) as exc:
        path.unlink(missing_ok=True)
        return None, f"cannot write {path}: {exc}"
    return path, ""


def waiting(directory: Path) -> list[Path]:
    """The pending files in ``directory``, oldest first."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(PREFIX) and n.endswith(SUFFIX))
    except OSError:
        return []
    return [directory / name for name in names[:MAX_FILES]]


def read(path: Path) -> tuple[list[Event], list[Problem]]:
    """The events of one pending file (a bad line is a problem, its neighbours kept)."""
    from monitor.safeopen import open_regular_stream

    events: list[Event] = []
    problems: list[Problem] = []
    decoders: dict[str, NativeDecoder] = {}
    now = time.time()
    with open_regular_stream(path) as stream:  # never a link, a FIFO or a device
        for number, raw in enumerate(stream, 1):
            try:
                line = json.loads(raw)
                source = str(line["source"])
                decoder = decoders.get(source)
                if decoder is None:
                    decoder = decoders[source] = NativeDecoder(source, "otlp")
                events.extend(decoder.decode(line["record"], None, now))
            except (ValueError, TypeError, KeyError, RecursionError) as exc:
                problems.append(Problem(str(path), number, f"pending OTLP record: {exc}"))
    return events, problems


def take(directory: Path) -> tuple[list[Event], list[Problem], int]:
    """Every pending file's events, the files removed: (events, problems, files read)."""
    events: list[Event] = []
    problems: list[Problem] = []
    files = waiting(directory)
    if files and _private(directory) is not None:
        problem = _private(directory) or ""
        return [], [Problem(str(directory), None, f"pending OTLP records not read: {problem}")], 0
    for path in files:
        try:
            got, bad = read(path)
        except OSError as exc:
            problems.append(Problem(str(path), None, f"pending OTLP records not read: {exc.strerror or exc}"))
            continue
        events.extend(got)
        problems.extend(bad)
        path.unlink(missing_ok=True)
    return events, problems, len(files)


__all__ = ["native", "park", "read", "take", "waiting"]
