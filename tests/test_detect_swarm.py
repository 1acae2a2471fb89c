"""Swarm detector: a loop spread over workers, none over its own threshold."""

from tests.streams import Stream, by, run


def _worker(name: str, times: int, result: str, start: float) -> Stream:
    s = Stream(session=name, start=start, step=5.0)
    for _ in range(times):
        s.call("web_fetch", result, error=True, url="https://api.example.com/v1/items")
        s.call("think", f"{name} thinking {_}", note=f"{name}-{_}")
    return s


def test_workers_each_below_threshold_add_up_to_a_swarm_loop():
    """Six workers x 2 identical failing fetches = 12 across 6 sessions: flagged."""
    workers = [_worker(f"w{i}", 2, "HTTP 503 Service Unavailable", 1000.0 + i) for i in range(6)]
    engine, found = run(*workers, interleave=True)
    assert not by(found, "exact_repeat")
    hits = by(found, "swarm")
    assert hits and hits[0].count >= 10
    assert "across" in hits[0].message


def test_many_workers_each_calling_once_is_not_a_swarm_loop():
    """Twelve workers that each fetch once are sharing work, not looping."""
    workers = [_worker(f"w{i}", 1, "HTTP 503 Service Unavailable", 1000.0 + i) for i in range(12)]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def test_calls_spread_beyond_the_time_window_do_not_count():
    """The same failures an hour apart are not one loop."""
    workers = [_worker(f"w{i}", 2, "HTTP 503", 1000.0 + i * 3600) for i in range(6)]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def test_different_outcomes_are_not_the_same_loop():
    """Same call, different results per worker: not stuck together."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    workers = [_worker(f"w{i}", 2, f"items for {words[i]}", 1000.0 + i) for i in range(6)]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def _status_worker(name: str, times: int, start: float) -> Stream:
    s = Stream(session=name, start=start, step=5.0)
    for i in range(times):
        s.call("bash", "On branch main\nnothing to commit, working tree clean", command="git status")
        s.call("read_file", f"{name} part {i}", path=f"docs/{name}_{i}.md")
    return s


def test_repeated_successes_across_workers_are_not_a_swarm_loop():
    """Six read-only workers each check git status twice: same output, nothing failed."""
    workers = [_status_worker(f"w{i}", 2, 1000.0 + i) for i in range(6)]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def test_one_session_looping_alone_is_not_a_swarm():
    """One worker failing nine times and another twice: a session's own loop, not the swarm's."""
    workers = [
        _worker("w0", 9, "HTTP 503 Service Unavailable", 1000.0),
        _worker("w1", 2, "HTTP 503 Service Unavailable", 1001.0),
    ]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def test_a_session_over_its_own_threshold_still_counts_up_to_it():
    """Four workers at two failures each plus one at six: 4x2 + 2 (capped) = 10, flagged."""
    workers = [_worker(f"w{i}", 2, "HTTP 503 Service Unavailable", 1000.0 + i) for i in range(4)]
    workers.append(_worker("w9", 6, "HTTP 503 Service Unavailable", 1009.0))
    _, found = run(*workers, interleave=True)
    hits = by(found, "swarm")
    assert hits and hits[-1].count == 10


def test_cancelled_siblings_do_not_count():
    """A sibling cancellation is not the call's own outcome."""
    workers = [
        _worker(f"w{i}", 2, "<tool_use_error>Sibling tool call errored</tool_use_error>", 1000.0 + i)
        for i in range(8)
    ]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def test_the_table_is_bounded():
    """However many distinct failing calls, the table keeps at most max_patterns entries."""
    from monitor.detect.base import SessionView
    from monitor.detect.detectors.swarm import Swarm, SwarmSettings

    swarm = Swarm(SwarmSettings(max_patterns=16))
    s = Stream()
    for i in range(100):
        s.call(
            "bash",
            f"error: step {i} broke because of reason {chr(65 + i % 26)}",
            error=True,
            command=f"run {i}",
        )
    engine, _ = run(s)  # pairs calls and results
    view = SessionView("s1")
    for event in s.events:
        swarm.observe(event, view)
    assert len(swarm.table) == 16


def _tdd_worker(name: str, cases: list[str], start: float, passing: int | None = None) -> Stream:
    """A worker running ``pytest -x -q`` after each edit; one failing case per
    run, ``passing`` tests passing (by default one more each run)."""
    s = Stream(session=name, start=start, step=5.0)
    for n, case in enumerate(cases):
        passed = 10 + n if passing is None else passing
        s.call(
            "bash",
            f"Exit code 1\nFAILED tests/test_parser.py::test_parse[{case}] - assert 1 == 2\n"
            f"1 failed, {passed} passed in 0.12s",
            error=True,
            command="pytest -x -q",
        )
        s.call("edit_file", "file updated", path="src/parser.py", old=f"{name} {n}", new=f"{name} {n + 1}")
    return s


def test_workers_failing_different_parametrized_cases_are_not_stuck_together():
    """Five TDD workers, each through its own cases (test_parse[case0], then
    [case1] ...): their runs look alike once digits are dropped, but they are
    different tests, and each worker moves on."""
    workers = [_tdd_worker(f"w{i}", [f"case{2 * i}", f"case{2 * i + 1}"], 1000.0 + i) for i in range(5)]
    _, found = run(*workers, interleave=True)
    assert not by(found, "swarm")


def test_workers_failing_the_same_test_the_same_way_are_a_swarm_loop():
    """Five workers each failing the very same test twice, the same way: flagged,
    and the message names the failing test."""
    workers = [_tdd_worker(f"w{i}", ["case7", "case7"], 1000.0 + i, passing=10) for i in range(5)]
    _, found = run(*workers, interleave=True)
    hits = by(found, "swarm")
    assert hits and hits[0].count == 10
    assert "test_parse[case7]" in hits[0].message
