"""The inbox file is never a door to another file (issue 14, item 12).

A real watcher (file source + hub, ``auto_inject`` on) replies to a looping
native log through ``<log>.inbox.jsonl``; here that name is a symlink to a
file outside, a FIFO, a hard link or another user's file.  The nudge must
fail with a reason, the other file must stay byte for byte the same, and a
FIFO must not freeze the monitor.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import stat
import threading
import time

from monitor.config import build_config
from monitor.control import InboxChannel, open_inbox
from monitor.hub import Hub
from monitor.sources.files import FileSource
from monitor.sources.paths import StartPolicy
from monitor.updates import ActionFinished
from tests.securitykit import DEADLINE, loop_lines, until


async def watch_and_nudge(log, *, auto_inject: bool = True):
    """Watch ``log`` with auto_inject on until the automatic inject is finished; its record."""
    config = build_config({})
    config.control = dataclasses.replace(config.control, auto_inject=auto_inject)
    hub = Hub(config, None)
    await hub.start()
    actions: list = []
    hub.subscribe(lambda u: actions.append(u.action) if isinstance(u, ActionFinished) else None)
    source = FileSource([str(log)], hub, start=StartPolicy(mode="start"))
    try:
        await source.start()
        await until(lambda: any(a.kind == "inject" for a in actions), "the automatic inject")
        return hub, next(a for a in actions if a.kind == "inject")
    finally:
        await source.stop()
        await hub.stop()


async def test_symlinked_inbox_leaves_the_file_outside_untouched(tmp_path):
    """``ln -s ~/.bashrc logs/m.jsonl.inbox.jsonl``: the nudge fails, .bashrc is unchanged."""
    outside = tmp_path / "home" / ".bashrc"
    outside.parent.mkdir()
    outside.write_text("export PATH=/usr/bin\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "m.jsonl"
    log.write_text(loop_lines("m", time.time(), n=4))
    (logs / "m.jsonl.inbox.jsonl").symlink_to(outside)
    _, record = await watch_and_nudge(log)
    assert record.outcome == "failed" and "symbolic link" in record.detail
    assert outside.read_text() == "export PATH=/usr/bin\n"


async def test_dangling_symlinked_inbox_creates_nothing(tmp_path):
    """A symlink to a file that does not exist yet: the target is not created."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "m.jsonl"
    log.write_text(loop_lines("m", time.time(), n=4))
    target = tmp_path / "planted"
    (logs / "m.jsonl.inbox.jsonl").symlink_to(target)
    _, record = await watch_and_nudge(log)
    assert record.outcome == "failed" and not target.exists()


async def test_fifo_inbox_does_not_freeze_the_monitor(tmp_path):
    """``mkfifo logs/f.jsonl.inbox.jsonl``: the nudge fails at once and the monitor goes on.

    A safety valve opens the FIFO for reading after the test's deadline, so a
    monitor that blocked on it fails this test instead of hanging the suite."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "f.jsonl"
    log.write_text(loop_lines("f", time.time(), n=4))
    fifo = logs / "f.jsonl.inbox.jsonl"
    os.mkfifo(fifo)
    valve_fds: list[int] = []
    valve = threading.Timer(DEADLINE, lambda: valve_fds.append(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)))
    valve.start()
    try:
        hub, record = await watch_and_nudge(log)
    finally:
        valve.cancel()
        for fd in valve_fds:
            os.close(fd)
    assert not valve_fds, "the monitor blocked on the FIFO until the safety valve opened it"
    assert record.outcome == "failed" and "FIFO" in record.detail
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


async def test_fifo_with_a_reader_is_refused_too(tmp_path):
    """A FIFO someone holds open for reading opens without blocking, but is no regular file."""
    fifo = tmp_path / "r.jsonl.inbox.jsonl"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        outcome = await InboxChannel(tmp_path / "r.jsonl").send({"type": "inject", "text": "x"})
        assert outcome.status == "failed" and "not a regular file" in outcome.detail
        assert os.read(reader, 4096) == b""  # nothing was written into it
    finally:
        os.close(reader)


def test_hard_link_and_foreign_inboxes_are_refused(tmp_path):
    """A hard link to another file, or an inbox owned by another user, is never written."""
    precious = tmp_path / "precious"
    precious.write_text("keep\n")
    os.link(precious, tmp_path / "h.jsonl.inbox.jsonl")
    fd, why = open_inbox(tmp_path / "h.jsonl.inbox.jsonl")
    assert fd is None and "hard links" in why
    assert precious.read_text() == "keep\n"
    if os.getuid() == 0:  # only root can give a file away: a faithful stand-in for another user's file
        foreign = tmp_path / "o.jsonl.inbox.jsonl"
        foreign.write_text("")
        nobody = pwd.getpwnam("nobody").pw_uid
        os.chown(foreign, nobody, -1)
        fd, why = open_inbox(foreign)
        assert fd is None and f"uid {nobody}" in why
        assert foreign.read_text() == ""


async def test_a_new_inbox_is_a_private_regular_file(tmp_path):
    """Without an inbox, the first nudge creates it 0600 and appends one line."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "n.jsonl"
    log.write_text(loop_lines("n", time.time(), n=4))
    _, record = await watch_and_nudge(log)
    assert record.outcome == "delivered", record.detail
    info = os.lstat(logs / "n.jsonl.inbox.jsonl")
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert (logs / "n.jsonl.inbox.jsonl").read_text().count("\n") == 1
