"""The store survives a full disk (issue 32, item 4).

On a real 2 MiB tmpfs (``mount -t tmpfs -o size=2m``, as root; the tests
skip, saying so, where mounting is not possible): the writer keeps what it
can in memory, retries, resumes when the disk is grown
(``mount -o remount,size=…``), counts every row it could not keep
(``store_losses``, ``Store.losses()``), says so once, and ``watch`` exits
non-zero.  The spill file is written whole or not at all: a short write on a
full disk never makes it unreadable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from monitor.store import Store
from monitor.store.spill import Spill
from tests.test_data_loss import burst
from tests.test_watch_headless import ROOT, env_for, loop_lines

DEADLINE = 30.0


def poll(predicate, what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Tmpfs:
    """A real tmpfs of a given size, grown on demand, unmounted at the end."""

    def __init__(self, path: Path, size: str):
        self.path = path
        path.mkdir()
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a small tmpfs needs root and mount(8)")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")

    def grow(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def tmpfs(tmp_path):
    disk = Tmpfs(tmp_path / "small", "2m")
    yield disk
    disk.unmount()


def test_the_store_keeps_rows_in_memory_and_resumes_when_space_returns(tmpfs):
    db = tmpfs.path / "lw.db"
    store = Store(db, max_pending=5000, block_seconds=0.01)
    store.start()
    try:
        store.upsert_session({"id": "b"})
        events = burst(20_000)
        for start in range(0, len(events), 500):
            store.add_events(events[start : start + 500])
        poll(lambda: store.stats.disk_full, "the writer to find the disk full")
        full = store.stats
        assert full.pending > 0 and full.failed == 0  # kept, not refused row by row
        tmpfs.grow("64m")
        more = burst(20_100)[20_000:]  # 100 more, seq 20,001 …
        store.add_events(more)
        poll(lambda: not store.stats.disk_full and store.stats.pending == 0, "the writer to resume")
        store.flush()
        stats = store.stats
        stored = store.count_events("b")
        assert stored + stats.dropped == 20_100 and stats.failed == 0
        assert stored >= 100 + 5000  # at least the memory queue and the later events were kept
        if stats.dropped:
            assert "rows lost to a full disk" in (store.losses() or "")
            assert store.lost_rows() and store.lost_rows()[-1]["dropped"] == stats.dropped
        seqs = [row["seq"] for row in store.events("b", limit=30_000)]
        assert seqs == sorted(seqs) and seqs[-1] == stored
    finally:
        store.close()


def test_a_spill_file_on_a_full_disk_stays_readable(tmpfs):
    """Appends until ENOSPC: the failed append keeps none of its rows, every earlier row
    reads back whole, and the file takes appends again once there is room."""
    spill = Spill(tmpfs.path, max_bytes=1 << 30)
    rows = [("e", [f"s{n}", n, "x" * 200]) for n in range(400)]
    kept = 0
    with pytest.raises(OSError) as failure:
        while True:
            spill.append(spill.room(rows))
            kept += len(rows)
    assert failure.value.errno == 28 and kept > 0 and spill.count == kept
    taken = []
    while spill.count:
        taken += spill.take(1000)
    assert len(taken) == kept and spill.torn == 0
    assert [row for _kind, row in taken[:400]] == [row for _kind, row in rows]
    spill.append(spill.room(rows[:3]))
    assert spill.take(10) == [(kind, row) for kind, row in rows[:3]]
    spill.close()


def test_a_torn_spill_line_is_skipped_and_counted(tmp_path):
    """A line cut before its newline (what a lying disk could leave) is skipped and
    counted in ``torn``, never raised to the writer."""
    spill = Spill(tmp_path)
    spill.append(spill.room([("e", ["a", 1]), ("e", ["b", 2])]))
    fd = spill._file.fileno()
    os.pwrite(fd, b'["e",["c"', spill._size)  # a tail without its end …
    spill._size += 9  # … inside the logical end
    spill.count += 1
    assert spill.take(10) == [("e", ["a", 1]), ("e", ["b", 2])]
    assert spill.torn == 1 and spill.count == 0
    spill.close()


def fill(path):
    """Write ``path`` until the file system has no room left, not even a byte: the
    tail of a large write that did not fit would leave room for a small transaction."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = 65536
        while size:
            try:
                os.write(fd, b"\0" * size)
            except OSError:
                size //= 2
    finally:
        os.close(fd)


#: Closing on a disk that stays full, the store retries this long (``[store]
#: full_disk_close_seconds``; 5 s by default) before giving up: the tests need not wait 5 s.
CLOSE_SECONDS = 0.5


def short_close(tmp_path: Path) -> dict[str, str]:
    """The environment of ``watch`` whose store gives up on a full disk ``CLOSE_SECONDS`` after the stop."""
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text(f"[store]\nfull_disk_close_seconds = {CLOSE_SECONDS}\n")
    return env_for(tmp_path)


def test_a_full_disk_is_given_up_5_s_after_the_stop_by_default():
    from monitor.config import StoreSettings
    from monitor.store.fullness import CLOSE_SECONDS as DEFAULT

    assert StoreSettings().full_disk_close_seconds == DEFAULT == 5.0
    assert Store.from_settings(StoreSettings(), "x.db").full_disk_close_seconds == DEFAULT
    short = Store.from_settings(StoreSettings(full_disk_close_seconds=CLOSE_SECONDS), "x.db")
    assert short.full_disk_close_seconds == CLOSE_SECONDS


FULL = "disk holding the database is full"
RESUMED = "the database is being written again after"
GAVE_UP = "the disk holding the database was still full when the store closed"


def watch_until_full(
    tmp_path, db: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, list[str]]:
    """``watch --headless`` reading 30,000 events from the start into ``db`` on the small
    disk, read on stderr up to the line saying the disk is full."""
    logs = tmp_path / "logs"
    logs.mkdir()
    session = uuid.uuid4().hex[:8]
    with open(logs / "agent.jsonl", "w") as out:
        for start in range(0, 30_000, 1000):
            out.write(loop_lines(f"{session}-{start}", 500, start=start))
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", "--headless", "--json", "--from-start", "--no-socket"]
        + ["--db", str(db), str(logs)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env or env_for(tmp_path),
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            proc.wait()
            raise AssertionError("watch ended before the disk was full: " + "".join(lines))
        lines.append(line)
        if FULL in line:
            return proc, lines
    proc.kill()
    proc.wait()
    raise AssertionError("no disk-full line: " + "".join(lines))


def stopped(proc: subprocess.Popen, lines: list[str], *, stop: bool = True) -> str:
    """SIGTERM ``proc`` (unless ``stop`` is False: it was told already); all it said on
    stderr (it must end within 60 s)."""
    try:
        if stop:
            proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines) + rest
    assert err.count(FULL) == 1 and "Traceback" not in err and len(err.splitlines()) < 20, err
    return err


def stored_events(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]


def test_watch_on_a_full_disk_says_so_once_and_exits_non_zero(tmp_path, tmpfs):
    """The disk stays full until the monitor has stopped: the rows still waiting then are
    given up after ``full_disk_close_seconds`` of retries (shortened here), counted, said once
    with the run's count, and ``watch`` exits 3 (never "flushed and closed" with rows unwritten)."""
    db = tmpfs.path / "lw.db"
    proc, lines = watch_until_full(tmp_path, db, short_close(tmp_path))
    # Keep it full to the last byte, so that rows are still waiting when the monitor is told to stop.
    fill(tmpfs.path / "filler")
    err = stopped(proc, lines)
    assert proc.returncode == 3 and err.count(GAVE_UP) == 1, err
    ending = [line for line in err.splitlines() if GAVE_UP in line][0]
    waiting, total = (int(n) for n in re.findall(r"(\d+) rows (?:that were waiting are )?lost", ending))
    assert 0 < waiting <= total, err
    # A small write may have fitted before the disk was filled to the last byte: then the
    # run said it was written again (once), and how the full disk ended comes after that.
    assert err.count(RESUMED) <= 1 and err.rfind(RESUMED) < err.index(GAVE_UP), err
    assert f"DATABASE INCOMPLETE: {total:,} rows lost to a full disk" in err, err
    assert "database flushed and closed" not in err and stored_events(db) > 0


@pytest.mark.parametrize("order", ["room, then stop", "stop, then room"])
def test_watch_on_a_disk_that_gets_room_again_says_so_once_and_loses_nothing(tmp_path, tmpfs, order):
    """The disk is grown before or while the monitor stops: whichever write comes first
    after it (the writer's retry, the stop's flush, the close), the run says once that
    the database is written again with 0 rows lost, keeps every event and exits 0."""
    db = tmpfs.path / "lw.db"
    proc, lines = watch_until_full(tmp_path, db)
    if order == "room, then stop":
        tmpfs.grow("64m")
        err = stopped(proc, lines)
    else:
        proc.send_signal(signal.SIGTERM)
        tmpfs.grow("64m")
        err = stopped(proc, lines, stop=False)
    assert proc.returncode == 0 and err.count(RESUMED) == 1, err
    assert [line for line in err.splitlines() if "lost" in line and FULL not in line] == [
        next(line for line in err.splitlines() if RESUMED in line)
    ] and "; 0 rows lost this run" in err, err
    assert GAVE_UP not in err and "database flushed and closed" in err, err
    events = int(re.search(r"stopped after ([\d,]+) events", err).group(1).replace(",", ""))
    assert stored_events(db) == events > 0, err


def test_watch_exits_3_when_a_socket_agents_rows_are_lost_to_a_full_disk(tmp_path, tmpfs):
    """A file can wait for the disk; a socket agent's events cannot.  Sent while the database's
    disk (a real 2 MiB tmpfs, the spill file on it too) stays full, the rows beyond the memory
    queue are lost and counted: ``watch`` says DATABASE INCOMPLETE and exits 3."""
    import socket as socketlib

    from tests.socketkit import short_socket_path

    sock_path = short_socket_path(tmp_path)
    db = tmpfs.path / "lw.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", "--headless", "--json", "--socket", str(sock_path)]
        + ["--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=short_close(tmp_path),
        text=True,
    )
    lines: list[str] = []
    try:
        while "Ctrl-C to stop" not in (line := proc.stderr.readline()):
            assert line, "watch ended before it started"
            lines.append(line)
        agent = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        agent.connect(str(sock_path))
        agent.sendall(b'{"type": "hello", "agent": "disk-filler"}\n')
        filler = "x" * 400
        for start in range(0, 16_000, 1000):  # 16,000 rows: more than the memory queue (10,000)
            agent.sendall(
                b"".join(
                    json.dumps(  # honest turns, no two alike: rows, not a detection each
                        {
                            "type": "message",
                            "session": f"full-{start}",
                            "role": "user" if n % 2 else "assistant",
                        }
                        | {"content": f"step {n}: {n * 7919 % 10007} {filler}"}
                    ).encode()
                    + b"\n"
                    for n in range(start, start + 1000)
                )
            )
            if start == 8_000:
                fill(tmpfs.path / "filler")  # whatever SQLite freed meanwhile: full again
        agent.close()
        while "disk holding the database is full" not in (line := proc.stderr.readline()):
            assert line, "".join(lines)
            lines.append(line)
        lines.append(line)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines) + rest
    assert proc.returncode == 3, err
    assert "DATABASE INCOMPLETE" in err and "rows lost to a full disk" in err, err
    assert "Traceback" not in err and len(err.splitlines()) < 20, err
