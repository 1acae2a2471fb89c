"""normalize_result's shortcut (patterns skipped when their telltale is absent)
gives exactly what applying every pattern gives."""

from __future__ import annotations

import random

from monitor.text import _NUMBER, _VOLATILE_PATTERNS, clip, normalize_result, squash_ws

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


def reference(text: str, limit: int = 2000, counters: bool = False) -> str:
    text = clip(text, limit)
    for pattern, repl in _VOLATILE_PATTERNS:
        text = pattern.sub(repl, text)
    if counters:
        text = _NUMBER.sub("<n>", text)
    return squash_ws(text)


def test_shortcut_matches_every_pattern_applied():
    rng = random.Random(4)
    for _ in range(30_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 24)))
        assert normalize_result(text) == reference(text), text
        assert normalize_result(text, counters=True) == reference(text, counters=True), text


def test_shortcut_on_long_texts():
    rng = random.Random(5)
    for _ in range(300):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(200, 1500)))
        assert normalize_result(text) == reference(text)
        assert normalize_result(text, 300) == reference(text, 300)


def test_telltales_are_searched_as_str():
    # ``in`` on bytes raises and clears a TypeError per test: the views are str.
    from monitor.text import _TELLTALES

    assert all(telltale.__class__ is str for _, telltales in _TELLTALES for telltale in telltales)


def test_duration_pattern_matches_its_word_boundary_form():
    # The duration regex starts with a digit (so the search skips to digits);
    # it must substitute exactly what the plain ``\b\d+`` form does.
    import re

    plain = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|us|µs|ns|m|min|minutes)\b")
    duration, repl = _VOLATILE_PATTERNS[-1]
    assert repl == "<dur>"
    rng = random.Random(7)
    pieces = PIECES + ["ab1s", "_1s", "x12ms", "é3s", "٣s", "٣ ms", "1.", ".5s"]
    for _ in range(30_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 16)))
        assert duration.sub(repl, text) == plain.sub(repl, text), text
