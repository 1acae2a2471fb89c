"""The one text normaliser: each profile's rules, and the shortcuts that skip
a rule where it cannot match give exactly what the plain rules give."""

from __future__ import annotations

import random
import re

import orjson
import pytest

from monitor import text as text_module
from monitor.text import (
    FAILURE_TEXT,
    LINE_REF,
    RESULT_TEXT,
    _canonical_text,
    canonical_args,
    clip,
    normalize,
    squash_ws,
)

PIECES = [
    "0",
    "1",
    "12",
    "2026",
    "-",
    ":",
    ".",
    " ",
    "\n",
    "\t",
    "\x1c",
    "a",
    "f",
    "F",
    "x",
    "0x",
    "0X",
    "ms",
    "s",
    "sec",
    "min",
    "m",
    "us",
    "ns",
    "µs",
    "T",
    "Z",
    "+",
    "<",
    ">",
    "deadbeef",
    "cafe",
    "é",
    "٣",
    "2026-05-01T10:00:00Z",
    "10:20:30.5",
    "12ab34cd-0000-ffff-aaaa-0123456789ab",
    "0xDEAD",
    "1.5s",
    "150 ms",
    "abcdef012345",
    "seconds",
    "q",
    "_",
    "g",
]


def reference(text: str, limit: int = 2000) -> str:
    """RESULT_TEXT with every rule applied."""
    text = clip(text, limit)
    for rule in RESULT_TEXT.rules:
        text = rule.pattern.sub(rule.replacement, text)
    return squash_ws(text)


def test_shortcut_matches_every_pattern_applied():
    rng = random.Random(4)
    for _ in range(30_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 24)))
        assert normalize(text, RESULT_TEXT, 2000) == reference(text), text


def test_shortcut_on_long_texts():
    rng = random.Random(5)
    for _ in range(300):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(200, 1500)))
        assert normalize(text, RESULT_TEXT, 2000) == reference(text)
        assert normalize(text, RESULT_TEXT, 300) == reference(text, 300)


def test_duration_pattern_matches_its_word_boundary_form():
    # The duration regex starts with a digit (so the search skips to digits);
    # it must substitute exactly what the plain ``\b\d+`` form does.
    import re

    plain = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|us|µs|ns|m|min|minutes)\b")
    duration, repl = RESULT_TEXT.rules[-1].pattern, RESULT_TEXT.rules[-1].replacement
    assert repl == "<dur>"
    rng = random.Random(7)
    pieces = PIECES + ["ab1s", "_1s", "x12ms", "é3s", "٣s", "٣ ms", "1.", ".5s"]
    for _ in range(30_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 16)))
        assert duration.sub(repl, text) == plain.sub(repl, text), text


# -- FAILURE_TEXT: its one-pass numeric pattern gives what the plain patterns give ----------

_PLAIN_NUMERIC_NOISE = re.compile(
    r"(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<time>\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b)"
    r"|(?P<addr>0x[0-9a-fA-F]+\b)"
    r"|(?P<dur>\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|us|µs|ns|min|minutes)\b)"
    r"|(?P<pct>\d+(?:\.\d+)?\s?%)"
)
_PLAIN_LINE_REF = re.compile(r"(?<=[A-Za-z]):\d+(?::\d+)?")


def test_failure_noise_patterns_match_the_plain_ones():
    rng = random.Random(7)
    alphabet = "0123456789:.-T Zx+abcfmsµ%\nline seed A١"
    for _ in range(30_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        assert text_module._NUMERIC_NOISE.sub(text_module._numeric, text) == _PLAIN_NUMERIC_NOISE.sub(
            lambda m: f"<{m.lastgroup}>", text
        ), text
        assert LINE_REF.sub(":<n>", text) == _PLAIN_LINE_REF.sub(":<n>", text), text


def test_failure_text_keeps_test_names_and_drops_what_moves():
    line = (
        "2026-05-01T10:00:00Z tests/test_a.py:41: AssertionError at 0xdeadbeef after 1.5s (seed 1234, line 7)"
    )
    assert normalize(line, FAILURE_TEXT, 200) == (
        "<ts> tests/test_a.py:<n>: AssertionError at <addr> after <dur> (seed <n>, line <n>)"
    )
    # Without a digit nothing is noise, a long hex-looking word included.
    assert normalize("deadbeefcafe  failed", FAILURE_TEXT, 200) == "deadbeefcafe failed"
    assert normalize("a\n  b", FAILURE_TEXT, 0) == "a\n  b"  # a limit of 0 keeps the lines
    assert normalize("x" * 300, FAILURE_TEXT, 200) == "x" * 200


def test_result_text_drops_ids_and_keeps_counts():
    text = "done in 150ms at 10:20:30, id 12ab34cd-0000-ffff-aaaa-0123456789ab: 5 failed, 3 passed"
    assert normalize(text, RESULT_TEXT, 2000) == "done in <dur> at <time>, id <uuid>: 5 failed, 3 passed"
    assert normalize("q" * 3000, RESULT_TEXT, 100) == "q" * 100  # head and tail


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
    assert text == canonical_args(args)
    try:
        as_is = orjson.dumps(args or {}, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        as_is = None
    assert rewritten or text == as_is
    assert rewritten == (args == {"command": "a\\tb"} or as_is != text)  # (an escape: rewritten to be sure)


def test_failure_text_skips_only_rules_that_cannot_match():
    """FAILURE_TEXT's gate and its rules' ``may_match`` skip a rule only where
    it cannot match: on texts made of the noise's own parts, running every
    rule on every text with a digit gives the same."""

    def every_rule(text: str, limit: int) -> str:
        if re.search(r"\d", text):  # (a text without digits is left as it is)
            for rule in FAILURE_TEXT.rules:
                text = rule.pattern.sub(rule.replacement, text)
        return squash_ws(text)[:limit] if limit else text

    rng = random.Random(11)
    parts = [
        *("0", "1", "7", "42", ".", ":", "-", " ", "\t", "\n", "\x1c", "T", "Z", "+", "x", "0x"),
        *("ms", "s", "us", "ns", "min", "µs", "%", "a", "f", "deadbeef", "cafe", "seed", "line "),
        *("A", "assert ", " == ", "é", "_"),
    ]
    for _ in range(30_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(16)))
        for limit in (200, 0):
            assert normalize(text, FAILURE_TEXT, limit) == every_rule(text, limit), text
