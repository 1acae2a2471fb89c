"""Restarting ``watch`` on the same database: each file resumes where the
previous watcher stopped; nothing is stored (or shown) twice.

Real parts: the real :class:`~monitor.hub.live.LiveMonitor` (file source, hub, SQLite store) in
process, run twice over the same files, and once a real ``watch --headless``
subprocess twice.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.hub.live import LiveMonitor
from monitor.sources.paths import StartPolicy
from tests.test_watch_headless import ROOT, env_for, loop_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures"  # copies of real transcripts (see their README)


async def run_once(paths: list[Path], db: Path, mode: str = "recent") -> LiveMonitor:
    """A watcher that reads what is there, then stops (everything flushed); it
    announces where it records while it runs (what ``doctor`` reads)."""
    announced: list[dict | None] = []
    live = LiveMonitor(
        Config(),
        paths=[str(p) for p in paths],
        start_policy=StartPolicy(mode=mode),
        db=str(db),
        use_socket=False,
        announce=announced.append,
    )
    async with live.running() as hub:
        await live.files.sync()
        await hub.join()
    assert announced == [{"socket": None, "otlp": None, "db": str(live.store.path)}, None]
    return live


def counts(db: Path) -> tuple[int, int, int, int]:
    """(events, distinct (file, line, type, seq-free) events, detections, distinct detections)."""
    with sqlite3.connect(db) as conn:
        events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        distinct = conn.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT session, file, line, type, call_id, "
            "content_hash FROM events)"
        ).fetchone()[0]
        detections = conn.execute("SELECT COUNT(*) FROM detections").fetchone()[0]
        distinct_d = conn.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT session, detector, file, line, message FROM detections)"
        ).fetchone()[0]
    return events, distinct, detections, distinct_d


def session_events(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT id, events FROM sessions").fetchall())


async def test_a_second_watcher_on_the_same_logs_stores_nothing_again(tmp_path: Path):
    log = tmp_path / "logs" / "agent.jsonl"
    log.parent.mkdir()
    log.write_text(loop_lines("s1", 6))
    db = tmp_path / "x.db"
    await run_once([log.parent], db)
    first = counts(db)
    assert first[0] == 12 and first[2] > 0
    await run_once([log.parent], db)
    assert counts(db) == first
    assert session_events(db) == {"s1": 12}


async def test_lines_appended_while_no_one_watched_are_read_once(tmp_path: Path):
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 3))
    db = tmp_path / "x.db"
    await run_once([log], db)
    with log.open("a") as out:
        out.write(loop_lines("s1", 2, start=3))
        out.write('{"type": "message", "session": "s1", "role": "assistant", "content": "half a li')
    await run_once([log], db)
    events, distinct, _detections, distinct_d = counts(db)
    assert events == distinct == 10
    with log.open("a") as out:
        out.write('ne"}\n')
    await run_once([log], db)
    events, distinct, detections, distinct_d = counts(db)
    assert events == distinct == 11 and detections == distinct_d
    with sqlite3.connect(db) as conn:
        lines = [row[0] for row in conn.execute("SELECT line FROM events ORDER BY seq")]
        assert lines == list(range(1, 12))  # numbered on from where the last watcher stopped
        assert [row[0] for row in conn.execute("SELECT seq FROM events ORDER BY seq")] == list(range(1, 12))


async def test_a_file_replaced_under_the_same_name_is_read_from_its_start(tmp_path: Path):
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("old", 3))
    db = tmp_path / "x.db"
    await run_once([log], db)
    log.rename(tmp_path / "agent.jsonl.1")  # rotated while nobody watched: outside the watched name
    log.write_text(loop_lines("new", 2))
    os.utime(log, (1, 1))  # old enough that the start policy alone would start at its end
    live = await run_once([log], db)
    assert session_events(db) == {"old": 6, "new": 4}
    assert live.hub.events_total == 4


async def test_a_truncated_file_is_read_again_from_its_start(tmp_path: Path):
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 4))
    db = tmp_path / "x.db"
    await run_once([log], db)
    with log.open("r+") as f:
        f.truncate(0)
    log.write_text(loop_lines("s2", 1))
    live = await run_once([log], db)
    assert live.hub.events_total == 2
    assert session_events(db) == {"s1": 8, "s2": 2}


async def test_a_real_claude_code_transcript_is_stored_once(tmp_path: Path):
    logs = tmp_path / "projects"
    logs.mkdir()
    shutil.copy(FIXTURES / "claude-code" / "tool_heavy.jsonl", logs / "tool_heavy.jsonl")
    db = tmp_path / "x.db"
    await run_once([logs], db)
    first = counts(db)
    assert first[0] >= 20 and first[0] == first[1]
    sessions = session_events(db)
    live = await run_once([logs], db)
    assert live.hub.events_total == 0
    assert counts(db) == first and session_events(db) == sessions


def test_watch_headless_twice_then_history_lists_each_event_once(tmp_path: Path):
    """The issue's reproduction: two real watchers one after the other, then ``history``/``show``."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_text(loop_lines("s1", 5))
    db = tmp_path / "x.db"
    env = env_for(tmp_path)
    for _ in range(2):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "monitor",
                "watch",
                "--headless",
                "--no-socket",
                "--db",
                str(db),
                str(logs),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        for line in proc.stderr:  # read until it has started (and read the files)
            if "Ctrl-C to stop" in line:
                break
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    shown = subprocess.run(
        [sys.executable, "-m", "monitor", "show", "s1", "--db", str(db), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert counts(db)[0] == counts(db)[1] == 10
    assert counts(db)[2] == counts(db)[3]


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOPWATCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("LOOPWATCH_DATA_DIR", str(tmp_path / "data"))
