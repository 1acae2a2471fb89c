"""`scan --jobs N`: sessions sharded among worker processes, and the output
exactly what one process prints -- the same detections, lines, levels and
order -- on the corpus, the real transcripts, a generated multi-session
trace with swarm loops, and a re-scanned database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import psutil
import pytest

from monitor.config import load_config
from monitor.demo.synthetic import write_trace
from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.events import EventRef, Level
from monitor.formats.lines import LineDecoder
from monitor.scan import format_human, read_events, scan, scan_sharded, scan_store
from monitor.scan_jobs import ScanAborted, _independent, default_jobs, shard_of
from monitor.store import Store

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _lines(report) -> list[bytes]:
    return [orjson.dumps(d.to_dict()) for d in report.detections]


def _same(one, many) -> None:
    assert _lines(many) == _lines(one)
    assert [(d.level, d.proposed, d.suppressed) for d in many.detections] == [
        (d.level, d.proposed, d.suppressed) for d in one.detections
    ]
    assert format_human(many, Level.NOTICE) == format_human(one, Level.NOTICE)
    assert (many.events, many.lines, many.problem_count) == (one.events, one.lines, one.problem_count)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """A generated trace of 30,000 events in 40 sessions, loops and swarms among them."""
    path = tmp_path_factory.mktemp("trace") / "trace.jsonl"
    write_trace(str(path), 30_000, 40, seed=7)
    return path


@pytest.mark.parametrize("jobs", [2, 3])
def test_corpus_and_transcripts_scan_the_same_in_any_number_of_jobs(jobs):
    """The whole scenario corpus and the bundled examples, scanned together
    (so the swarm sees every session), give byte-identical output."""
    paths = [str(TESTS / "scenarios"), str(ROOT / "monitor" / "examples")]
    one = scan(paths)
    many = scan(paths, jobs=jobs)
    assert one.detections and any(d.level >= Level.WARN for d in one.detections)
    _same(one, many)


@pytest.mark.parametrize("preset", ["balanced", "aggressive"])
def test_a_generated_multi_session_trace_scans_the_same_in_two_and_three_jobs(trace, preset):
    """Thousands of detections, hundreds of them the swarm's (counted in the
    parent from what the workers sighted), identical to one process."""
    config = load_config(None, preset=preset)
    one = scan([str(trace)], config)
    assert sum(d.detector == "swarm" for d in one.detections) > 50
    assert len({d.session for d in one.detections}) > 10
    for jobs in (2, 3):
        _same(one, scan([str(trace)], config, jobs=jobs))


def test_the_collector_runs_rarely_until_the_merge_is_done(trace, monkeypatch):
    """The workers' results are unpickled and merged as tens of thousands of
    new objects and no cycles: the parent keeps the scan's rare collections
    until the merge is done, and puts the threshold back after."""
    import gc

    import monitor.scan_jobs as scan_jobs
    from monitor.scan import SCAN_GC_THRESHOLD

    thresholds = []
    merge = scan_jobs.merge

    def merge_noting_the_threshold(results, config):
        thresholds.append(gc.get_threshold()[0])
        return merge(results, config)

    monkeypatch.setattr(scan_jobs, "merge", merge_noting_the_threshold)
    before = gc.get_threshold()
    scan_sharded([str(trace)], None, None, 2)
    assert thresholds and thresholds[0] >= SCAN_GC_THRESHOLD
    assert gc.get_threshold() == before


def test_workers_place_each_detection_and_its_costs_at_its_own_event(trace):
    """A worker feeds its share of the events in batches and still places
    each detection and its costs at its own event, as one process does."""
    one = scan([str(trace)])
    assert any(d.cost for d in one.detections)
    _same(one, scan_sharded([str(trace)], None, None, 2))


def test_every_session_belongs_to_one_worker_whatever_the_process():
    """The shard of a session is a stable hash (not Python's salted one), so
    workers started any way agree."""
    code = (
        "from monitor.scan_jobs import shard_of; print([shard_of(s, 3) for s in ('a', 'b', 'é', 'x' * 99)])"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert runs == {f"{[shard_of(s, 3) for s in ('a', 'b', 'é', 'x' * 99)]}\n"}


def test_the_merge_falls_back_when_it_cannot_prove_one_process_order():
    """A swarm detection citing exactly the evidence of another detection of
    the same event (which one process would have merged) is not merged blind."""
    evidence = (EventRef(3, "tool_call", "f", 3, "x"), EventRef(5, "tool_call", "f", 5, "x"))

    def detection(detector: str) -> Detection:
        return Detection(
            detector, Level.WARN, 1.0, "m", "p", evidence=evidence, session="s", proposed=Level.WARN
        )

    own, swarm = detection("exact_repeat"), detection("swarm")
    assert not _independent([(9, 0, 0, own), (9, 1, 0, swarm)], {9: [swarm]})
    other = Detection(
        "cycle", Level.WARN, 1.0, "m", "q", evidence=evidence[:1], session="s", proposed=Level.WARN
    )
    assert _independent([(9, 0, 0, other), (9, 1, 0, swarm)], {9: [swarm]})


def test_cli_jobs_output_is_identical_and_bad_counts_are_refused(trace):
    """`loopwatch scan --jobs 2 --json` prints what `--jobs 1` prints, and
    exits the same; `--jobs 0` is a usage error."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "monitor", "scan", *args], cwd=ROOT, capture_output=True, timeout=300
        )

    one, two = run("--json", "--jobs", "1", str(trace)), run("--json", "--jobs", "2", str(trace))
    assert one.returncode == two.returncode == 1
    assert two.stdout == one.stdout and one.stdout.count(b"\n") > 100
    bad = run("--jobs", "0", str(trace))
    assert bad.returncode == 2 and b"--jobs" in bad.stderr


def test_default_job_count_uses_every_core_only_for_big_inputs(tmp_path, trace):
    """Standard input and small files run in one process (starting workers
    would cost more than the scan)."""
    small = tmp_path / "small.jsonl"
    small.write_text('{"type":"message","session":"s","role":"user","content":"hi"}\n')
    assert default_jobs([str(small)]) == 1
    assert default_jobs(["-"]) == 1
    big = tmp_path / "big.jsonl"
    big.write_bytes(trace.read_bytes() * (1 + (4 << 20) // trace.stat().st_size))
    assert default_jobs([str(big)]) == len(os.sched_getaffinity(0))


def test_a_rescanned_database_gives_the_same_detections_in_two_jobs(tmp_path, trace):
    """`scan --db` shards the stored sessions the same way; each worker replays
    every session in the stored order and runs its own."""
    db = tmp_path / "x.db"
    engine = Engine(load_config(None))
    store = Store(db)
    store.start()
    decoder = LineDecoder(str(trace))
    batch = []
    for event in read_events(str(trace), decoder):
        engine.process(event).detections
        batch.append(event)
        if len(batch) >= 1000:
            store.add_events(batch)
            batch = []
    store.add_events(batch)
    for session in engine.sessions:
        store.upsert_session({"id": session, "kind": "file", "status": "ended"})
    store.flush()
    store.close()
    store = Store(db)
    try:
        one = scan_store(store)
        many = scan_store(store, jobs=2)
        assert one.events == many.events == 30_000
        assert sum(d.detector == "swarm" for d in one.detections) > 50
        assert _lines(many) == _lines(one)
        assert format_human(many) == format_human(one)
    finally:
        store.close()


def _has_open(pid: int, path) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            pass
    return False


def _scan_workers() -> list:
    """This process's forked scan workers: children that run its own command line
    (not another child of the suite, such as the mypy run beside it)."""
    me = psutil.Process()
    workers = []
    for child in me.children():
        try:
            if child.cmdline() == me.cmdline():
                workers.append(child)
        except psutil.Error:
            pass  # (gone meanwhile)
    return workers


def test_a_worker_that_dies_is_reported_with_the_file_it_was_reading(trace):
    """SIGKILL of a worker mid-scan: the scan raises ScanAborted naming the
    file, never a partial result as if it were complete."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["report"] = scan_sharded([str(trace)], None, None, 2)
        except ScanAborted as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    workers: list = []
    while not workers or not all(_has_open(worker.pid, trace) for worker in workers):
        assert time.monotonic() < deadline and "report" not in outcome, "no worker opened the log"
        time.sleep(0.005)
        workers = _scan_workers()
    for worker in workers:
        os.kill(worker.pid, signal.SIGKILL)
    thread.join(60)
    assert "report" not in outcome
    assert "worker process died" in outcome["error"] and str(trace) in outcome["error"]


def test_a_fifo_is_scanned_in_one_process(tmp_path):
    """Workers would split a FIFO's lines between them: it is read once, by
    this process, and scans as with one job."""
    fifo = tmp_path / "agent.jsonl"
    os.mkfifo(fifo)
    lines = (TESTS / "scenarios").glob("*.jsonl")
    data = next(iter(sorted(lines))).read_bytes()
    writer = threading.Thread(target=lambda: fifo.write_bytes(data), daemon=True)
    writer.start()
    outcome: dict = {}
    scanner = threading.Thread(
        target=lambda: outcome.update(report=scan_sharded([str(fifo)], None, None, 2)), daemon=True
    )
    scanner.start()
    scanner.join(60)
    writer.join(60)
    report = outcome["report"]  # (a KeyError: the scan never finished)
    assert report.events == data.count(b"\n") and report.lines == report.events


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_command_scans_a_pipe_as_the_file_it_carries(tmp_path, jobs):
    """``loopwatch scan <(zcat log.jsonl.gz)``: a pipe is read once, with no
    test open before it (its writer would lose its reader) and no seeking
    for the progress display, and scans as the file would."""
    log = TESTS / "scenarios" / "a_loop_backup_restored_nine_times.jsonl"
    fifo = tmp_path / log.name  # (a log without session ids is named for its file)
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(log.read_bytes()), daemon=True)
    writer.start()
    command = [sys.executable, "-m", "monitor", "scan", "--json", "--jobs", jobs]
    piped = subprocess.run([*command, str(fifo)], capture_output=True, timeout=120, cwd=ROOT)
    writer.join(60)
    direct = subprocess.run([*command, str(log)], capture_output=True, timeout=120, cwd=ROOT)
    assert piped.returncode == direct.returncode == 1, piped.stderr
    assert piped.stdout == direct.stdout.replace(bytes(log), bytes(fifo)) and piped.stdout


def test_bad_lines_are_reported_once_in_line_order_whoever_decodes_them(tmp_path):
    """Each worker decodes only the lines that may be its own: the bad lines
    of every session (a wrong field, a far-off time, broken JSON, a line
    with no session to tell, more of them than a file keeps) come out once,
    in line order, counted and kept as by one process."""
    import random

    rng = random.Random(5)
    lines = []
    for n in range(12_000):
        session = f"s{rng.randrange(12)}"
        roll = rng.random()
        if roll < 0.25:
            lines.append(
                f'{{"type":"tool_call","session":"{session}","ts":1750000000.5,"id":7,"name":"bash","args":{{}}}}'
            )
        elif roll < 0.3:
            lines.append(f'{{"type":"message","session":"{session}","ts":9e15,"role":"user","content":"x"}}')
        elif roll < 0.35:
            lines.append('{"type":"tool_call","session":')
        elif roll < 0.4:
            lines.append('{"type":"message","ts":1750000000.5,"role":"user","content":"no session"}')
        elif roll < 0.42:
            lines.append("[1, 2]")
        else:
            lines.append(
                f'{{"type":"tool_call","session":"{session}","ts":{1750000000 + n}.5,"id":"c{n}",'
                f'"name":"bash","args":{{"command":"pytest -q"}}}}'
            )
    log = tmp_path / "mixed.jsonl"
    log.write_text("\n".join(lines) + "\n")
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(lines[:500]) + "\n")
    paths = [str(log), str(other)]
    one = scan(paths)
    assert one.problem_count > 1_000 and len(one.problems) < one.problem_count
    for jobs in (2, 3):
        many = scan_sharded(paths, None, None, jobs)
        _same(one, many)
        assert [str(p) for p in many.problems] == [str(p) for p in one.problems]
