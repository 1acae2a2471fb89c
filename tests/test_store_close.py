"""A cleanly closed database is whole in its ``.db`` file (issue 32, item 15).

WAL mode keeps recent commits in ``-wal``; a copy of only the ``.db`` (a
backup, Datasette in immutable mode) would miss them.  ``Store.close``
checkpoints with TRUNCATE, after closing its own read connection, so the
copy holds every row.  Real SQLite files, a real ``watch`` subprocess.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from monitor.store import Store
from tests.test_data_loss import burst
from tests.test_watch_headless import ROOT, env_for, loop_lines


def rows_in_a_copy_of_the_db_only(db: Path, tmp_path: Path) -> int:
    copy = tmp_path / "copy" / "lw.db"
    copy.parent.mkdir()
    shutil.copyfile(db, copy)  # the .db alone: no -wal, no -shm
    conn = sqlite3.connect(f"file:{copy}?immutable=1", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    finally:
        conn.close()


def test_close_checkpoints_the_wal_into_the_db(tmp_path):
    db = tmp_path / "lw.db"
    store = Store(db)
    store.start()
    store.upsert_session({"id": "b"})
    store.add_events(burst(3000))
    store.flush()
    assert store.count_events("b") == 3000  # (the reader is open too)
    store.close()
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert rows_in_a_copy_of_the_db_only(db, tmp_path) == 3000


def test_watch_stopped_leaves_a_db_that_holds_the_data(tmp_path):
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 20))
    db = tmp_path / "lw.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", "--headless", "--from-start", "--no-socket"]
        + ["--db", str(db), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env_for(tmp_path),
    )
    try:
        assert proc.stdout.readline()  # a detection printed: its rows are committed
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert rows_in_a_copy_of_the_db_only(db, tmp_path) == 40
