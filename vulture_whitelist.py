"""What vulture takes for dead code in monitor/ but is used where it cannot see.

Run by tests/test_layers.py (``python -m vulture``; settings in pyproject.toml).
Textual's conventions (``on_*``, ``action_*``, ``DEFAULT_CSS``…) are ignored
there by name.  Add a name here only with its reason; delete code that is
really unused instead.
"""

# ruff: noqa
# mypy: ignore-errors
_ = object()

# -- registered by a decorator or a base class, found by name ------------------------------
# Detectors register in monitor.detect.base.REGISTRY, line formats in
# monitor.formats.registry, both when their module is imported.
Chanting, CompactionLoop, Cycle, ExactRepeat, Fingerprint, Limits, Monologue  # detectors
OutputSimilarity, RepeatedResult, RetryRounds, SimilarArgs, Swarm, FailureCascade  # detectors
TurnSimilarity, Waiting  # detectors
ClaudeDecoder, CodexDecoder  # line formats
_close_open_clients  # @atexit.register

# -- public API: called by agents, hooks and scripts outside this package ------------------
_.session_start, _.tool_call, _.tool_result, _.compaction, _.session_end  # LoopwatchClient
_.ok  # control.Outcome, for callers of act()
Channel  # control: the protocol every channel follows (documentation for implementers)
UNSUPPORTED  # control: one of the outcome statuses, spelled as callers compare it
_.sync  # FileSource.sync: check now instead of waiting for the next rescan
_.process_many, _.unmute  # Engine: replay and the operator's unmute
_.prune  # Store.prune: retention on demand
read_events, write_trace  # scan.read_events; demo.synthetic.write_trace (benchmarks, tests)
plain_markup  # ui.literal: what the widgets show, as tests/test_ui_literal.py checks it
_.owns, _.text_only  # detect.turns: the turn API, as the detector tests use it

# -- counters and state read by tests, benchmarks and doctor --------------------------------
_.connects  # client
_.events_processed, _.detections_total  # engine, hub
_.ignored  # formats.otlp: records a request carried that are not agent telemetry
_.requests, _.accepted, _.refused, _.pushes_dropped, _.batches, _.submitted  # sources: otlp, sockets, ingest
_.transactions, _.pruned, transactions, spilled, pruned, _.stopped_sessions  # store statistics
_.flushes, _.cell_updates, _.rebuilds, _.queries, _.lines_rendered  # UI instrumentation
_.replay_reports, replay_reports  # ui detail screen: what a replay found (tests)

# -- set for a library that reads them ---------------------------------------------------------
_.rejected_log_records, _.rejected_spans, _.error_message  # OTLP protobuf response fields
_.grid_size_columns, _.show_command_palette, _.no_wrap, _.virtual_size  # Textual / Rich attributes
_._require_update_dimensions  # Textual DataTable: forces a re-measure
signum, frame  # signal handler signature
parameters  # Textual check_action(action, parameters) signature
everything  # SessionsTable.apply: one signature for every table the live view feeds

# -- dead code the detect and hub branches remove (delete these lines once they are merged) --
looks_like_failure, line_marks, turn_words, token_hashes, overlap, is_waited, DESIGN_VALUES
_._joins, _.text_value, _.started_ts, _.tool_calls_seen

# -- used only by tests and benchmarks ---------------------------------------------------------
jaccard  # text: the similarity measure the turn-similarity design note is checked against
iter_lines  # framing: benchmarks/bench_scan.py reads whole files with it
name_of  # formats.documents: which document format a path is
_.with_preset  # Config: the same file on top of another preset
