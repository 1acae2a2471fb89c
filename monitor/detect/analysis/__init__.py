"""What several detectors need to know about events, computed once and shared.

* :mod:`~monitor.detect.analysis.calls` — compact records of recent tool calls
  and their results (``CallRecord``, ``CallWindow``);
* :mod:`~monitor.detect.analysis.turns` — assistant turns assembled from a
  session's events (``TurnTracker``);
* :mod:`~monitor.detect.analysis.failures` — whether a result failed, how,
  and what a shell command runs (test runs, exit codes, failure kinds);
* :mod:`~monitor.detect.analysis.inputs` — what a call reads, runs and writes;
* :mod:`~monitor.detect.analysis.signatures` — call fingerprints, failure
  signatures and outcome classes (acknowledgements, "not an outcome");
* :mod:`~monitor.detect.analysis.origin` — whether the harness made a call by itself;
* :mod:`~monitor.detect.analysis.origin` — whether the harness made a call by
  itself (not the agent acting);
* :mod:`~monitor.detect.analysis.digest` — stable digests for pattern keys.

Nothing here is a detector, and nothing here imports one.
"""
