"""A watcher killed with SIGKILL: its sessions read ``stopped``, not ``live`` (issue 15).

A real ``watch --headless`` subprocess records a session that has not ended;
while it runs, ``history`` says ``live``; after SIGKILL (no chance to record
anything), ``history``, ``show`` and the TUI's reader say ``stopped``, and the
next store to open the database marks the row so.  Polling with deadlines.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from monitor.store import Store

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 60.0


def wait_until(predicate, what: str):
    deadline = time.monotonic() + DEADLINE
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling a condition with a deadline


def stored_status(db: Path) -> str | None:
    """The raw ``sessions.status`` of the session, read as sqlite3 would."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            row = conn.execute("SELECT status FROM sessions WHERE id = 'open-1'").fetchone()
    except sqlite3.Error:  # the schema is still being created
        return None
    return row[0] if row else None


def loopwatch(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def history_status(env: dict, db: Path) -> str:
    out = loopwatch(env, "history", "--db", str(db), "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {row["id"]: row["status"] for row in rows}["open-1"]


def test_sessions_of_a_sigkilled_watcher_read_stopped(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    now = time.time()
    records = [{"type": "session_start", "session": "open-1", "agent": "claude-code", "ts": now}]
    records += [
        {
            "type": "tool_call",
            "session": "open-1",
            "id": f"c{i}",
            "name": "bash",
            "args": {"cmd": f"cat f{i}.py"},
            "ts": now + i,
        }
        for i in range(3)
    ]
    (logs / "open.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))  # no session_end
    db = tmp_path / "watch.db"
    env = {
        **os.environ,
        "LOOPWATCH_CONFIG_DIR": str(tmp_path / "config"),
        "LOOPWATCH_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("LOOPWATCH_TOKEN", None)
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor",
            "watch",
            "--headless",
            "--no-socket",
            "--from-start",
            "--db",
            str(db),
            str(logs),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: stored_status(db) == "live", "the watcher to record the session live")
        assert history_status(env, db) == "live"  # its watcher runs
        watcher.send_signal(signal.SIGKILL)
        watcher.wait(timeout=DEADLINE)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert stored_status(db) == "live"  # nothing could record the kill ...
    assert history_status(env, db) == "stopped"  # ... but readers see the watcher is gone
    show = loopwatch(env, "show", "open-1", "--db", str(db))
    assert show.returncode == 0 and "status     stopped" in show.stdout, show.stdout + show.stderr
    with Store(db) as store:  # the next watcher to open the database marks it
        assert store.stopped_sessions == 1
        assert store.get_session("open-1")["status"] == "stopped"
    assert stored_status(db) == "stopped"


async def test_tui_history_shows_a_sigkilled_watchers_session_stopped(tmp_path):
    """The TUI's history list and a stored session's detail header read the same status."""
    from monitor.config import Config
    from monitor.ui.app import LoopwatchApp
    from tests.scripted import frozen_clock

    db = tmp_path / "tui.db"
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from monitor.store import Store\n"
            "store = Store(sys.argv[1]); store.start()\n"
            "now = time.time()\n"
            "store.upsert_session({'id': 'tui-1', 'agent': 'codex', 'status': 'live',"
            " 'first_seen': now, 'last_seen': now})\n"
            "store.flush(); print('ready', flush=True); sys.stdin.read()\n",
            str(db),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert recorder.stdout.readline().strip() == "ready"
        recorder.send_signal(signal.SIGKILL)
        recorder.wait(timeout=DEADLINE)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
    app = LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one("#history-table")
        deadline = time.monotonic() + DEADLINE
        while table.row_count == 0 and time.monotonic() < deadline:
            await pilot.pause()
        cells = [str(cell) for cell in table.get_row("tui-1")]
        assert "stopped" in cells and "live" not in cells, cells
