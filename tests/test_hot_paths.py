"""The hot path's shortcuts give exactly what the plain computations give.

Several per-event computations have a fast path (substring tests instead of a
regex, a skipped dump, turn detectors skipped when no turn completed, …).
Each test here checks a shortcut against the straightforward computation it
replaces, so that a later edit of one side cannot silently change behaviour.
"""

from __future__ import annotations

import gc
import random

import orjson
import pytest

from monitor.config import build_config
from monitor.demo.synthetic import records
from monitor.detect.analysis.memo import TextMemo
from monitor.detect.analysis.signatures import EMPTY_HANDED, PRIMARY_KEYS, _empty_handed, fingerprint
from monitor.detect.engine import Engine
from monitor.events import Event, EventRef, Kind
from monitor.formats.lines import LineDecoder
from monitor.framing import LineSplitter
from monitor.store.rows import MIN_ARG_CHARS, MIN_JSON_CHARS, _clip_strings, bounded_json
from monitor.text import (
    _NEEDS_SQUASH,
    VOLATILE_KEYS,
    _canonical,
    _canonical_text,
    _needs_squash,
    canonical_args,
)
from tests.conftest import SCENARIOS

ALPHABET = ' \t\n\r"\\abn\x0b\xa0\u2028é'


def test_needs_squash_matches_the_regex_on_orjson_output():
    rng = random.Random(0)
    for _ in range(20_000):
        args = {"k": "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))}
        raw = orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
        assert _needs_squash(raw.decode()) == bool(_NEEDS_SQUASH.search(raw)), raw


def careful_canonical_args(args):
    """canonical_args without its shortcuts (the reference)."""
    if not args:
        return "{}"
    try:
        if VOLATILE_KEYS.isdisjoint(args):
            raw = orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
            if len(raw) < 8000 and not _NEEDS_SQUASH.search(raw):
                return raw.decode()
        return orjson.dumps(_canonical(args), option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return repr(_canonical(args))


@pytest.mark.parametrize(
    "args",
    [
        {"command": "x" * 9000},
        {"command": "echo  hi\n" * 2000, "timeout": 5},
        {"content": "a\tb " * 3000, "path": "f.py", "n": 2**70},
        {"content": "é" * 9000},
        {"content": "ok" * 5000, "nested": {"a": 1}},
        {"content": "ok" * 5000, 3: "int key"},
        {"content": "x" * 9000, "id": "call-1"},
        {"path": "a.py", "command": "ls  -l"},
    ],
)
def test_long_arguments_skip_the_fast_dump_with_the_same_key(args):
    assert canonical_args(args) == careful_canonical_args(args)


@pytest.mark.parametrize(
    "args",
    [
        None,
        {},
        {"path": "a.py"},
        {"command": "ls  -l"},
        {"command": "a\\tb"},
        {"id": "c1", "path": "a.py"},
        {"command": "x" * 9000},
        {"content": "ok" * 5000, 3: "int key"},
        {"n": 2**70},
        {"d": {"z": 1, "a": 2}},
    ],
)
def test_the_canonical_text_says_whether_it_rewrote_the_arguments(args):
    """_canonical_text makes the key in one pass: its text is the reference's,
    and not "rewritten" only when the arguments' own JSON is the key (a
    short key then proves them small: see EventRef)."""
    text, rewritten = _canonical_text(args)
    assert text == careful_canonical_args(args)
    try:
        as_is = orjson.dumps(args or {}, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        as_is = None
    assert rewritten or text == as_is
    assert rewritten == (args == {"command": "a\\tb"} or as_is != text)  # (an escape: rewritten to be sure)


def test_empty_handed_hints_cover_every_phrase():
    for phrase in EMPTY_HANDED:
        assert _empty_handed(phrase) and _empty_handed(f"x {phrase.upper().lower()} y")
    assert not _empty_handed("all good")


def test_empty_handed_agrees_with_the_plain_definition_on_random_texts():
    """The word-gated test says what ``any(phrase in text)`` says, on texts
    built from the phrases' own words (where a wrong gate would show)."""
    words = sorted({w for phrase in EMPTY_HANDED for w in phrase.split()} | {"no", "not", "know", "x"})
    rng = random.Random(19)
    for _ in range(20_000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        assert _empty_handed(text) == any(phrase in text for phrase in EMPTY_HANDED), text


def test_fingerprint_is_the_primary_arguments_key():
    cases = [
        ("read_file", {"path": "a.py"}),
        ("grep", {"pattern": "x", "path": "src", "flags": "-i"}),
        ("bash", {"command": "pytest -q", "description": "run"}),
        ("tool", {"a": 1}),
        (None, {"path": "p"}),
        ("", {}),
        ("edit", {"path": "a", "old": "x", "new": "y"}),
    ]
    for tool, args in cases:
        event = Event(Kind.TOOL_CALL, "s", 0.0, tool=tool, args=args)
        primary = {k: args[k] for k in PRIMARY_KEYS if k in args}
        assert fingerprint(event) == f"{tool or '?'}:{canonical_args(primary or args)}"


def reference_lines(data: bytes, limit: int) -> list[tuple[int, bytes | None, int]]:
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [(n, p if len(p) <= limit else None, len(p)) for n, p in enumerate(pieces, 1)]


def test_fingerprints_of_different_plain_tools_differ_within_the_kept_characters():
    """The fingerprint detector takes a call's fingerprint only when it follows
    a call of the same tool: a fingerprint starts with "tool:", so two tools
    without a colon and shorter than ``_PLAIN_TOOL`` never share the first
    KEY_CHARS characters of their fingerprints."""
    from monitor.detect.analysis.calls import KEY_CHARS
    from monitor.detect.detectors.fingerprint import _PLAIN_TOOL

    rng = random.Random(5)
    tools = [
        None,
        "",
        "?",
        "bash",
        "bas",
        "bash2",
        "read_file",
        "x" * (_PLAIN_TOOL - 1),
        "x" * (_PLAIN_TOOL - 2),
    ]
    shapes = [
        {"path": "a.py"},
        {"command": "cat a.py"},
        {"command": "ls -l"},
        {"path": "p", "old": "x"},
        {"job": 7},
        {},
        {"pattern": "y" * 300},
    ]
    prints = {}
    for _ in range(2000):
        tool, args = rng.choice(tools), dict(rng.choice(shapes))
        key = fingerprint(Event(Kind.TOOL_CALL, "s", 0.0, tool=tool, args=args))
        assert key.startswith(f"{tool or '?'}:")
        prints.setdefault(tool or "?", set()).add(key[:KEY_CHARS])
    for tool, kept in prints.items():
        for other, theirs in prints.items():
            assert tool == other or not kept & theirs, (tool, other)


def test_line_splitter_matches_a_plain_split_however_the_stream_is_chunked():
    rng = random.Random(1)
    for _ in range(2000):
        data = bytes(rng.choice(b"ab\n\n  x") for _ in range(rng.randrange(200)))
        limit = rng.randrange(1, 20)
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randrange(8))))
        splitter = LineSplitter(limit)
        out, start = [], 0
        for cut in cuts + [len(data)]:
            out += splitter.feed(data[start:cut])
            start = cut
        out += splitter.flush()
        assert out == reference_lines(data, limit), (data, cuts, limit)


def test_line_splitter_keeping_newlines_gives_the_same_lines_with_them():
    """A scan's splitter keeps each line's newline (cheaper to split): the
    same lines, the same sizes of the oversized ones."""
    rng = random.Random(2)
    for _ in range(2000):
        data = bytes(rng.choice(b"ab\n\n  x") for _ in range(rng.randrange(200)))
        limit = rng.randrange(1, 20)
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randrange(8))))
        splitter = LineSplitter(limit, newlines=True)
        out, start = [], 0
        for cut in cuts + [len(data)]:
            out += splitter.feed(data[start:cut])
            start = cut
        out += splitter.flush()
        plain = [
            (n, raw if raw is None or raw[-1:] != b"\n" else raw[:-1], size if raw is None else None)
            for n, raw, size in out
        ]
        want = [(n, raw, size if raw is None else None) for n, raw, size in reference_lines(data, limit)]
        assert plain == want, (data, cuts, limit)
        assert all(raw is None or size == len(raw) for _, raw, size in out)


@pytest.mark.parametrize(
    "value",
    [
        {"path": "a.py", "n": 3, "ok": True, "x": None, "f": 1.5},
        {"command": "y" * 5000},
        {"bad": "\udcff"},
        {"nested": {"a": [1, 2]}},
        {"big": 2**80},
    ],
)
def test_flat_json_columns_skip_the_clipping_with_the_same_text(value):
    def careful(value, content_chars):
        clipped = _clip_strings(value, max(content_chars, MIN_ARG_CHARS))
        try:
            text = orjson.dumps(clipped, default=str).decode()
        except TypeError:
            import json

            text = json.dumps(clipped, default=str, ensure_ascii=True)
        if len(text) > max(8 * content_chars, MIN_JSON_CHARS):
            text = orjson.dumps({"…": f"too large to store: {len(text):,} characters of JSON"}).decode()
        return text

    for chars in (200, 4000):
        assert bounded_json(value, chars) == careful(value, chars)


@pytest.mark.parametrize("preset", ["balanced", "aggressive"])
def test_skipping_turn_detectors_between_turns_changes_nothing(preset):
    """The engine skips the turn detectors for events that complete no turn,
    and detectors for the kinds they do not listen to (routing.py); with
    both shortcuts off, every detection and sparkline is the same."""

    def run(gated: bool):
        engine = Engine(build_config({}, preset=preset), sparklines=True)
        decoder = LineDecoder("trace.jsonl")
        found = []
        for line, record in enumerate(records(6000, sessions=6, seed=3, loop_rate=0.1), 1):
            events, _ = decoder.feed(orjson.dumps(record), line, now=0.0)
            for event in events:
                state = engine.session(event.session, event)
                if not gated and state.turn_gate is not None:
                    state.turn_gate = None  # every detector's observe, for every event
                    state.observers = {
                        kind: tuple(
                            d.observe for d in [*state.by_kind[kind], *state.global_by_kind.get(kind, ())]
                        )
                        for kind in Kind
                    }
                found += [(d.detector, d.seq, d.session, d.level, d.message) for d in engine.process(event)]
        sparks = {
            sid: (list(s.similarity), {k: list(v) for k, v in s.detector_similarity.items()})
            for sid, s in engine.sessions.items()
        }
        return found, sparks

    gated, ungated = run(True), run(False)
    assert gated == ungated
    # The turn detectors did judge something.
    assert any(any(scores.get("turn_similarity", ())) for _, scores in gated[1].values())


@pytest.mark.parametrize("preset", ["conservative", "balanced", "aggressive"])
def test_keeping_sparklines_changes_no_detection(preset):
    """A scan keeps no sparkline histories and may skip comparisons that only
    feed them; the live monitor's engine keeps them.  Both detect exactly the
    same things (one pipeline)."""

    # A synthetic mix of honest work and short loops, then the labelled
    # corpus (which holds every detector's loops and near-misses).
    streams = [("trace.jsonl", [orjson.dumps(r) for r in records(8000, sessions=8, seed=5, loop_rate=0.1)])]
    streams += [(path.name, path.read_bytes().splitlines()) for path in sorted(SCENARIOS.glob("*.jsonl"))]

    def run(sparklines: bool):
        engine = Engine(build_config({}, preset=preset), sparklines=sparklines)
        found = []
        for name, lines in streams:
            decoder = LineDecoder(name)
            for line, raw in enumerate(lines, 1):
                for event in decoder.feed(raw, line, now=0.0)[0]:
                    found += [
                        (
                            d.detector,
                            d.seq,
                            d.session,
                            d.level,
                            d.score,
                            d.message,
                            d.pattern,
                            tuple(ref.seq for ref in d.evidence),
                        )
                        for d in engine.process(event)
                    ]
        return found

    scanned = run(False)
    assert scanned == run(True)
    assert {found[0] for found in scanned} >= {
        "turn_similarity",
        "output_similarity",
        "exact_repeat",
        "cycle",
    }


def _moved_by_definition(records, start):
    """exact_repeat's "did a poll move?" per record, written as its definition."""
    return [
        record.done
        and any(
            earlier.done and earlier.same_call(record) and not record.same_outcome(earlier)
            for earlier in records[:index]
        )
        for index, record in enumerate(records)
        if index >= start
    ]


def test_grouped_moved_check_matches_its_definition():
    """exact_repeat compares each record only with earlier records of its own
    call; over random windows (few calls, few results, some still running, a
    forced hash collision) that gives what comparing with every earlier record gives."""
    from monitor.detect.analysis.calls import new_record
    from monitor.detect.detectors.exact_repeat import _moved

    rng = random.Random(3)
    for _ in range(3_000):
        records = []
        for seq in range(1, rng.randrange(1, 12)):
            call = Event(
                Kind.TOOL_CALL, "s", float(seq), tool="poll", args={"job": rng.choice("abc")}, seq=seq
            )
            record = new_record(call)
            if rng.random() < 0.2:
                record.hash = 42  # a collision: equal hashes, different keys
            if rng.random() < 0.85:
                record.attach(
                    Event(
                        Kind.TOOL_RESULT,
                        "s",
                        float(seq),
                        content=rng.choice(("1%", "2%", "done")),
                        is_error=rng.random() < 0.1,
                    )
                )
            records.append(record)
        start = rng.randrange(len(records) + 1)
        assert _moved(records, start) == _moved_by_definition(records, start)


def test_a_scan_makes_no_reference_cycles(tmp_path):
    """scan() runs the cyclic garbage collector rarely because scanning makes
    no reference cycles: with the collector off, a scan of a synthetic trace,
    the whole corpus and the real transcripts leaves it nothing to free."""
    from monitor.demo.synthetic import write_trace
    from monitor.scan import scan
    from tests.conftest import FIXTURES

    trace = tmp_path / "trace.jsonl"
    write_trace(str(trace), 20_000, sessions=20, seed=2, loop_rate=0.1)
    paths = [str(trace), *map(str, sorted(SCENARIOS.glob("*.jsonl")))]
    paths.append(str(FIXTURES))
    thresholds = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        report = scan(paths)
        left = gc.collect()
    finally:
        gc.enable()
    assert report.events > 20_000 and report.detections
    assert left == 0
    assert gc.get_threshold() == thresholds  # the scan put the collector back as it was


class _Unlearned(dict):
    """A tool memo that calls no tool plain: ``waiting.mark`` then always takes its full path."""

    def __missing__(self, key):
        return False


def test_marking_waits_skips_plain_calls_with_the_same_marks(monkeypatch):
    """``waiting.mark`` returns at once for a call of a plain tool with no
    command or wait argument, after no wait and no long gap: the marks it
    leaves (and what it remembers for the next call) are the full path's."""
    from monitor.detect import base
    from monitor.detect.detectors import waiting

    rng = random.Random(7)
    tools = ["read_file", "Read", "bash", "sleep", "Wait", "check_job", "grep", None]
    argses = [
        {},
        None,
        {"path": "a.py"},
        {"command": "sleep 30"},
        {"command": "ls"},
        {"timeout": 40},
        {"job": 3, "wait_ms": 5000},
        {"seconds": 2},
        {"input": "sleep 5"},
        {"cmd": ["sleep", "1"]},
    ]

    def run(memo):
        monkeypatch.setattr(waiting, "_PLAIN_TOOLS", memo)
        view, ts, marks = base.SessionView("s"), 1.0, []
        view.last_call_key = "grep:{}"
        for _ in range(4000):
            ts += rng.choice((0.0, 1.0, 5.0, 19.9, 20.0, 45.0, -3.0))
            call = Event(Kind.TOOL_CALL, "s", ts, tool=rng.choice(tools), args=rng.choice(argses))
            waiting.mark(call, view)
            marks.append(
                (
                    call.cache.get("waited"),
                    call.cache.get("wait_only"),
                    view.last_wait,
                    view.last_call_ts,
                    "shell_command" in call.cache,
                )
            )
        return marks

    state = rng.getstate()
    fast = run(TextMemo(256, 4096, waiting._plain_tool))
    rng.setstate(state)
    full = run(_Unlearned())
    assert [m[:4] for m in fast] == [m[:4] for m in full]
    skipped = sum(1 for m in fast if not m[4])
    assert all(m[4] for m in full) and skipped > 300  # the shortcut was taken


def test_the_id_ring_holds_any_64_bit_hash_and_its_token_is_the_items_bytes():
    """The duplicate-id ring's item type (a C ``long`` where it has 64 bits)
    holds every hash, and ``_token`` packs one as the ring's bytes hold it
    (the ring is searched as bytes)."""
    from array import array

    from monitor.detect.engine import _SEEN_SLOT, _SEEN_TYPE, _token

    digests = [-(1 << 63), (1 << 63) - 1, -1, 0, 1 << 40, hash("toolu_0001"), ~hash("toolu_0001")]
    ring = array(_SEEN_TYPE, digests)
    assert ring.itemsize == _SEEN_SLOT
    data = ring.tobytes()
    for at, digest in enumerate(digests):
        assert data[at * _SEEN_SLOT : (at + 1) * _SEEN_SLOT] == _token(digest)
        assert ring[at] == digest


def test_events_processed_counts_each_event_but_duplicates_closed_sessions_included():
    """The engine counts processed events per session (not once more per
    event): the total is what counting each call of ``process`` gives."""
    engine = Engine()
    counted = 0
    for n in range(300):
        session = f"s{n % 3}"
        for event in (
            Event(
                Kind.TOOL_CALL, session, float(n), call_id=f"c{n % 40}", tool="read_file", args={"path": "a"}
            ),
            Event(Kind.TOOL_RESULT, session, float(n), call_id=f"c{n % 40}", content="ok"),
            Event(Kind.MESSAGE, session, float(n), role="assistant", content="hm"),
        ):
            before = engine.duplicates
            engine.process(event)
            counted += engine.duplicates == before
        if n == 150:
            engine.close("s1")
    assert engine.duplicates > 0 and engine.events_processed == counted


def test_the_engine_keeps_the_turn_trackers_entry_and_drops_it_on_a_new_dispatch():
    """The engine feeds the session's turn tracker through the entry it kept
    (not a lookup per event): the view's own, forgotten when a mute changes
    the dispatch (and so perhaps the gate)."""
    engine = Engine()
    for n in range(3):
        engine.process(Event(Kind.MESSAGE, "s", float(n), role="assistant", content=f"m{n}"))
    state = engine.sessions["s"]
    assert state.turn_gate is not None
    entry = state.view.turns[state.turn_gate]
    assert state.turn_entry is entry and entry[2] == 3  # fed the latest event
    engine.mute("s", "monologue")
    assert state.turn_entry is None
    engine.process(Event(Kind.MESSAGE, "s", 9.0, role="assistant", content="m9"))
    assert state.turn_entry is state.view.turns[state.turn_gate]


class _RecentHashes(list):
    """cycle's window of recent call hashes, counting the calls found in none
    of them (those skip the loop over periods); ``every`` claims each hash is
    there, so that every call takes the loop."""

    def __init__(self, items, every: bool):
        super().__init__(items)
        self.every = every
        self.skipped = 0

    def __contains__(self, digest) -> bool:
        if list.__contains__(self, digest):
            return True
        self.skipped += 1
        return self.every


def _cycling_streams(seed: int) -> list:
    """Two sessions of random calls with cycles of 2 to 5 calls mixed in,
    their results now and then different (a cycle that moves)."""
    from tests.streams import Stream

    rng = random.Random(seed)
    streams = [Stream("s1"), Stream("s2")]
    for _ in range(400):
        stream = rng.choice(streams)
        if rng.random() < 0.5:
            stream.call("bash", rng.choice("xy"), command=f"cmd {rng.randrange(6)}")
            continue
        block = rng.sample(range(8), rng.randrange(2, 6))
        for _ in range(rng.randrange(1, 5)):
            for call in block:
                stream.call("read", "v2" if rng.random() < 0.05 else "v1", path=f"f{call}")
    return streams


@pytest.mark.parametrize("preset", ["conservative", "balanced", "aggressive"])
def test_cycle_skipping_calls_that_repeat_no_recent_call_changes_nothing(preset):
    """cycle skips its loop over periods for a call that is none of the last
    ``max_period`` calls; making every call take the loop changes no
    detection and no sparkline."""
    from tests.streams import run

    def scan(every: bool):
        engine = Engine(build_config({}, preset=preset), sparklines=True)
        streams = _cycling_streams(11)
        windows = []
        for stream in streams:
            state = engine.session(stream.session, stream.events[0])
            cycle = next(d for d in state.detectors if d.name == "cycle")
            cycle._recent = _RecentHashes(cycle._recent, every)
            windows.append(cycle._recent)
        _, found = run(*streams, engine=engine, interleave=True)
        sparks = {
            sid: (list(s.similarity), {k: list(v) for k, v in s.detector_similarity.items()})
            for sid, s in engine.sessions.items()
        }
        return (
            [
                (d.detector, d.session, d.seq, d.count, d.message, tuple(r.seq for r in d.evidence))
                for d in found
            ],
            sparks,
            sum(w.skipped for w in windows),
        )

    skipping, skipped_none = scan(False), scan(True)
    assert skipping[:2] == skipped_none[:2]
    assert sum(1 for d in skipping[0] if d[0] == "cycle") >= 10
    assert skipping[2] > 100  # the skip did happen


CALLS = [
    ("bash", {"command": "sed -i 's/a/b/' models.py"}),
    ("bash", {"command": "python fix.py"}),
    ("bash", {"command": "cat > fix.py << 'EOF'\nprint(1)\nEOF"}),
    ("bash", {"command": "ls -la"}),
    ("shell", {"command": ["bash", "-lc", "cp a.py b.py"]}),
    ("edit_file", {"path": "app/x.py", "old": "a"}),
    ("Edit", {"file_path": "y.py"}),
    ("edit_file", {}),
    ("read_file", {"path": "app/x.py"}),
    ("bash", None),
    ("grep", {"pattern": "foo", "path": "src"}),
    ("run", {"cmd": "git checkout -- ."}),
]


def _io(io) -> tuple:
    return io.writes, io.blind, io.broad, io.reads, io.waited


def test_call_io_reading_the_command_memo_inline_agrees_with_shell_command():
    """call_io reads shell_command's memo itself (waiting.mark has filled it
    for every call): the same answer with the memo filled or not."""
    from monitor.detect.analysis.failures import shell_command
    from monitor.detect.analysis.inputs import call_io, command_io

    for tool, args in CALLS:
        fresh = Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=args)
        marked = Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=args)
        command = shell_command(marked)
        assert "shell_command" in marked.cache
        assert _io(call_io(fresh)) == _io(call_io(marked))
        if command is not None:
            assert _io(call_io(marked)) == _io(command_io(command))


def test_a_record_keeps_what_kept_gives():
    """A record reads ``CallIO.kept()``'s memo itself: what it keeps is what
    ``kept()`` gives, after a wait or not."""
    from monitor.detect.analysis.calls import call_record
    from monitor.detect.analysis.failures import shell_command
    from monitor.detect.analysis.inputs import call_io

    for waited in (None, 0.0, 30.0):
        for marked in (False, True):  # new_record reads call_io's tables inline once waiting.mark has run
            for tool, args in CALLS * 2:  # the second time, the memos are there
                event = Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=args)
                if marked:
                    shell_command(event)
                if waited is not None:
                    event.cache["waited"] = waited
                assert _io(call_record(event).io) == _io(call_io(event).kept(bool(waited)))


def test_a_record_snapshots_its_call_as_call_snapshot_does():
    """A record keeps the snapshot call_snapshot makes (a call of one argument with a short key as it is)."""
    from monitor.detect.analysis.calls import new_record
    from monitor.events import call_snapshot

    for tool, args in [
        *CALLS,
        ("t", {"a": "x" * 300}),
        ("t", {"a": "b  c"}),
        ("t", {"id": "1"}),
        ("t", {"a": [1]}),
    ]:
        event = Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=args, seq=5)
        record = new_record(event)
        assert record._ref == call_snapshot(event)
        assert record.ref == EventRef.of(event)


def test_a_new_record_fills_every_slot_but_the_results():
    """new_record fills the slots itself (no constructor): all of them but
    those ``attach`` fills, which it then fills."""
    from monitor.detect.analysis.calls import CallRecord, new_record

    by_result = {"error", "long", "_outcome", "_marks"}
    for tool, args in CALLS:
        record = new_record(Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=args, seq=3))
        filled = {name for name in CallRecord.__slots__ if hasattr(record, name)}
        assert filled == set(CallRecord.__slots__) - by_result
        assert (record.seq, record.text, record.failure, record.done) == (3, None, None, False)
        record.attach(Event(Kind.TOOL_RESULT, "s", 2.0, content="ok"))
        assert all(hasattr(record, name) for name in CallRecord.__slots__)


def test_call_detectors_share_one_record_per_call(monkeypatch):
    """cycle, exact_repeat, fingerprint and similar_args make a call's record
    inline (call_record's memo): whichever sees the call first makes it, once,
    and it is what call_record gives for the call."""
    import monitor.detect.analysis.calls as calls
    from monitor.detect.detectors import cycle, exact_repeat, fingerprint, similar_args

    made = []

    def counted(event):
        made.append(event)
        return calls.new_record(event)

    for module in (cycle, exact_repeat, fingerprint, similar_args):
        monkeypatch.setattr(module, "new_record", counted)
    engine = Engine(build_config({}, preset="aggressive"))
    decoder = LineDecoder("trace.jsonl")
    seen = []
    for line, record in enumerate(records(3000, sessions=4, seed=5, loop_rate=0.2), 1):
        for event in decoder.feed(orjson.dumps(record), line, now=0.0)[0]:
            engine.session(event.session, event)
            engine.process(event)
            if event.kind is Kind.TOOL_CALL:
                seen.append(event)
    assert seen and len(made) == len(seen) and all(a is b for a, b in zip(made, seen))
    for event in seen:
        assert calls.call_record(event) is event.cache["record"]


def test_attach_keeps_what_clip_keeps():
    """attach clips only a long result (a short one is kept as it is, as clip() would)."""
    from monitor.detect.analysis.calls import new_record
    from monitor.text import clip

    for size in (0, 1, 399, 400, 401, 1999, 2000, 2001, 5000):
        for error in (False, True):
            content = "".join(chr(97 + i % 26) for i in range(size))
            record = new_record(Event(Kind.TOOL_CALL, "s", 1.0, tool="bash", args={"command": "ls"}))
            record.attach(Event(Kind.TOOL_RESULT, "s", 2.0, content=content, is_error=error))
            assert (record.text, record.long, record.error) == (clip(content), size > 400, error)


def test_similar_args_failure_of_a_result_that_is_no_error_is_failures():
    """similar_args works out the failure of a result that is no error inline:
    what _failure gives."""
    from monitor.detect.detectors.similar_args import SimilarArgs, _failure

    detector = SimilarArgs()
    view = Engine(build_config({})).session("s", Event(Kind.SESSION_START, "s", 0.0)).view
    for content in (
        "",
        "No matches found",
        "grep: foo: No such file or directory",
        "ok",
        "x" * 3000,
        'Traceback (most recent call last):\n  File "a.py"\nValueError: bad',
        "0 results",
    ):
        for seq in (1, 2):
            call = Event(Kind.TOOL_CALL, "s", 1.0, tool="grep", args={"pattern": f"p{seq}"}, seq=seq)
            detector.observe(call, view)
        result = Event(Kind.TOOL_RESULT, "s", 2.0, content=content, seq=3, call=call)
        record = call.cache["record"]
        detector.observe(result, view)
        assert record.failure == _failure(result)


def test_retry_rounds_judges_a_write_tool_once_per_name():
    """retry_rounds asks by tool name whether a write replaces a whole file
    (a restore): each name's answer is the regex's, remembered after its first call."""
    from monitor.detect.detectors import retry_rounds
    from tests.streams import Stream, run

    names = [
        "Write",
        "create_file",
        "Edit",
        "MultiEdit",
        "str_replace_editor",
        "write_to_file",
        "NotebookEdit",
    ]
    retry_rounds._WHOLE_FILE_TOOL_NAMES.clear()
    s = Stream()
    for name in names:
        s.call(name, "ok", file_path="app.py", path="app.py", content="x = 1", old_string="a", new_string="b")
    run(s)
    for name in names:
        assert name in retry_rounds._WHOLE_FILE_TOOL_NAMES  # the run asked, and the answer was kept
        assert retry_rounds._WHOLE_FILE_TOOL_NAMES[name] == (
            retry_rounds._WHOLE_FILE_TOOLS.search(name) is not None
        )
    assert {name for name in names if retry_rounds._WHOLE_FILE_TOOL_NAMES[name]} == {
        "Write",
        "create_file",
        "write_to_file",
    }


@pytest.mark.parametrize("failures_only", [True, False])
def test_swarm_skips_results_with_no_outcome_without_changing_a_detection(failures_only, monkeypatch):
    """Swarm.observe returns at once for a result whose ``comparable_failure``
    the session's detectors found to be ``None`` (most results, when only
    failures count); :meth:`ShardableDetector.observe` (``sight``, then
    ``count``) finds the same, over swarm loops of failures and of successes."""
    from monitor.detect.base import ShardableDetector
    from monitor.detect.detectors.swarm import Swarm
    from tests.streams import Stream

    streams = []
    for worker in range(6):
        s = Stream(session=f"w{worker}", start=1000.0 + worker, step=5.0)
        for n in range(3):
            s.call(
                "web_fetch",
                "HTTP 503 Service Unavailable",
                error=True,
                url="https://api.example.com/v1/items",
            )
            s.call("bash", "On branch main\nnothing to commit, working tree clean", command="git status")
            s.call("read_file", f"part {n} of {worker}", path=f"docs/{worker}_{n}.md")
        streams.append(s)
    events = sorted((e for s in streams for e in s.events), key=lambda e: e.ts)
    scenarios = sorted(SCENARIOS.glob("*swarm*.jsonl"))
    sights = []
    sight = Swarm.sight
    monkeypatch.setattr(
        Swarm, "sight", lambda self, event, view: sights.append(1) or sight(self, event, view)
    )

    def run():
        engine = Engine(build_config({"detectors": {"swarm": {"failures_only": failures_only}}}))
        found = [d for event in events for d in engine.process(event)]
        for path in scenarios:
            decoder = LineDecoder(path.name)
            for line, raw in enumerate(path.read_bytes().splitlines(), 1):
                for event in decoder.feed(raw, line, now=0.0)[0]:
                    found += engine.process(event)
        return [(d.detector, d.session, d.seq, d.message) for d in found if d.detector == "swarm"], len(
            sights
        )

    skipping, skipping_sights = run()
    sights.clear()
    monkeypatch.setattr(Swarm, "observe", ShardableDetector.observe)
    plain, plain_sights = run()
    assert plain == skipping and skipping
    if failures_only:  # the skip happened (the other results are no failures)
        assert skipping_sights < plain_sights / 2
    else:
        assert skipping_sights == plain_sights


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "a.py"}),
        ("run_tests", {"path": "tests/"}),
        ("pytest", {}),
        ("bash", {}),
        ("bash", {"input": "pytest -q"}),
        ("bash", {"command": "pytest -q"}),
        ("bash", {"command": ""}),
        ("shell", {"commands": ["ls", "-l"]}),
        ("run_tests", {"command": "ls"}),
        (None, {"script": "npm test"}),
    ],
)
def test_shell_command_answers_is_test_run_for_calls_without_a_command(tool, args):
    """shell_command() leaves is_test_run()'s answer for a call without a
    command (most calls), the one is_test_run() works out on its own."""
    from monitor.detect.analysis.failures import is_test_run, shell_command

    def call():
        return Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=dict(args))

    first, fresh = call(), call()
    command = shell_command(first)
    assert ("is_test_run" in first.cache) == (command is None)
    assert is_test_run(first) == is_test_run(fresh)
    assert shell_command(fresh) == command


_OUTPUTS = [
    "",
    "ok",
    "Exit code 1",
    "Exit code 1\nno matches",
    "Exit code 2\nTraceback (most recent call last):\n  File x.py, line 3\nKeyError: 'user_id'",
    "FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 3 passed in 0.2s\nExit code 1",
    "3 passed in 0.1s",
    "No files found",
    "Error: file does not exist",
    "<returncode>1</returncode>\n<output>\n</output>",
    "make: *** [all] Error 2",
    "Sibling tool call errored",
]
_CALLS = [
    ("bash", {"command": "pytest -q"}),
    ("bash", {"command": "grep -rn foo src"}),
    ("bash", {}),
    ("Read", {"file_path": "a.py"}),
    ("run_tests", {}),
    ("shell", {"input": "make"}),
    ("Grep", {"pattern": "foo"}),
    ("bash", {"command": "python check.py"}),
]


@pytest.mark.parametrize(("tool", "args"), _CALLS)
def test_failed_and_comparable_failure_read_their_memos_as_the_functions_answer(tool, args):
    """failed() reads shell_command()'s and is_test_run()'s memos inline,
    comparable_failure() failure_signature()'s: with those memos filled
    first, or not at all, they answer the same."""
    from monitor.detect.analysis.failures import comparable_failure, failed, is_test_run, shell_command
    from monitor.detect.analysis.signatures import failure_signature

    def result(content, is_error):
        call = Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=dict(args), call_id="c")
        return Event(
            Kind.TOOL_RESULT, "s", 2.0, tool=tool, call_id="c", call=call, content=content, is_error=is_error
        )

    for content in _OUTPUTS:
        for is_error in (False, True):
            plain, primed = result(content, is_error), result(content, is_error)
            shell_command(primed.call), is_test_run(primed.call), failure_signature(primed)
            assert "failure_signature" in primed.cache and "failed" not in primed.cache
            assert failed(primed) == failed(plain), (content, is_error)
            plain = result(content, is_error)
            assert comparable_failure(primed) == comparable_failure(plain), (content, is_error)


def test_normalize_failure_skips_only_texts_without_noise():
    """_normalize_failure() runs the noise patterns only on texts holding
    what some kind of noise needs (found in translated bytes); running them
    all on every text with a digit gives the same, on texts made of the
    noise's own parts."""
    from monitor.detect.analysis import failures
    from monitor.text import squash_ws

    def plain(text, limit=200):
        if failures._HAS_DIGIT.search(text):  # (a text without digits is left as it is)
            text = failures._NUMERIC_NOISE.sub(failures._numeric, text)
            for _, pattern, repl in failures._OTHER_NOISE:
                text = pattern.sub(repl, text)
        return squash_ws(text)[:limit] if limit else text

    rng = random.Random(11)
    parts = [
        "0",
        "1",
        "7",
        "42",
        ".",
        ":",
        "-",
        " ",
        "\t",
        "\n",
        "\x1c",
        "T",
        "Z",
        "+",
        "x",
        "0x",
        "ms",
        "s",
        "us",
        "ns",
        "min",
        "µs",
        "%",
        "a",
        "f",
        "deadbeef",
        "cafe",
        "seed",
        "line ",
        "A",
        "assert ",
        " == ",
        "é",
        "_",
    ]
    for _ in range(30_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(16)))
        for limit in (200, 0):
            assert failures._normalize_failure(text, limit) == plain(text, limit), text


def test_results_are_normalized_once_per_text_and_as_normalize_result_does(monkeypatch):
    """A record's and a turn's normalized results come from one memo by text:
    the same output again is not normalized again, and each is what
    normalize_result gives."""
    import monitor.detect.analysis.calls as calls
    import monitor.detect.analysis.turns as turns
    from monitor.detect.analysis.memo import NORMALIZED_RESULTS
    from monitor.text import normalize_result

    normalized = []

    def counted(text):
        normalized.append(text)
        return normalize_result(text)

    monkeypatch.setattr(NORMALIZED_RESULTS, "work", counted)
    NORMALIZED_RESULTS.clear()
    rng = random.Random(6)
    texts = ["3 passed in 1.2s at 10:20:30", "Exit code 1\nFAILED t.py::x - 0xdead", "ok", "", "x" * 3000]
    for _ in range(200):
        content, error = rng.choice(texts), rng.random() < 0.5
        record = calls.new_record(Event(Kind.TOOL_CALL, "s", 1.0, tool="bash", args={"command": "ls"}))
        record.attach(Event(Kind.TOOL_RESULT, "s", 2.0, content=content, is_error=error))
        assert record.result == ("E:" if error else "R:") + normalize_result(record.text)
        outcome = turns.Outcome(((error, record.text),))
        assert outcome.key() == (record.result,)
    assert sorted(normalized) == sorted({calls.clip(text) for text in texts})


_RUN_LINE_PARTS = [
    "Exit code 1",
    "FAILED tests/test_a.py::test_1 - assert 1 == 0",
    "1 failed, 2 passed in 0.3s",
    "FAILED (failures=2, errors=1)",
    "ERROR: test_x (mod.T)",
    "E   AssertionError",
    "ok",
    "É",
    "Tests: 2 failed",
    "error",
    "ſ",
    "ERROR",
    "timed out after 5s",
    " ",
    "\t",
    "\x1f",
    "3",
    "line 4",
    "Traceback (most recent call last):",
    "● suite › case",
    "K",
    "İ",
    "no such file",
    "passed",
]


def _plain_summary_counts(text):
    """_summary_counts() without its per-line memo, written plainly (the reference)."""
    from monitor.detect.analysis import failures

    for line in reversed(text.splitlines()[-80:]):
        matches = [
            (m.group(4), m.group(3)) if m.group(3) else (m.group(1), m.group(2))
            for m in failures._COUNT.finditer(line)
        ]
        pairs = [(int(digits), word.lower()) for digits, word in matches]
        failing = [number for number, word in pairs if word.startswith(("fail", "error"))]
        passing = [number for number, word in pairs if word.startswith(("pass", "test", "example"))]
        if failing or passing:
            failures_ = sum(failing) if failing else None
            passed = sum(passing) if passing else None
            if passed is not None and failures_ and "example" in line:
                passed -= failures_
            return failures_, passed
    return None, None


def test_summary_lines_memo_gives_the_plain_counts():
    """_summary_counts() parses each line once (_SUMMARY_LINES): the same
    counts whatever the memo holds."""
    from monitor.detect.analysis import failures

    parts = _RUN_LINE_PARTS + [
        "5 examples, 2 failures",
        "3 tests passed",
        "0 errors",
        "2 failing",
        "12 ",
        "Failures=3",
        "errors=1",
        "7 passing",
        "x1 failed",
        "4 Error",
    ]
    rng = random.Random(13)
    for _ in range(6_000):
        text = "\n".join(
            "".join(rng.choice(parts) for _ in range(rng.randrange(4))) for _ in range(rng.randrange(1, 6))
        )
        for _ in range(2):  # judged, then remembered
            assert failures._summary_counts(text) == _plain_summary_counts(text), text
        failures._SUMMARY_LINES.clear()


def test_summary_lines_of_repeated_runs_are_parsed_once(monkeypatch):
    """A summary line seen in an earlier run is not parsed again."""
    from monitor.detect.analysis import failures

    parsed = []
    real = failures._line_counts
    monkeypatch.setattr(failures._SUMMARY_LINES, "work", lambda line: parsed.append(line) or real(line))
    failures._SUMMARY_LINES.clear()
    assert failures._summary_counts("FAILED t.py::test_1\n1 failed, 2 passed") == (1, 2)
    assert failures._summary_counts("FAILED t.py::test_2\n1 failed, 2 passed") == (1, 2)
    assert parsed == ["1 failed, 2 passed"]


def _plain_error_lines(text):
    """_run_outcome()'s error lines as judged before the per-line memo."""
    from monitor.detect.analysis import failures

    errors = []
    for line in dict.fromkeys(text.splitlines()):
        if text.isascii():
            is_error = failures._ERROR_LINE_LOWER.search(line.lower()) is not None
        else:
            is_error = failures._ERROR_LINE.search(line) is not None
        if is_error and not failures._COUNT.search(line):
            normalized = failures._normalize_failure(line)
            if normalized and normalized not in errors:
                errors.append(normalized)
                if len(errors) >= failures.MAX_ERROR_LINES:
                    break
    return errors


def test_error_lines_memo_gives_the_plain_judgement():
    """_run_outcome() judges each line once per text (_ERROR_LINES): the same
    error lines, whatever the memo holds and whether the text is ASCII."""
    from monitor.detect.analysis import failures

    rng = random.Random(12)
    for _ in range(4_000):
        text = "\n".join(
            "".join(rng.choice(_RUN_LINE_PARTS) for _ in range(rng.randrange(4)))
            for _ in range(rng.randrange(1, 6))
        )
        run = failures._run_outcome(text, True)
        failures._ERROR_LINES.clear()
        assert run == failures._run_outcome(text, True), text
        errors = []
        for line in dict.fromkeys(text.splitlines()):
            normalized = failures._error_line(line)
            if normalized and normalized not in errors and len(errors) < failures.MAX_ERROR_LINES:
                errors.append(normalized)
        assert errors == _plain_error_lines(text), text


def test_error_lines_of_repeated_runs_are_judged_once(monkeypatch):
    """A line seen in an earlier run ("Exit code 1") is not judged again."""
    from monitor.detect.analysis import failures

    judged = []
    monkeypatch.setattr(failures._ERROR_LINES, "work", lambda line: judged.append(line) or "")
    failures._ERROR_LINES.clear()
    failures._run_outcome("Exit code 1\nFAILED t.py::test_1 - assert 1 == 0\n1 failed in 0.1s", True)
    failures._run_outcome("Exit code 1\nFAILED t.py::test_2 - assert 2 == 0\n1 failed in 0.1s", True)
    assert judged.count("Exit code 1") == 1 and judged.count("1 failed in 0.1s") == 1


def test_may_count_holds_for_every_printable_ascii_count_line():
    """_error_line() skips the count regex on a printable ASCII line without
    the words a count needs after a space (_may_count): no such line has one."""
    from monitor.detect.analysis import failures

    parts = [
        "1",
        "42",
        " ",
        "  ",
        "\t",
        "\x1f",
        "failed",
        "FAILING",
        "Failures",
        "failure",
        "errors",
        "Error",
        "passed",
        "PASSING",
        "examples",
        "Tests",
        "test",
        "=",
        "s=",
        "Failures=",
        "ERRORS=",
        "x",
        "_",
        ",",
        "(",
        ")",
        "-",
        "assert",
        "::",
    ]
    rng = random.Random(14)
    seen = 0
    for _ in range(40_000):
        line = "".join(rng.choice(parts) for _ in range(rng.randrange(8)))
        low = line.lower()
        if low.isprintable() and not failures._may_count(low):
            assert not failures._has_count(line), line
            seen += 1
    assert seen > 1000


def test_tool_kinds_are_judged_once_per_name_and_as_the_plain_judgement(monkeypatch):
    """``_tool_kind`` (the table's own look-up) gives ``_judge_tool``'s answer,
    judges a name once, and stays bounded when names are made up on the fly."""
    from monitor.detect.analysis import failures
    from monitor.detect.analysis.memo import TextMemo

    judged: list = []
    plain = failures._judge_tool
    table = TextMemo(
        failures._TOOL_KINDS.max_chars,
        failures._TOOL_KINDS.max_size,
        lambda tool: judged.append(tool) or plain(tool),
    )
    monkeypatch.setattr(failures, "_TOOL_KINDS", table)
    monkeypatch.setattr(failures, "_tool_kind", table.__getitem__)
    names = [
        None,
        "",
        "Bash",
        "bash",
        "run_tests",
        "pytest",
        "Edit",
        "TodoWrite",
        "apply_patch",
        "read_file",
        "shell",
        "str_replace_editor",
        "Write",
        "exec_command",
    ]
    for _ in range(3):
        for name in names:
            assert failures._tool_kind(name) == plain(name), name
            call = Event(Kind.TOOL_CALL, "s", 0.0, tool=name, args={})
            assert failures.shell_command(call) is None
            assert failures.is_test_run(call) == plain(name)[0]
    assert judged == names  # each name once
    for n in range(5_000):
        assert failures._tool_kind(f"tool_{n}") == (False, False, False)
    assert 0 < len(table) <= 4096


@pytest.mark.parametrize("sparklines", [False, True])
def test_processing_a_batch_gives_what_processing_each_event_gives(sparklines):
    """A scan feeds the engine a batch at a time (``process_many``, one loop);
    the same events one by one (``process``, as the hub and a sharded scan's
    workers feed them) give the same detections, duplicates dropped alike,
    and the same sparklines."""

    def events():
        decoder = LineDecoder("trace.jsonl")
        out = []
        for line, record in enumerate(records(4000, sessions=5, seed=7, loop_rate=0.1), 1):
            new, _ = decoder.feed(orjson.dumps(record), line, now=0.0)
            out += new
            if line % 97 == 0:
                out += decoder.feed(orjson.dumps(record), line, now=0.0)[0]  # a second channel's copy
        return out

    def shown(engine, found):
        sparks = {
            sid: (list(s.similarity), {k: list(v) for k, v in s.detector_similarity.items()})
            for sid, s in engine.sessions.items()
        }
        return [d.to_dict() for d in found], engine.duplicates, sparks

    one = Engine(build_config({}, preset="aggressive"), sparklines=sparklines)
    by_event = [d for event in events() for d in one.process(event)]
    batched = Engine(build_config({}, preset="aggressive"), sparklines=sparklines)
    stream = events()
    by_batch = []
    for start in range(0, len(stream), 64):
        by_batch += batched.process_many(stream[start : start + 64])
    assert by_batch and batched.duplicates > 0
    assert shown(batched, by_batch) == shown(one, by_event)


def test_the_loop_for_one_event_a_record_gives_what_the_general_loop_gives():
    """``feed_lines`` has a loop of its own for a decoder of one event a
    record read by one reader (the native format in a scan); the general
    loop (here, with every record its reader's) gives the same events,
    problems and counts, for good lines and every kind of bad one."""
    call = {
        "type": "tool_call",
        "session": "s",
        "id": "c1",
        "name": "bash",
        "args": {"command": "ls"},
        "ts": 5.0,
    }
    records_ = [
        call,
        {**call, "id": "c2", "ts": -5.0},  # out of range: replaced and reported
        {**call, "id": "c3", "name": 7},  # refused
        {**call, "id": "c4", "extra": 1},  # decoded carefully (meta)
        {"type": "tool_result", "session": "s", "id": "c1", "content": "ok", "is_error": False, "ts": 6.0},
        {"type": "message", "session": "s", "role": "user", "content": "hi", "ts": 7.0},
        {"type": "nonsense", "session": "s"},  # skipped
        [1, 2],  # not an object
    ]
    raw = b"".join(orjson.dumps(r) + b"\n" for r in records_)
    raw += b'{"type": "message", "session": "s", "role": "user", "content": "caf\xe9"}\n'  # invalid UTF-8
    raw += (
        b"{not json\n"
        + b"  \n"
        + b'{"type": "message", "session": "s", "role": "user", "content": "'
        + b"x" * 300
        + b'"}\n'
    )

    def run(general: bool):
        decoder = LineDecoder("t.jsonl", max_line_bytes=200)
        splitter = LineSplitter(200, newlines=True)
        lines = splitter.feed(raw) + splitter.flush()
        mine = (lambda session: True) if general else None
        events = decoder.feed_lines(lines[:1], 0.0, mine) + decoder.feed_lines(lines[1:], 0.0, mine)
        return events, decoder.problems, decoder.problem_count, decoder.lines, decoder.events, decoder.passed

    fast, general = run(False), run(True)
    assert fast == general
    assert len(fast[0]) == 6 and fast[0][1].ts == 0.0 and len(fast[1]) == 6


@pytest.mark.parametrize("sparklines", [False, True])
def test_each_events_similarity_is_reported_afresh_and_only_with_sparklines(sparklines):
    """The engine clears what detectors reported of the previous event before
    the next (the test of it runs only with sparklines: without them nothing
    is reported), so a loop's bars fall back once the work moves on."""
    engine = Engine(build_config({}, preset="aggressive"), sparklines=sparklines)
    for n in range(12):
        args = {"command": "pytest -q"} if n < 6 else {"command": f"ls dir{n}"}
        engine.process(Event(Kind.TOOL_CALL, "s", float(2 * n), tool="bash", args=args, call_id=f"c{n}"))
        engine.process(
            Event(
                Kind.TOOL_RESULT,
                "s",
                float(2 * n + 1),
                content="1 failed" if n < 6 else f"file{n}",
                call_id=f"c{n}",
                is_error=n < 6,
            )
        )
    state = engine.sessions["s"]
    assert state.view.similarity == 0.0 or sparklines
    bars = list(state.similarity)
    if not sparklines:
        assert bars == []
        return
    assert max(bars[:6]) >= 0.5 > max(bars[-3:])
