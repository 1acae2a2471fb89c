"""`loopwatch demo --headless`: real agent processes, a warning within 15 s,
injects that reach the agents and change what they do, and a kill that ends
a process."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest


@pytest.mark.slow
def test_headless_demo_detects_injects_and_kills(tmp_path):
    """The whole loop on the built-in agents: detect, nudge (behaviour changes), kill."""
    db = tmp_path / "demo.sqlite"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "demo",
            "--headless",
            "--duration",
            "12",
            "--db",
            str(db),
            "--keep",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = run.stderr
    started = re.search(r"agents in (\S+);", err)
    assert started, f"exit {run.returncode}\nstdout:\n{run.stdout[-3000:]}\nstderr:\n{err[-3000:]}"
    directory = Path(started.group(1))
    try:
        assert run.returncode == 0, err
        first = float(re.search(r"first warning after ([\d.]+) s", err).group(1))
        assert first < 15
        assert re.search(r"inject \S+ -> delivered", err)
        assert re.search(r"operator kills \S+: SIGTERM pid \d+", err)
        assert re.search(r"kill \S+ -> delivered \(pid \d+ exited", err)
        assert "killed by loopwatch" in err
        # An injected agent got the nudge as a user turn and then did something else.
        injected = 0
        for log in directory.glob("*.jsonl"):
            if log.name.endswith(".inbox.jsonl"):
                continue
            records = [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()]
            nudges = [
                i
                for i, r in enumerate(records)
                if r.get("type") == "message"
                and r.get("role") == "user"
                and str(r.get("content", "")).startswith("[loopwatch]")
            ]
            if not nudges:
                continue
            injected += 1
            before = {
                orjson.dumps(r.get("args"), option=orjson.OPT_SORT_KEYS)
                for r in records[: nudges[0]]
                if r.get("type") == "tool_call"
            }
            after = [r for r in records[nudges[0] :] if r.get("type") == "tool_call"]
            if after:
                assert any(
                    orjson.dumps(r.get("args"), option=orjson.OPT_SORT_KEYS) not in before for r in after
                ), log.name
        assert injected >= 1
        from monitor.store import Store

        actions = [a for s in Store(db).list_sessions() for a in Store(db).actions(s["id"])]
        assert {"inject", "kill"} <= {a["kind"] for a in actions}
    finally:
        shutil.rmtree(directory.parent, ignore_errors=True)
