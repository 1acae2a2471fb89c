"""Two small CLI faults of issue 32: a far-off ``ts`` reported as written, a search text starting with '-'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from monitor.formats.native import parse_ts
from monitor.store import Store
from tests.test_data_loss import burst
from tests.test_watch_headless import ROOT, env_for


def loopwatch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(tmp_path),
        timeout=120,
    )


def test_a_ts_of_1e300_is_reported_as_1e300(tmp_path):
    log = tmp_path / "agent.jsonl"
    log.write_text(
        json.dumps({"type": "message", "session": "s", "role": "user", "content": "hi", "ts": 1e300}) + "\n"
    )
    done = loopwatch(tmp_path, "scan", str(log))
    assert "ts 1e+300 is out of range" in done.stderr, done.stderr
    assert "1e+297" not in done.stderr
    assert parse_ts(1_700_000_000_000, 0.0) == 1_700_000_000.0  # milliseconds still read as such


def test_history_search_for_text_starting_with_a_dash(tmp_path):
    db = tmp_path / "lw.db"
    with Store(db) as store:
        store.upsert_session({"id": "b", "agent": "a"})
        store.add_events(burst(3))
    for query in ("-error", "-event"):
        done = loopwatch(tmp_path, "history", "--db", str(db), "--search", query)
        assert done.returncode == 0, done.stderr
        assert "expected one argument" not in done.stderr
    done = loopwatch(tmp_path, "history", "--db", str(db), "--search", "-event", "--json")
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[0])["id"] == "b", done.stderr
