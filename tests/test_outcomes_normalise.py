"""What the outcome normaliser drops, on each of its paths (issue 29).

``normalise`` runs a substitution only on a text that holds what it looks
for, and drops an ASCII text's digits by byte translation: these pin what it
gives on either side of each test (ASCII or not, with a hash or without)."""

import pytest

from monitor.detect.analysis.outcomes import (
    _REJECTION_GROUPS,
    _REJECTION_WORDS,
    _holds_a_rejection_word,
    body_lines,
    normalise,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain words, no digits", "plain words, no digits"),
        ("exit 12 after 3 tries", "exit after tries"),
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("wrote /tmp/tmpab12cd/x.py", "wrote /tmp/<tmp>/x.py"),
        ("in /var/folders/xy/T/a and /private/var/q/b", "in /var/folders/<tmp>/t/a and /private/var/<tmp>/b"),
        ("object at 0x7f3a2b here", "object at x here"),
        ("commit 9f3e2a1b done", "commit done"),
        ("word deadbeef has no digit", "word deadbeef has no digit"),
        ("run 1234567 and 123456", "run and"),
        ("abcdef1x is no hash", "abcdefx is no hash"),
        ("Ünïcode 9f3e2a1b ٣ digits 42", "ünïcode digits"),
        ("Ünïcode without hash 12", "ünïcode without hash"),
        ("tabs\tand\nnewlines  squashed", "tabs and newlines squashed"),
    ],
)
def test_normalise(text, expected):
    assert normalise(text) == expected


def test_a_long_text_is_clipped_after_normalising():
    assert normalise("1" * 50 + "x" * 300) == "x" * 240
    assert normalise("é" + "x" * 300, limit=10) == "é" + "x" * 9


def test_body_lines_are_normalised_alike():
    assert body_lines("error at 0x1f in /tmp/abc/f.py:12\nexit code 1") == body_lines(
        "error at 0x2e in /tmp/xyz/f.py:40\nexit code 2"
    )
    assert body_lines("commit 9f3e2a1b\nÜ 7") == frozenset({hash("commit"), hash("ü")})


def test_the_rejection_words_are_found_through_their_pieces():
    """Each refusal word is tested only once the text holds its piece: every word holds
    its piece, and a text holds a word exactly when the flat search over all finds one."""
    assert sorted(word for _, words in _REJECTION_GROUPS for word in words) == sorted(_REJECTION_WORDS)
    assert all(piece in word for piece, words in _REJECTION_GROUPS for word in words)
    texts = [*_REJECTION_WORDS, *(f"x {word[:-1]} y" for word in _REJECTION_WORDS), "", "old", "not  found"]
    texts += [f"error: {a} and {b[1:]}" for a, b in zip(_REJECTION_WORDS, _REJECTION_WORDS[1:])]
    for text in texts:
        assert _holds_a_rejection_word(text) == any(word in text for word in _REJECTION_WORDS), text
