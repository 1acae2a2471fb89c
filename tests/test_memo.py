"""The bounded text memos the analysis shares between sessions (analysis/memo.py)."""

from __future__ import annotations

import pytest

from monitor.detect.analysis.memo import TextMemo


def test_a_memo_answers_once_per_short_text_and_stays_bounded():
    asked: list[str | None] = []

    def work(text: str | None) -> str:
        asked.append(text)
        return str(text).upper()

    memo = TextMemo(max_chars=8, max_size=3, work=work)
    assert memo["ls"] == "LS" and memo["ls"] == "LS"
    assert asked == ["ls"]
    long = "x" * 9
    assert memo[long] == long.upper() and memo[long] == long.upper()
    assert asked.count(long) == 2 and long not in memo  # too long to keep
    assert memo[None] == "NONE" and memo[None] == "NONE"  # a key that is not text (a tool's missing name)
    assert asked.count(None) == 1
    for n in range(10):
        assert memo[f"t{n}"] == f"T{n}"
        assert len(memo) <= 3
    assert memo.keeps("12345678") and not memo.keeps("123456789")
    assert memo.remember(("k", True), 1) == 1 and memo[("k", True)] == 1


def test_a_memo_without_work_only_remembers():
    """A table filled by hand (a run's outcome, keyed by its text and exit):
    what it lacks is a KeyError, not a guess."""
    memo = TextMemo(max_chars=8, max_size=3)
    assert memo.get("ls") is None
    with pytest.raises(KeyError):
        memo["ls"]
    memo.remember("ls", 1)
    assert memo["ls"] == 1
