"""Issue 13, "honest struggle is flagged as a loop": agents working through
setbacks (different failures, searches that find nothing, re-runs after
edits, waiting for CI) are not loops; the outcome repeating is."""

from __future__ import annotations

from monitor.detect.failures import comparable_failure, failed
from monitor.events import Level
from tests.streams import Stream, by, run

MINI_EMPTY_ONE = "<returncode>1</returncode>\n<output>\n</output>"


def _results(stream: Stream):
    engine, _ = run(stream)
    return [e for e in stream.events if e.kind.name == "TOOL_RESULT"]


def test_exit_one_of_a_search_behind_a_prefix_or_a_pipeline_is_no():
    """``cd … && grep``, ``grep … | head`` and mini-swe-agent's ``<returncode>1</returncode>``
    with an empty ``<output>`` are "no match", not a failure, and no failure signature."""
    s = Stream()
    s.call("bash", MINI_EMPTY_ONE, error=True, command="cd /testbed && grep -n retry_delay f.py")
    s.call("bash", MINI_EMPTY_ONE, error=True, command="grep -rn backoff src/ | head -20")
    s.call("bash", "Exit code 1", error=True, command="grep -rn MAX_ATTEMPTS src/ | head")
    s.call("bash", "<returncode>1</returncode>\n<output>\nTraceback\nValueError: bad\n</output>",
           error=True, command="python repro.py | head")
    results = _results(s)
    assert [failed(r) for r in results] == [False, False, False, True]
    assert [comparable_failure(r) is None for r in results[:3]] == [True] * 3


def test_greps_for_different_patterns_that_find_nothing_are_not_the_same_error():
    """Four greps for different names, each exiting 1 with nothing printed: no repeated_result, no cascade."""
    s = Stream()
    for pattern in ("retry_delay", "backoff", "max_attempts", "sleep_for"):
        s.call("bash", MINI_EMPTY_ONE, error=True, command=f"cd /testbed && grep -rn {pattern} src/ | head -5")
    _, found = run(s)
    assert not [d for d in found if d.level >= Level.WARN]
