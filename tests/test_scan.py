"""scan(): what one scan leaves behind."""

from __future__ import annotations

import gc

from tests.conftest import SCENARIOS


def test_a_scan_makes_no_reference_cycles(tmp_path):
    """scan() runs the cyclic garbage collector rarely because scanning makes
    no reference cycles: with the collector off, a scan of a synthetic trace,
    the whole corpus and the real transcripts leaves it nothing to free."""
    from monitor.demo.synthetic import write_trace
    from monitor.scan import scan
    from tests.conftest import FIXTURES

    trace = tmp_path / "trace.jsonl"
    write_trace(str(trace), 20_000, sessions=20, seed=2, loop_rate=0.1)
    paths = [str(trace), *map(str, sorted(SCENARIOS.glob("*.jsonl")))]
    paths.append(str(FIXTURES))
    thresholds = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        report = scan(paths)
        left = gc.collect()
    finally:
        gc.enable()
    assert report.events > 20_000 and report.detections
    assert left == 0
    assert gc.get_threshold() == thresholds  # the scan put the collector back as it was
