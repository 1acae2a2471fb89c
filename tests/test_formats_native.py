"""The native decoder's fast paths give exactly what its careful path gives.

``NativeDecoder.decode_event`` builds the common call, result and message in
place and leaves everything else to ``decode_carefully``;
``LineDecoder.feed_lines`` parses and decodes lines in one loop and leaves
anything unusual to ``feed``.  Both must be invisible: same events (every
field), same errors, same counts.
"""

from __future__ import annotations

import dataclasses

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.events import Event
from monitor.formats.base import RecordError
from monitor.formats.lines import LineDecoder
from monitor.formats.native import NativeDecoder
from monitor.framing import LineSplitter

NOW = 1_750_000_000.5


def fields(event: Event | None):
    if event is None:
        return None
    return tuple((f.name, repr(getattr(event, f.name))) for f in dataclasses.fields(Event))


def outcome(decode, record):
    try:
        return ("event", fields(decode(record, 7, NOW)))
    except RecordError as exc:
        return ("error", str(exc))
    except Exception as exc:  # what feed() would report as "<Type> while decoding"
        return (type(exc).__name__, str(exc))


def both(record):
    fast, careful = NativeDecoder("log.jsonl", "log"), NativeDecoder("log.jsonl", "log")
    got = outcome(fast.decode_event, dict(record)), fast.skipped
    want = outcome(careful.decode_carefully, dict(record)), careful.skipped
    return got, want


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=False),
    st.sampled_from(
        ["", "x", "bash", "user", "assistant", "robot", "tool_call", "c1", "2025-06-01T10:00:00Z"]
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "command"]), st.text(max_size=5)),
)
kinds = st.sampled_from(
    [
        "tool_call",
        "tool_result",
        "message",
        "usage",
        "session_start",
        "session_end",
        "compaction",
        "thinking",
        None,
        3,
    ]
)
field_names = [
    "session",
    "ts",
    "id",
    "name",
    "args",
    "content",
    "is_error",
    "role",
    "agent",
    "pid",
    "status",
    "input_tokens",
    "extra",
]


@st.composite
def records(draw):
    record = {}
    kind = draw(kinds)
    if kind is not None or draw(st.booleans()):
        record["type"] = kind
    for name in draw(st.lists(st.sampled_from(field_names), unique=True)):
        record[name] = draw(values)
    return record


@settings(max_examples=400, deadline=None)
@given(records())
def test_fast_path_equals_careful_path_on_any_record(record):
    got, want = both(record)
    assert got == want


TYPICAL = [
    {"type": "tool_call", "id": "c1", "name": "bash", "args": {"command": "ls"}, "session": "s", "ts": 1.5},
    {"type": "tool_result", "id": "c1", "content": "a.txt", "is_error": False, "session": "s", "ts": 2.5},
    {"type": "tool_result", "id": "c1", "content": "boom", "is_error": True, "session": "s", "ts": 2.5},
    {"type": "message", "role": "assistant", "content": "hi", "session": "s", "ts": 3.5},
    # one thing off the fast path each
    {"type": "tool_call", "id": 7, "name": "bash", "args": {}, "session": "s", "ts": 1.5},
    {"type": "tool_call", "id": "c1", "name": "bash", "args": None, "session": "s", "ts": 1.5},
    {"type": "tool_call", "id": "c1", "name": "bash", "args": {}, "session": "s", "ts": 1.5, "model": "m"},
    {"type": "tool_call", "id": "c1", "name": "bash", "args": {}, "session": 12, "ts": 1.5},
    {"type": "tool_call", "id": "c1", "name": "bash", "args": {}, "session": "s", "ts": 1750000000123.0},
    {"type": "tool_call", "id": "c1", "name": "bash", "args": {}, "session": "s", "ts": 1750000000},
    {
        "type": "tool_call",
        "id": "c1",
        "name": "bash",
        "args": {},
        "session": "s",
        "ts": "2025-06-01T10:00:00",
    },
    {"type": "tool_call", "id": "c1", "name": "", "args": {}, "session": "s", "ts": 1.5},
    {"type": "tool_result", "id": "c1", "content": None, "is_error": False, "session": "s", "ts": 2.5},
    {"type": "tool_result", "id": "c1", "content": "x", "is_error": "no", "session": "s", "ts": 2.5},
    {"type": "message", "role": "robot", "content": "hi", "session": "s", "ts": 3.5},
    {"type": "message", "role": ["user"], "content": "hi", "session": "s", "ts": 3.5},
    {"type": "message", "role": "user", "content": "hi", "session": "", "ts": 3.5},
    {"type": "message", "role": "user", "content": "hi"},
    {"type": "thinking", "content": "hm", "session": "s", "ts": 1.0},
    {"type": {"a": 1}, "session": "s", "ts": 1.0},
]


def test_typical_and_unusual_records():
    for record in TYPICAL:
        got, want = both(record)
        assert got == want, record
    fast = NativeDecoder("log.jsonl", "log").decode_event(TYPICAL[0], 1, NOW)
    assert fast == Event(
        "tool_call", "s", 1.5, "log.jsonl", 1, call_id="c1", tool="bash", args={"command": "ls"}
    )
    assert fast.meta == {} and fast.facts.call_key is None


def feed_one_by_one(data: bytes, limit: int):
    decoder = LineDecoder("log.jsonl", max_line_bytes=limit)
    splitter = LineSplitter(limit)
    events = []
    for lineno, raw, size in splitter.feed(data) + splitter.flush():
        if raw is None:
            decoder.oversized(lineno, size)
        else:
            events += decoder.feed(raw, lineno, NOW)[0]
    return decoder, events


def feed_in_batches(data: bytes, limit: int, batch: int, newlines: bool = False):
    decoder = LineDecoder("log.jsonl", max_line_bytes=limit)
    splitter = LineSplitter(limit, newlines=newlines)
    lines = splitter.feed(data) + splitter.flush()
    events = []
    for start in range(0, len(lines), batch):
        events += decoder.feed_lines(lines[start : start + batch], NOW)
    return decoder, events


def test_feed_lines_equals_feed_line_by_line():
    good = [orjson.dumps(record) for record in TYPICAL[:4]]
    lines = [
        b"",
        b"   ",
        b"\t" + good[0] + b"  \r",
        good[1],
        b"[1, 2]",
        b"42",
        b"{not json",
        b"\xff" + good[2][1:],
        orjson.dumps({"type": "tool_result", "id": "c1", "content": "caf\xe9", "is_error": False})[:-1]
        + b',"x":"\xff"}',
        good[3] + b"x" * 0,
        b"{" + b" " * 300 + b"}",
        *good,
        orjson.dumps(TYPICAL[6]),
        orjson.dumps(TYPICAL[13]),
        orjson.dumps(TYPICAL[18]),
        orjson.dumps({"type": "message", "role": "user", "content": "y" * 400}),
    ]
    # the first line decides the format: try starting with each kind of line
    for first in range(len(lines)):
        data = b"\n".join(lines[first:] + lines[:first]) + b"\n" + good[0]
        for batch, newlines in ((1, False), (3, False), (64, False), (3, True), (64, True)):
            want_decoder, want = feed_one_by_one(data, 256)
            got_decoder, got = feed_in_batches(data, 256, batch, newlines)
            assert [fields(e) for e in got] == [fields(e) for e in want]
            assert got_decoder.problems == want_decoder.problems
            assert (got_decoder.lines, got_decoder.events, got_decoder.problem_count, got_decoder.format) == (
                want_decoder.lines,
                want_decoder.events,
                want_decoder.problem_count,
                want_decoder.format,
            )
