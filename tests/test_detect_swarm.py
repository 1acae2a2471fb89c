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
