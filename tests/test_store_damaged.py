"""A damaged database is refused with what to do; a dangling symlink is never followed (issue 32, item 14).

A real database written by the store has 8 pages in its middle overwritten;
``watch`` refuses it on open (``PRAGMA quick_check``), and ``show``,
``history`` and ``history --search`` say what to do instead of a StoreError
traceback.  A database path that is a symbolic link to nothing is refused
(SQLite would create the link's target).  Real files, the real CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.store import Store, StoreError
from tests.test_data_loss import burst
from tests.test_watch_headless import ROOT, env_for

PAGE = 4096


def loopwatch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(tmp_path),
        timeout=120,
    )


@pytest.fixture
def damaged(tmp_path) -> Path:
    db = tmp_path / "lw.db"
    with Store(db) as store:
        store.upsert_session({"id": "b", "agent": "a"})
        store.add_events(burst(5000))
    size = db.stat().st_size
    assert size > 40 * PAGE and not Path(f"{db}-wal").exists()
    with open(db, "r+b") as out:  # 8 pages in the middle
        out.seek((size // PAGE // 2) * PAGE)
        out.write(b"\xa5" * (8 * PAGE))
    return db


def test_the_store_refuses_a_damaged_database(damaged):
    with pytest.raises(StoreError, match="damaged.*recover") as refused:
        Store(damaged).start()
    assert "mv " in str(refused.value)
    with pytest.raises(StoreError, match="damaged"):
        Store(damaged).list_sessions()


@pytest.mark.parametrize(
    "args",
    [("show", "b"), ("history",), ("history", "--search", "event"), ("watch", "--headless", "--no-socket")],
    ids=" ".join,
)
def test_commands_on_a_damaged_database_say_what_to_do(tmp_path, damaged, args):
    extra = (str(tmp_path),) if args[0] == "watch" else ()
    done = loopwatch(tmp_path, *args, "--db", str(damaged), *extra)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "damaged" in done.stderr and "recover" in done.stderr


def test_doctor_says_the_database_is_damaged(tmp_path, damaged):
    done = loopwatch(tmp_path, "doctor", "--db", str(damaged))
    line = next(line for line in done.stdout.splitlines() if line.startswith("FIX database"))
    assert "damaged" in line and ".recover" in line


def test_a_dangling_symlink_database_is_refused_and_its_target_not_created(tmp_path):
    target = tmp_path / "elsewhere" / "planted.db"
    target.parent.mkdir()
    link = tmp_path / "lw.db"
    link.symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        Store(link).start()
    done = loopwatch(tmp_path, "watch", "--headless", "--no-socket", "--db", str(link), str(tmp_path))
    assert done.returncode == 2 and "symbolic link" in done.stderr, done.stderr
    assert not target.exists() and not os.path.exists(f"{target}-wal")
