"""The OTLP pending file: what a stop leaves is written safely and read back whole.

Real files, a real FIFO and real symbolic links in tmp_path; the flood and the restart
are in tests/test_otlp_stop.py.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from monitor.events import Event, Kind
from monitor.sources import otlp_pending


def _events(count: int) -> list[Event]:
    events = [
        Event(
            Kind.SESSION_START, "s-1", 1.5, "otlp:claude-code@h", agent="claude-code", meta={"origin": "otlp"}
        )
    ]
    for n in range(count):
        events.append(
            Event(
                Kind.TOOL_CALL,
                "s-1",
                2.0 + n,
                "otlp:claude-code@h",
                call_id=f"c{n}",
                tool="Bash",
                args={"command": "ls ∂"},
            )
        )
        events.append(
            Event(
                Kind.TOOL_RESULT,
                "s-1",
                2.5 + n,
                "otlp:claude-code@h",
                call_id=f"c{n}",
                content="no\u202e",
                is_error=True,
            )
        )
    events.append(
        Event(
            Kind.USAGE,
            "s-1",
            9.0,
            "otlp:x@h",
            input_tokens=10,
            output_tokens=2,
            cost_usd=0.01,
            meta={"model": "m"},
        )
    )
    return events  # fmt: skip


def _same(a: Event, b: Event) -> bool:
    return all(getattr(a, name) == getattr(b, name) for name in otlp_pending.FIELDS)


def test_written_private_and_read_back_exactly(tmp_path: Path):
    state = tmp_path / "state"
    events = _events(1500)  # more than one line's chunk
    path, problem = otlp_pending.park(state, events)
    assert problem == "" and path is not None and path.parent == state
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600 and stat.S_IMODE(os.lstat(state).st_mode) == 0o700
    assert otlp_pending.waiting(state) == [path]
    got, problems, files = otlp_pending.take(state)
    assert (problems, files, len(got)) == ([], 1, len(events))
    assert all(_same(a, b) for a, b in zip(events, got, strict=True))
    assert otlp_pending.waiting(state) == []


def test_a_damaged_line_costs_that_line_only(tmp_path: Path):
    state = tmp_path / "state"
    path, _ = otlp_pending.park(state, _events(1500))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b'[["not", "a row"]]\n' + b"".join(lines[1:]))
    got, problems, _ = otlp_pending.take(state)
    assert len(got) == 3002 and [p.line for p in problems] == [2]


def test_never_through_a_link_a_fifo_or_a_shared_directory(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    path, problem = otlp_pending.park(shared, _events(1))
    assert path is None and "writable by others" in problem
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    path, problem = otlp_pending.park(link, _events(1))
    assert path is None and "symbolic link" in problem
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "otlp-pending-00000000000000000001-1.jsonl")
    (state / "otlp-pending-00000000000000000002-1.jsonl").symlink_to(tmp_path / "victim")
    (tmp_path / "victim").write_text("[]\n")
    got, problems, _ = otlp_pending.take(state)  # returns: a FIFO is never opened for reading
    assert got == [] and len(problems) == 2
    assert all("not read" in p.reason for p in problems)
    assert (tmp_path / "victim").exists()  # a link planted there is neither followed nor removed
