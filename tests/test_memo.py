"""The bounded text memos the analysis shares between sessions (analysis/memo.py)."""

from __future__ import annotations

from monitor.detect.analysis.memo import TextMemo


def test_a_memo_answers_once_per_short_text_and_stays_bounded():
    asked: list[str] = []

    def work(text: str) -> str:
        asked.append(text)
        return text.upper()

    memo = TextMemo(max_chars=8, max_size=3)
    assert memo.answer("ls", work) == "LS" and memo.answer("ls", work) == "LS"
    assert asked == ["ls"]
    long = "x" * 9
    assert memo.answer(long, work) == long.upper() and memo.answer(long, work) == long.upper()
    assert asked.count(long) == 2 and long not in memo  # too long to keep
    for n in range(10):
        memo.answer(f"t{n}", work)
        assert len(memo) <= 3
    assert memo.keeps("12345678") and not memo.keeps("123456789")
    assert memo.remember(("k", True), 1) == 1 and memo[("k", True)] == 1
