"""What vulture takes for dead code in monitor/ but is used where it cannot see.

Run by tests/test_layers.py (``python -m vulture``; settings in pyproject.toml),
which also checks that every name here still exists.  Textual's conventions
(``on_*``, ``action_*``, ``DEFAULT_CSS``…) are ignored there by name.  Add a
name here only with its reason; delete code that is really unused instead.
"""

# ruff: noqa
# mypy: ignore-errors
_ = object()

# -- registered by a decorator, found by name -------------------------------------------------
ClaudeDecoder, CodexDecoder  # line formats: @register_line_format (monitor/formats/registry.py)
_close_open_clients  # client: @atexit.register

# -- public API: called by agents, hooks and scripts outside this package ---------------------
_.session_start, _.tool_call, _.tool_result, _.compaction, _.session_end  # LoopwatchClient
_.ok  # control.Outcome, for callers of act()
Channel  # control: the protocol every channel follows (documentation for implementers)
UNSUPPORTED  # control: one of the outcome statuses, spelled as callers compare it
_.sync  # FileSource.sync: check now instead of waiting for the next rescan
_.process_many, _.unmute  # Engine: a batch at once; the operator's unmute
_.writelines  # text.PrintableStream: the file protocol (else __getattr__ would pass it through unescaped)

# -- counters and state read by tests, benchmarks and doctor ----------------------------------
_.connects  # client
_.file_pauses  # hub: times a file source waited for the store (tests/test_file_flood.py)
_.events_processed, _.detections_total  # engine, hub
_.ignored  # formats.otlp: records a request carried that are not agent telemetry
_.requests, _.accepted, _.refused, _.pushes_dropped, _.batches, _.submitted  # sources: otlp, sockets, ingest
_.store_waits  # the ingest pump: rounds sliced while the store was behind (bench_overload)
_.transactions, _.pruned, transactions, spilled, pruned, _.stopped_sessions  # store statistics
_.flushes, _.cell_updates, _.rebuilds, _.queries, _.lines_rendered  # UI instrumentation
_.replay_reports, replay_reports  # ui detail screen: what a replay found (tests)

# -- set for a library that reads them ----------------------------------------------------------
_.rejected_log_records, _.rejected_spans, _.error_message  # OTLP protobuf response fields
_.grid_size_columns, _.show_command_palette, _.no_wrap, _.virtual_size  # Textual / Rich attributes
_._require_update_dimensions  # Textual DataTable: forces a re-measure
frame  # signal handler signature (signum, frame)
parameters  # Textual check_action(action, parameters) signature

# -- used only by tests and benchmarks ----------------------------------------------------------
jaccard  # text: the similarity measure the turn-similarity design note is checked against
iter_lines  # framing: benchmarks/bench_scan.py reads whole files with it
name_of  # formats.documents: which document format a path is
_.with_preset  # Config: the same file on top of another preset
read_events, write_trace  # scan.read_events; demo.synthetic.write_trace
plain_markup  # ui.literal: what the widgets show, as tests/test_ui_literal.py checks it
_.text_only, _.text_value  # detect.analysis.turns: the turn API, as tests/test_detect_turns.py uses it
_.parent_span_id  # otlp_export: a protobuf Span field, set to put the detection under the session's span
_.evicted  # otlp_http.Gate: strangers' connections closed to make room, as tests/test_otlp_limits.py counts them
normalize_output  # output_similarity: what a turn's compared text is, as tests/test_detect_output_similarity.py checks it
_.limited  # alerts.Counts: alerts the rate limit held back, as tests/test_alerts.py counts them

# -- the interface detectors are given ------------------------------------------------------------
_.started_ts, _.tool_calls_seen  # SessionView: what a detector may read about its session
_.closed_episodes  # SessionSummary: the latest closed episodes, for the UI (h33-ep-ui) and tests/test_episodes.py
format_human  # scan.py: the per-detection text of a scan, which tests/test_scan_jobs.py compares across --jobs
