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
                        for d in engine.process(event).detections
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
            engine.process(event).detections
            counted += engine.duplicates == before
        if n == 150:
            engine.close("s1")
    assert engine.duplicates > 0 and engine.events_processed == counted


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
def test_each_events_similarity_is_reported_afresh_and_only_with_sparklines(sparklines):
    """The engine clears what detectors reported of the previous event before
    the next (the test of it runs only with sparklines: without them nothing
    is reported), so a loop's bars fall back once the work moves on."""
    engine = Engine(build_config({}, preset="aggressive"), sparklines=sparklines)
    for n in range(12):
        args = {"command": "pytest -q"} if n < 6 else {"command": f"ls dir{n}"}
        engine.process(
            Event(Kind.TOOL_CALL, "s", float(2 * n), tool="bash", args=args, call_id=f"c{n}")
        ).detections
        engine.process(
            Event(
                Kind.TOOL_RESULT,
                "s",
                float(2 * n + 1),
                content="1 failed" if n < 6 else f"file{n}",
                call_id=f"c{n}",
                is_error=n < 6,
            )
        ).detections
    state = engine.sessions["s"]
    assert state.view.similarity == 0.0 or sparklines
    from monitor.ui.sparks import bars as drawn

    bars = list(drawn(engine.summary("s").similarity))
    if not sparklines:
        assert bars == []
        return
    assert max(bars[:6]) >= 0.5 > max(bars[-3:])
