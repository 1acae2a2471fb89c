"""What several detectors need to know about events, computed once and shared.

* :mod:`~monitor.detect.analysis.calls` — compact records of recent tool calls
  and their results (``CallRecord``, ``CallWindow``);
* :mod:`~monitor.detect.analysis.turns` — assistant turns assembled from a
  session's events (``TurnTracker``);
* :mod:`~monitor.detect.analysis.shell` — what a call runs: its tool's kind,
  its command line, the simple commands and programs in it, its output's body;
* :mod:`~monitor.detect.analysis.testruns` — whether a call runs tests, and
  what a test run's output reports (counts, failing tests, a signature);
* :mod:`~monitor.detect.analysis.failures` — whether a result failed (exit
  codes, answers that are not failures), how, and what its failure is;
* :mod:`~monitor.detect.analysis.edits` — whether a call changes files, and
  file operations done by hand in the shell;
* :mod:`~monitor.detect.analysis.waits` — whether a call was made after a
  wait, or only waits;
* :mod:`~monitor.detect.analysis.memo` — bounded tables of answers by text;
* :mod:`~monitor.detect.analysis.inputs` — what a call reads, runs and writes;
* :mod:`~monitor.detect.analysis.signatures` — call fingerprints, failure
  signatures and outcome classes (acknowledgements, "not an outcome");
* :mod:`~monitor.detect.analysis.origin` — whether the harness made a call by itself;
* :mod:`~monitor.detect.analysis.origin` — whether the harness made a call by
  itself (not the agent acting);
* :mod:`~monitor.detect.analysis.digest` — stable digests for pattern keys.

Nothing here is a detector, and nothing here imports one.
"""
