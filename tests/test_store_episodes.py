"""Loop episodes in the store: a row per episode and per rung, the first
detection of each rung kept, migration v8 grouping an older database's
detection rows (real SQLite files in tmp_path)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from sqlite_utils import Database

from monitor.config import build_config
from monitor.detect.engine import Engine
from monitor.hub.recording import Recorder
from monitor.store import Store
from monitor.store.rows import DETECTION_INSERT, detection_row
from monitor.store.schema import latest_version, migrate
from tests.eventkit import Script

ROOT = Path(__file__).resolve().parent.parent


def _loop(times: int, session: str = "s1", start: float = 1_700_000_000.0, ids: str = "c") -> Script:
    script = Script(session=session, start=start, ids=ids)
    for _ in range(times):
        script.bash("npm test", "FAILED parser.test.js - AssertionError\n1 failed", code=1)
    return script


def _record(store: Store, engine: Engine, script: Script) -> int:
    """Run the script through the engine and the hub's recorder; the detections made."""
    recorder = Recorder(store, engine)
    made = 0
    events = script.events()
    for event in events:
        processed = engine.process(event)
        made += len(processed.detections)
        recorder.add([event], list(processed.detections), None, {}, processed.episodes)
    return made


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_a_long_loop_is_a_few_rows(tmp_path: Path):
    db = tmp_path / "lw.db"
    engine = Engine(build_config({}))
    with Store(db) as store:
        made = _record(store, engine, _loop(80))
        store.flush()
    assert made > 150
    episodes = _rows(db, "SELECT number, detections, count, peak, state, first_seq, last_seq FROM episodes")
    assert len(episodes) == 1
    number, detections, count, peak, state, first_seq, last_seq = episodes[0]
    assert (number, detections, peak, state) == (1, made, "terminate", "open")
    assert count == 80 and first_seq < last_seq
    rungs = _rows(db, "SELECT level FROM episode_rungs ORDER BY id")
    assert [r[0] for r in rungs] == ["warn", "critical", "terminate"]
    (stored,) = _rows(db, "SELECT COUNT(*) FROM detections")[0]
    assert stored == len(rungs)  # the first detection of each rung, not one per repeat


def test_closes_are_recorded_in_place(tmp_path: Path):
    db = tmp_path / "lw.db"
    engine = Engine(build_config({}))
    script = _loop(10)
    with Store(db) as store:
        _record(store, engine, script)
        recorder = Recorder(store, engine)
        recorder.episodes(engine.acknowledge("s1", script.ts))
        store.flush()
    assert _rows(db, "SELECT number, state, closed FROM episodes") == [(1, "closed", "acknowledged")]


def test_a_restarted_monitor_adds_episodes_and_never_overwrites(tmp_path: Path):
    db = tmp_path / "lw.db"
    first = _loop(10)
    with Store(db) as store:
        _record(store, Engine(build_config({})), first.end())
    with Store(db) as store:  # a new run: its engine numbers episodes from 1 again
        _record(store, Engine(build_config({})), _loop(10, start=first.ts + 100, ids="d"))
        store.flush()
    rows = _rows(db, "SELECT number, state, closed, first_seq FROM episodes ORDER BY number")
    assert [(n, s, c) for n, s, c, _ in rows] == [(1, "closed", "session ended"), (2, "open", None)]
    assert rows[1][3] > rows[0][3]


def test_migration_v8_groups_old_detection_rows_into_episodes(tmp_path: Path):
    """A v7 database (as main's code wrote it: a detection row per repeat) is
    converted on open: one episode per loop, the first detection of each rung kept."""
    db = tmp_path / "old.db"
    old = Database(db)
    migrate(old, upto=7)
    engine = Engine(build_config({}))
    detections = engine.process_many(_loop(40).events()) + engine.process_many(
        _loop(10, session="s2", ids="e").events()
    )
    old.execute("INSERT INTO sessions (id, status, events) VALUES ('s1', 'ended', 81), ('s2', 'live', 21)")
    with old.conn:
        old.conn.executemany(DETECTION_INSERT, [detection_row(d) for d in detections])
    old.close()
    before = len(detections)

    with Store(db):
        pass
    assert _rows(db, "SELECT MAX(version) FROM schema_version")[0][0] == latest_version() >= 8
    episodes = _rows(
        db, "SELECT session, number, detections, peak, state, closed FROM episodes ORDER BY session"
    )
    assert episodes[0][:5] == ("s1", 1, sum(d.session == "s1" for d in detections), "terminate", "closed")
    assert episodes[0][5] == "session ended"
    assert episodes[1][0] == "s2" and episodes[1][4] == "open"
    (after,) = _rows(db, "SELECT COUNT(*) FROM detections")[0]
    (rungs,) = _rows(db, "SELECT COUNT(*) FROM episode_rungs WHERE episode IS NOT NULL")[0]
    assert after == rungs and after < before // 10


# -- the outputs, through the real CLI ---------------------------------------------


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "LOOPWATCH_CONFIG_DIR": str(tmp_path / "config"),
        "LOOPWATCH_DATA_DIR": str(tmp_path),
    }
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _recorded(tmp_path: Path, repeats: int = 200) -> Path:
    db = tmp_path / "lw.db"
    engine = Engine(build_config({}))
    with Store(db) as store:
        _record(store, engine, _loop(repeats))
        store.upsert_session({"id": "s1", "agent": "demo", "status": "live", "level": "terminate"})
    return db


def test_show_history_and_exports_speak_of_episodes(tmp_path: Path):
    db = _recorded(tmp_path)
    shown = _cli(tmp_path, "show", "--db", str(db), "s1")
    assert shown.returncode == 0, shown.stderr
    assert "loop episodes (1)" in shown.stdout and "×200" in shown.stdout
    assert "detections (3: the first of each rung)" in shown.stdout
    as_json = json.loads(_cli(tmp_path, "show", "--db", str(db), "s1", "--json").stdout)
    (episode,) = as_json["episodes"]
    assert episode["count"] == 200 and episode["detectors"][0] == "exact_repeat"
    history = _cli(tmp_path, "history", "--db", str(db))
    assert "EPISODES" in history.stdout.splitlines()[0]
    assert (
        json.loads(_cli(tmp_path, "history", "--db", str(db), "--json").stdout.splitlines()[0])["episodes"]
        == 1
    )
    markdown = _cli(tmp_path, "show", "--db", str(db), "s1", "--format", "markdown").stdout
    assert "| Loop episodes | 1 |" in markdown and "**Episode 1** — **terminate**" in markdown
    document = json.loads(_cli(tmp_path, "show", "--db", str(db), "s1", "--format", "json").stdout)
    assert [r["level"] for r in document["episodes"][0]["rungs"]] == ["warn", "critical", "terminate"]
    assert len(document["detections"]) == 3


def test_a_long_loops_export_stays_small(tmp_path: Path):
    """The export of a session that looped 2,000 times is not 2,000 detections with their evidence."""
    db = _recorded(tmp_path, repeats=2000)
    document = _cli(tmp_path, "show", "--db", str(db), "s1", "--format", "json").stdout
    markdown = _cli(tmp_path, "show", "--db", str(db), "s1", "--format", "markdown").stdout
    assert len(document) < 100_000 and len(markdown) < 50_000
