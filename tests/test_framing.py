"""LineSplitter: lines of a byte stream, however it is chunked, oversized ones counted."""

from __future__ import annotations

import random

from monitor.framing import LineSplitter


def reference_lines(data: bytes, limit: int) -> list[tuple[int, bytes | None, int]]:
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [(n, p if len(p) <= limit else None, len(p)) for n, p in enumerate(pieces, 1)]


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
