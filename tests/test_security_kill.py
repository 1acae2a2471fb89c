"""A pid from a log file is a claim (issue 14, item 11): never the wrong process.

Real log files read by the real file source, real subprocesses as the
processes named, a real second user (``nobody``) writing into a shared 1777
directory.  Each test kills nothing it should not: the victim process is
checked to be alive afterwards, and the refusal says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from monitor.config import build_config
from monitor.control import ProcessIdentity
from monitor.hub import Hub
from monitor.sources.files import FileSource
from monitor.sources.paths import StartPolicy
from monitor.sources.sockets import SocketServer
from monitor.updates import ActionFinished
from tests.securitykit import DEADLINE, SLEEPER, loop_lines, until


@pytest.fixture
def victims():
    procs: list[subprocess.Popen] = []

    def spawn() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", SLEEPER])
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
async def monitor():
    """A hub reading the given paths with the real file source (and collecting actions)."""
    running: list = []

    async def start(paths, *, auto_kill: bool = False):
        config = build_config({})
        config.control = dataclasses.replace(config.control, auto_kill=auto_kill, kill_grace_seconds=2)
        hub = Hub(config, None)
        await hub.start()
        actions: list = []
        hub.subscribe(lambda u: actions.append(u.action) if isinstance(u, ActionFinished) else None)
        source = FileSource([str(p) for p in paths], hub, start=StartPolicy(mode="start"))
        await source.start()
        running.append((hub, source))
        await source.sync()
        await hub.join()
        return hub, actions

    yield start
    for hub, source in running:
        await source.stop()
        await hub.stop()


def created(proc: subprocess.Popen) -> float:
    identity = ProcessIdentity.capture(proc.pid)
    assert identity is not None
    return identity.created


async def test_replayed_old_log_naming_a_younger_process_is_not_killed(tmp_path, victims, monitor):
    """A pid reused after the agent exited, then a replay of the old log: the records predate
    the process now holding the pid, so the kill is refused and the process lives."""
    victim = victims()
    log = tmp_path / "old.jsonl"
    log.write_text(loop_lines("old", created(victim) - 3600, n=2, pid=victim.pid))
    hub, _ = await monitor([log])
    assert hub.session("old").pid == victim.pid
    assert "reused pid or a replayed log" in hub.describe_kill("old")
    record = await hub.act("kill", "old")
    assert record.outcome == "refused" and "reused pid or a replayed log" in record.detail
    assert victim.poll() is None


async def test_a_process_of_another_user_is_never_signalled(tmp_path, monitor):
    """The pid names a process of another user (a real one, running as nobody): refused."""
    nobody = pwd.getpwnam("nobody").pw_uid
    if os.getuid() == nobody:
        pytest.skip("the monitor itself runs as nobody")
    other = subprocess.Popen(["sleep", "120"], user=nobody)
    try:
        log = tmp_path / "s.jsonl"
        log.write_text(loop_lines("s", time.time(), n=2, pid=other.pid))
        hub, _ = await monitor([log])
        record = await hub.act("kill", "s")
        assert record.outcome == "refused" and f"uid {nobody}" in record.detail
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a process as a second user")
async def test_another_users_log_in_a_shared_dir_never_gets_our_process_killed(request, victims, monitor):
    """auto_kill on; another user (nobody, a real process) writes a looping log into a shared
    1777 directory naming the monitor's user's process: the loop is detected, the automatic kill
    is refused (the log is not ours, the pid is not confirmed by an agent) and the process lives.
    A manual kill is refused too."""
    nobody = pwd.getpwnam("nobody").pw_uid
    # A shared directory like /tmp itself (tmp_path is not reachable by another user).
    shared = Path(tempfile.mkdtemp(prefix="loopwatch-shared-"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    os.chmod(shared, 0o1777)
    victim = victims()
    log = shared / "evil.jsonl"
    # Written by a real process of the other user: the file is theirs.
    subprocess.run(
        ["sh", "-c", 'cat > "$1"', "sh", str(log)],
        user=nobody,
        check=True,
        input=loop_lines("evil", time.time(), pid=victim.pid).encode(),
    )
    assert log.stat().st_uid == nobody
    hub, actions = await monitor([shared], auto_kill=True)
    await until(lambda: any(a.kind == "kill" for a in actions), "the automatic kill")
    auto = next(a for a in actions if a.kind == "kill")
    assert auto.outcome == "refused", auto.detail
    assert victim.poll() is None
    assert f"belongs to uid {nobody}" in hub.describe_kill("evil")
    record = await hub.act("kill", "evil")
    assert record.outcome == "refused" and f"belongs to uid {nobody}" in record.detail
    assert victim.poll() is None


async def test_auto_kill_never_signals_a_pid_only_a_file_names(tmp_path, victims, monitor):
    """Our own log, our own process, started before the records: a manual kill may go ahead
    (the dialog says the pid is unconfirmed), but auto_kill refuses: a file alone never confirms."""
    victim = victims()
    log = tmp_path / "mine.jsonl"
    log.write_text(loop_lines("mine", time.time(), pid=victim.pid))
    hub, actions = await monitor([log], auto_kill=True)
    await until(lambda: any(a.kind == "kill" for a in actions), "the automatic kill")
    auto = next(a for a in actions if a.kind == "kill")
    assert auto.outcome != "delivered" or "asked the agent" in auto.detail
    assert "confirmed itself" in auto.detail
    assert victim.poll() is None
    described = hub.describe_kill("mine")
    assert described.startswith(f"SIGTERM pid {victim.pid}") and "NOT confirmed by the agent" in described
    assert "log file owned by your user" in described


async def test_never_pid_1_the_monitor_or_its_parent(tmp_path, monitor):
    """Logs naming pid 1, the monitor's own pid or its parent: every kill is refused."""
    for name, pid in (("init", 1), ("self", os.getpid()), ("parent", os.getppid())):
        (tmp_path / f"{name}.jsonl").write_text(loop_lines(name, time.time(), n=1, pid=pid))
    hub, _ = await monitor([tmp_path])
    for name, word in (("init", "pid 1"), ("self", "the monitor itself"), ("parent", "parent")):
        record = await hub.act("kill", name)
        assert record.outcome == "refused" and word in record.detail, (name, record.detail)


async def test_auto_kill_signals_a_pid_the_agent_confirmed_over_its_socket(tmp_path):
    """A socket agent's own pid (kernel peer credentials) is confirmed: auto_kill stops it."""
    config = build_config({})
    config.control = dataclasses.replace(config.control, auto_kill=True, kill_grace_seconds=2)
    hub = Hub(config, None)
    await hub.start()
    actions: list = []
    hub.subscribe(lambda u: actions.append(u.action) if isinstance(u, ActionFinished) else None)
    path = tmp_path / "s.sock"
    agent_code = (
        "import json, socket, sys, time\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(sys.argv[2].encode())\n"
        "time.sleep(120)\n"
    )
    async with SocketServer(hub, config, unix_path=path):
        # The agent sends its own pid: a placeholder replaced in the child itself.
        code = agent_code.replace(
            "s.sendall(sys.argv[2].encode())",
            "import os; s.sendall(sys.argv[2].replace('PID', str(os.getpid())).encode())",
        )
        lines = loop_lines("sock", time.time()).replace('"agent": "a"', '"agent": "a", "pid": PID', 1)
        agent = subprocess.Popen([sys.executable, "-c", code, str(path), lines])
        try:
            await until(lambda: any(a.kind == "kill" for a in actions), "the automatic kill")
            record = next(a for a in actions if a.kind == "kill")
            assert record.outcome == "delivered", record.detail
            assert agent.wait(timeout=DEADLINE) != 0
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    await hub.stop()


def _spawn_with_pid(pid: int) -> subprocess.Popen | None:
    """A new sleeper given exactly ``pid`` (root: ``ns_last_pid``); None if the kernel would not."""
    for _ in range(50):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen([sys.executable, "-c", SLEEPER])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


async def test_a_really_reused_pid_is_not_killed_live_or_after_a_replay(tmp_path, monkeypatch, monitor):
    """The agent exits, the kernel gives its pid to a new process (forced with ns_last_pid):
    the running monitor refuses (start time changed), and a monitor started afterwards that
    replays the old log refuses too (the process is younger than the records naming it).

    The records here carry exact times, so the slack kept for whole-second timestamps is 0."""
    monkeypatch.setattr("monitor.control.START_SLACK_SECONDS", 0.0)
    agent = subprocess.Popen([sys.executable, "-c", SLEEPER])
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("agent", time.time(), n=2, pid=agent.pid))
    live, _ = await monitor([log])
    assert live.session("agent").kill == ""
    # A process is known by pid and start time, to a clock tick (10 ms): the
    # newcomer must start in a later tick than the agent, as any real reuse does.
    while time.time() - created(agent) < 0.05:
        await asyncio.sleep(0.01)
    agent.kill()
    agent.wait()
    newcomer = _spawn_with_pid(agent.pid)
    if newcomer is None:
        pytest.skip("cannot force pid reuse here (needs root and a writable /proc/sys/kernel/ns_last_pid)")
    try:
        record = await live.act("kill", "agent")
        assert record.outcome == "refused" and "reused" in record.detail, record.detail
        replay, _ = await monitor([log])
        record = await replay.act("kill", "agent")
        assert record.outcome == "refused" and "reused pid or a replayed log" in record.detail
        assert newcomer.poll() is None
    finally:
        newcomer.kill()
        newcomer.wait()
