"""A FIFO swapped in under a watched or scanned file's name never freezes loopwatch (issue 32, item 1).

Another user of a shared (1777) directory replaces ``x.jsonl`` by a FIFO
between loopwatch's ``stat`` and its ``open``.  A plain ``open`` of a FIFO
blocks until a writer comes -- for ever when the FIFO is already unlinked,
and signal handlers do not run meanwhile.  Every open of a watched or
scanned file is non-blocking, never follows a link planted in a directory,
and refuses what ``fstat`` says is not a regular file
(``monitor/safeopen.py``).  Real FIFOs, real threads with deadlines, a real
``watch`` subprocess.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from monitor.formats.base import Problem
from monitor.safeopen import NotRegular, open_input, open_regular
from monitor.sources.tail import Tailer
from monitor.sources.tailed import TailedFile
from tests.test_watch_headless import loop_lines

DEADLINE = 20.0


def finishes(target, *args):
    """Run ``target(*args)`` in a thread; its result, or AssertionError if it blocks past the deadline."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = target(*args)
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    return thread, outcome


def release(fifo: Path) -> None:
    """Unblock a reader stuck in the open of ``fifo`` (the old code), so the test ends."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


class NullSink:
    keeps_positions = False

    async def submit(self, events, problems=(), **_):
        pass


def swapped(tmp_path: Path) -> tuple[Path, TailedFile]:
    """A followed regular ``x.jsonl`` (its identity taken), then a FIFO put under its name."""
    path = tmp_path / "x.jsonl"
    path.write_text("")
    st = os.stat(path)
    tf = TailedFile(str(path), (st.st_dev, st.st_ino), 0)
    path.unlink()
    os.mkfifo(path)
    return path, tf


def test_the_tailer_does_not_block_on_a_fifo_swapped_in_after_its_stat(tmp_path):
    path, tf = swapped(tmp_path)
    noticed: list[Problem] = []
    tailer = Tailer(
        NullSink(),
        fmt=None,
        max_line_bytes=1 << 20,
        clock=lambda: 0.0,
        again=lambda *_: None,
        notice=noticed.append,
    )
    thread, outcome = finishes(tailer.ensure_open, tf)
    blocked = thread.is_alive()
    release(path)
    assert not blocked, "the tailer blocked in the open of a FIFO"
    assert outcome == {"value": None} and tf.fd is None
    assert [p.reason for p in noticed] == ["cannot read: a FIFO, not a regular file: not read"]


def test_a_link_planted_in_a_watched_directory_is_not_followed(tmp_path):
    target = tmp_path / "private.jsonl"
    target.write_text("{}\n")
    link = tmp_path / "logs.jsonl"
    link.symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):
        open_regular(link)
    os.close(open_regular(link, follow=True))  # where the operator named the link itself


@pytest.mark.parametrize("named", [False, True])
def test_scanning_never_blocks_on_a_swapped_fifo(tmp_path, named):
    """A file found in a directory must be regular; one named on the command line may be
    the operator's pipe (``scan <(zcat …)``), which is opened as a pipe is."""
    path, _tf = swapped(tmp_path)
    if named:
        writer = threading.Thread(target=lambda: path.write_bytes(b"{}\n"), daemon=True)
        writer.start()
    thread, outcome = finishes(_open, path, named)
    blocked = thread.is_alive()
    release(path)
    assert not blocked
    if named:
        assert outcome["value"] == b"{}\n"
    else:
        assert isinstance(outcome["error"], NotRegular)


def _open(path: Path, named: bool) -> bytes:
    with open_input(path, named=named) as stream:
        return stream.read()


def test_documents_and_doctor_do_not_block_on_a_fifo(tmp_path):
    from monitor.commands.doctor import detect_formats
    from monitor.formats import documents

    fifo = tmp_path / "trajectory.json"
    os.mkfifo(fifo)
    log_fifo = tmp_path / "agent.jsonl"
    os.mkfifo(log_fifo)
    thread, outcome = finishes(lambda: (documents.kind_of(fifo, named=False), detect_formats(tmp_path)))
    blocked = thread.is_alive()
    release(fifo)
    release(log_fifo)
    assert not blocked
    assert outcome["value"] == (None, {"unreadable": 1})


async def test_watch_reports_a_fifo_in_a_watched_directory_and_keeps_working(tmp_path):
    """``watch`` on a directory holding a FIFO named like a log: the FIFO is reported
    once, a loop in the directory's real log is still detected, SIGTERM still stops it."""
    from tests.test_watch_headless import Watcher

    logs = tmp_path / "logs"
    logs.mkdir()
    fifo = logs / "x.jsonl"
    os.mkfifo(fifo)
    watcher = await Watcher.start(tmp_path, "--no-socket", "--no-db", str(logs))
    try:
        (logs / "agent.jsonl").write_text(loop_lines("s1", 3))
        async with asyncio.timeout(DEADLINE):
            line = (await watcher.proc.stdout.readline()).decode()
        assert "exact_repeat" in line
        await watcher.err_until(lambda line: "a FIFO, not a regular file" in line and str(fifo) in line)
        assert await watcher.stop(signal.SIGTERM) == 0
    finally:
        watcher.kill()
        release(fifo)
        await watcher.proc.wait()
