"""Reasoning going round one sentence without blank lines (analysis/passages.repeated_line)."""

from __future__ import annotations

from monitor.detect.analysis.passages import repeated_line

ASK = '"Please provide the contents of `clamp.py` and `test_clamp.py` so I can apply the fix."'


def circling(times: int) -> str:
    return "\n".join(f"Wait, maybe they expect me to ask first ({i}).\n{ASK}\nDone." for i in range(times))


def test_the_same_sentence_between_other_lines_is_repeated():
    found = repeated_line(circling(5), 40, 5, 100_000)
    assert found is not None and found.count == 5
    assert found.passage.startswith("wait, maybe they expect")


def test_four_times_is_not_enough():
    assert repeated_line(circling(4), 40, 5, 100_000) is None


def test_sentences_opening_alike_back_to_back_are_one_list():
    report = "".join(
        f"Updated the configuration file for the authentication service, module {i}\n" for i in range(30)
    )
    assert repeated_line(report, 40, 5, 100_000) is None


def test_code_lists_quotes_and_trees_are_not_sentences():
    for line in (
        "    return backoff.retry(call, attempts=settings.attempts, timeout=settings.timeout)",
        "- I will update the retry settings in every client file to use the helper.",
        "> Note: every replica reports the same configuration version, it is fine.",
        "├── auth-replica-config.yaml (unchanged since the last deploy, again)",
        "| auth-1 | running | 3 days | unchanged since the last deploy |",
    ):
        text = "\n".join(f"{line}\nSomething else number {i} happened here." for i in range(8))
        assert repeated_line(text, 40, 5, 100_000) is None, line


def test_fenced_code_is_skipped():
    body = "\n".join(f"{ASK}\nother line {i} of the same function body, code" for i in range(8))
    assert repeated_line("```\n" + body + "\n```\n", 40, 5, 100_000) is None


def test_lines_that_differ_within_their_opening_differ():
    text = "\n".join(
        f"The file `{n}_client.py` builds its own retry loop; I will replace it.\nOK." for n in "abcdefgh"
    )
    assert repeated_line(text, 40, 5, 100_000) is None
