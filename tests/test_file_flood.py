"""A flooding log is paused, not dropped, and SIGTERM stops the monitor (issue 32, item 9).

While the store is behind (here: another process holds the database's write
lock), a file source stops reading at a bounded backlog instead of filling
the store's memory queue and spill file: nothing is dropped or spilled, the
file is read on once the store catches up, and events that cannot wait (a
socket agent's, submitted straight to the hub) are still processed.  A real
``watch`` on a file growing as fast as a writer can append, with or without
a socket agent sending as fast as it can too, stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

from monitor.config import build_config
from monitor.hub import Hub
from monitor.sources.files import FileSource, StartPolicy
from monitor.store import Store
from tests.test_data_loss import burst, hold_write_lock, poll_until
from tests.test_watch_headless import ROOT, env_for

LINES = 30_000


def flood_lines(start: int, count: int, session: str = "flood") -> str:
    """Honest work at flood rate: a person and the agent taking turns, no two alike (so the rows
    counted are the events, not a detection per line as a monologue would give)."""
    return "".join(
        json.dumps(
            {
                "type": "message",
                "session": session,
                "role": "user" if n % 2 else "assistant",
                "content": f"step {n}: {'why' if n % 2 else 'because'} {n * 7919 % 10007}",
            }
        )
        + "\n"
        for n in range(start, start + count)
    )


async def test_a_file_is_paused_not_dropped_while_the_store_is_behind(tmp_path):
    db = tmp_path / "lw.db"
    store = Store(db, block_seconds=0.01)  # 10,000 rows in memory; files pause at 2,000 (4 batches)
    store.start()
    hub = Hub(build_config({}), store)
    await hub.start()
    log = tmp_path / "flood.jsonl"
    log.write_text("")
    files = FileSource([str(log)], hub, start=StartPolicy("start"))
    await files.start()
    locker = hold_write_lock(db)
    try:
        log.write_text(flood_lines(0, LINES))
        await poll_until(lambda: hub.file_pauses > 0)  # the store is behind: reading paused
        assert store.backlogged()
        await hub.submit(burst(5, session="quiet"))  # a socket agent's: cannot wait
        await poll_until(lambda: any(s.id == "quiet" for s in hub.sessions()))
        stats = store.stats
        assert stats.spilled == 0 and stats.dropped == 0, stats
        assert stats.pending < store.max_pending + 1000
    finally:
        locker.communicate("\n", timeout=30)
    await poll_until(lambda: store.count_events("flood") == LINES, timeout=60)
    await files.stop()
    await hub.stop()
    store.close()
    final = store.stats
    assert final.dropped == 0 and final.spilled == 0
    assert store.count_events("quiet") == 5


def sigterm_under_flood(tmp_path, *, socket_flood: bool) -> tuple[subprocess.Popen, str]:
    """Start a real ``watch --headless``, flood a log it follows (and, with ``socket_flood``, its
    socket from an agent sending unpaced), SIGTERM it once the flood is under way, and poll for
    its exit with a deadline.  The time it takes is measured in benchmarks/README.md."""
    import socket as socketlib

    from tests.socketkit import short_socket_path

    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "flood.jsonl"
    log.write_text("")
    sock_path = short_socket_path(tmp_path)
    listen = ["--socket", str(sock_path)] if socket_flood else ["--no-socket"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", "--headless", "--json", *listen]
        + ["--db", str(tmp_path / "lw.db"), str(logs)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env_for(tmp_path),
        text=True,
    )
    stop = threading.Event()

    def flood() -> None:
        n = 0
        with open(log, "a") as out:
            while not stop.is_set():
                out.write(flood_lines(n, 5000))
                out.flush()
                n += 5000

    def agent() -> None:
        with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as conn:
            conn.connect(str(sock_path))
            conn.sendall(b'{"type": "hello", "agent": "flooder"}\n')
            n = 0
            try:
                while not stop.is_set():
                    conn.sendall(flood_lines(n, 2000, session="socket-flood").encode())
                    n += 2000
            except OSError:  # the monitor stopped
                pass

    writers = [threading.Thread(target=flood, daemon=True)]
    if socket_flood:
        writers.append(threading.Thread(target=agent, daemon=True))
    try:
        while "Ctrl-C to stop" not in proc.stderr.readline():
            assert proc.poll() is None
        for writer in writers:
            writer.start()
        deadline = time.monotonic() + 60
        while os.path.getsize(log) < 20_000_000:  # the flood is well under way
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10  # a hang guard: the time it takes is in benchmarks/README.md
        while proc.poll() is None:
            assert time.monotonic() < deadline, "watch did not stop on SIGTERM during a flood"
            time.sleep(0.02)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        err = proc.communicate()[1]
        for writer in writers:
            writer.join(30) if writer.is_alive() else None
    return proc, err


def test_sigterm_stops_watch_on_a_flooding_file(tmp_path):
    proc, err = sigterm_under_flood(tmp_path, socket_flood=False)
    assert proc.returncode == 0, err
    assert "database flushed and closed" in err


def test_sigterm_stops_watch_on_a_flooding_file_and_socket_agent(tmp_path):
    """What a socket agent sent cannot be read again: it is all stored before the exit, and
    what waits to be stored stays a few batches (the pump waits for a store catching up), so
    the shutdown is as short as with a file alone."""
    proc, err = sigterm_under_flood(tmp_path, socket_flood=True)
    assert proc.returncode == 0, err
    assert "database flushed and closed" in err and "Traceback" not in err


def test_the_pause_is_bounded_by_the_store_not_the_reader(tmp_path):
    """Without a store (``--no-db``) nothing pauses: ``room_for_files`` returns at once."""

    async def check() -> None:
        hub = Hub(build_config({}), None)
        await hub.start()
        await asyncio.wait_for(hub.room_for_files(), 5)
        await hub.stop()

    asyncio.run(check())
