"""Control channels and kill safety, with real files and real processes."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap

import orjson
import psutil
import pytest

from monitor.client import InboxReader
from monitor.control import (
    QUEUED_DETAIL,
    HookMailbox,
    InboxChannel,
    Outcome,
    ProcessIdentity,
    check_killable,
    control_message,
    inbox_path,
    terminate,
)

SLEEPER = "import sys, time; print('ready', flush=True); time.sleep(600)"
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def spawn(code: str, **kwargs) -> subprocess.Popen:
    """A child python that prints 'ready' once set up (we read it instead of sleeping)."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, **kwargs)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def children():
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


# -- messages and channels -------------------------------------------------------------


def test_control_message_has_type_session_ts_and_fields():
    """control_message builds the documented shape; extra fields are kept."""
    message = control_message("inject", "s1", text="try something else")
    assert message["type"] == "inject" and message["session"] == "s1"
    assert message["text"] == "try something else"
    assert isinstance(message["ts"], float)


async def test_inbox_channel_appends_one_line_per_message(tmp_path):
    """Messages land in <log>.inbox.jsonl, one JSON object a line, in order."""
    log = tmp_path / "run.jsonl"
    channel = InboxChannel(log)
    assert channel.path == inbox_path(log) == tmp_path / "run.jsonl.inbox.jsonl"
    first = await channel.send(control_message("inject", "run", text="line one\nline two"))
    second = await channel.send(control_message("ack", "run"))
    assert first == Outcome("delivered", f"appended to {channel.path}")
    assert second.ok
    lines = channel.path.read_bytes().splitlines()
    assert [orjson.loads(line)["type"] for line in lines] == ["inject", "ack"]
    assert orjson.loads(lines[0])["text"] == "line one\nline two"
    assert channel.path.stat().st_mode & 0o777 == 0o600


async def test_inbox_channel_with_fsync(tmp_path):
    """fsync=True still appends (off the event loop) and reports delivery."""
    channel = InboxChannel(tmp_path / "a.jsonl", fsync=True)
    assert (await channel.send(control_message("ack", "a"))).ok
    assert len(channel.path.read_bytes().splitlines()) == 1


async def test_inbox_channel_reports_failure_instead_of_raising(tmp_path):
    """An inbox that cannot be written gives a failed outcome that says why."""
    channel = InboxChannel(tmp_path / "missing-dir" / "run.jsonl")
    outcome = await channel.send(control_message("inject", "run", text="x"))
    assert outcome.status == "failed"
    assert "cannot open inbox" in outcome.detail


def test_inbox_appends_from_concurrent_processes_never_interleave(tmp_path):
    """Four processes appending large messages at once produce only complete lines."""
    log = tmp_path / "busy.jsonl"
    writer = textwrap.dedent(f"""
        import sys
        from monitor.control import InboxChannel, control_message
        channel = InboxChannel({str(log)!r})
        for i in range(300):
            outcome = channel.append(control_message("inject", "busy", text=sys.argv[1] * 20000, n=i))
            assert outcome.ok, outcome
    """)
    procs = [subprocess.Popen([sys.executable, "-c", writer, letter]) for letter in "abcd"]
    assert [proc.wait() for proc in procs] == [0, 0, 0, 0]
    lines = inbox_path(log).read_bytes().splitlines()
    assert len(lines) == 1200
    seen: dict[str, list[int]] = {}
    for line in lines:
        message = orjson.loads(line)  # raises if any line were interleaved
        text = message["text"]
        assert text == text[0] * 20000
        seen.setdefault(text[0], []).append(message["n"])
    assert all(numbers == list(range(300)) for numbers in seen.values())


def test_inbox_reader_follows_complete_lines_only(tmp_path):
    """The follower returns only finished lines, then the rest once the newline arrives."""
    log = tmp_path / "run.jsonl"
    reader = InboxReader(log)
    assert reader.read() == []  # no inbox yet
    channel = InboxChannel(log)
    channel.append(control_message("inject", "run", text="one"))
    line = orjson.dumps(control_message("inject", "run", text="two")) + b"\n"
    with open(channel.path, "ab") as f:
        f.write(line[:10])
    assert [m["text"] for m in reader.read()] == ["one"]
    with open(channel.path, "ab") as f:
        f.write(line[10:])
    assert [m["text"] for m in reader.read()] == ["two"]
    assert reader.read() == []


def test_inbox_reader_survives_truncation_and_skips_garbage(tmp_path):
    """A truncated inbox is read again from the start; bad lines are counted, not raised."""
    log = tmp_path / "run.jsonl"
    channel = InboxChannel(log)
    for i in range(3):
        channel.append(control_message("ack", "run", n=i))
    reader = InboxReader(log)
    assert len(reader.read()) == 3
    channel.path.write_bytes(b"not json\n[1]\n")
    channel.append(control_message("inject", "run", text="after"))
    assert [m["text"] for m in reader.read()] == ["after"]
    assert reader.skipped == 2


def test_inbox_reader_from_end_skips_old_messages(tmp_path):
    """from_start=False ignores what was in the inbox before the agent started."""
    log = tmp_path / "run.jsonl"
    channel = InboxChannel(log)
    channel.append(control_message("inject", "run", text="old"))
    reader = InboxReader(log, from_start=False)
    channel.append(control_message("inject", "run", text="new"))
    assert [m["text"] for m in reader.read()] == ["new"]


async def test_hook_mailbox_queues_until_drained_and_is_bounded():
    """A hook session's messages wait in a bounded mailbox until a poll drains them."""
    mailbox = HookMailbox("h1", limit=3)
    for i in range(5):
        outcome = await mailbox.send(control_message("inject", "h1", text=str(i)))
        assert outcome == Outcome("delivered", QUEUED_DETAIL)
    assert mailbox.dropped == 2
    assert [m["text"] for m in mailbox.drain()] == ["2", "3", "4"]
    assert mailbox.drain() == []


# -- process identity ---------------------------------------------------------------------


def test_capture_records_pid_start_time_user_and_cmdline(children):
    """capture() pins a live process by pid, start time, uid and command line."""
    proc = spawn(SLEEPER)
    children.append(proc)
    identity = ProcessIdentity.capture(proc.pid)
    assert identity is not None
    assert identity.pid == proc.pid and identity.uid == os.getuid()
    assert "time.sleep(600)" in identity.cmdline
    assert ProcessIdentity.capture(proc.pid) == identity  # stable across captures
    assert "pid %d (" % proc.pid in identity.describe()


def test_capture_of_no_process_is_none(children):
    """Nonexistent and nonsensical pids have no identity."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid is free
    assert ProcessIdentity.capture(proc.pid) is None
    assert ProcessIdentity.capture(0) is None
    assert ProcessIdentity.capture(-5) is None


# -- refusals ----------------------------------------------------------------------------


def test_refuses_without_identity():
    """A session without a known pid cannot be killed, and says so."""
    assert check_killable(None) == "no process id is known for this session"


def test_refuses_pid_1():
    """pid 1 is never killed, even with a matching identity."""
    identity = ProcessIdentity.capture(1) or ProcessIdentity(1, 0.0, os.getuid(), "init")
    assert check_killable(identity) == "refusing to kill pid 1 (init)"


def test_refuses_the_monitor_itself():
    """The monitor's own pid is refused."""
    identity = ProcessIdentity.capture(os.getpid())
    assert "the monitor itself" in check_killable(identity)


def test_refuses_the_monitors_parent():
    """The monitor's parent (its shell, its terminal) is refused.

    Checked from a child process, whose parent is this test process: the
    test's own parent may be pid 1 (a detached run), which is refused first."""
    code = textwrap.dedent("""
        import os
        from monitor.control import ProcessIdentity, check_killable
        print(check_killable(ProcessIdentity.capture(os.getppid())))
    """)
    reason = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert f"refusing to kill pid {os.getpid()}: it is the monitor's parent process" in reason


def test_refuses_negative_and_zero_pids():
    """Process-group pids (<= 0) would hit many processes: refused."""
    assert "not a single process" in check_killable(ProcessIdentity(0, 0.0, os.getuid(), ""))
    assert "not a single process" in check_killable(ProcessIdentity(-1, 0.0, os.getuid(), ""))


async def test_reused_pid_is_not_killed(children):
    """Same pid, different start time: another process owns the number now; it survives."""
    proc = spawn(SLEEPER)
    children.append(proc)
    real = ProcessIdentity.capture(proc.pid)
    first_seen = dataclasses.replace(real, start_time=real.start_time - 42.0)
    reason = check_killable(first_seen)
    assert reason is not None and "no longer the session's process" in reason
    assert "reused" in reason
    outcome = await terminate(first_seen, grace=0.1)
    assert outcome.status == "refused" and outcome.detail == reason
    assert proc.poll() is None  # still running: nothing was signalled
    assert check_killable(real) is None


async def test_exited_process_is_not_signalled(children):
    """A session whose process already exited (zombie or reaped) is reported, not signalled."""
    proc = spawn(SLEEPER)
    children.append(proc)
    identity = ProcessIdentity.capture(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    # Wait for the exit without reaping: a zombie still has the pid and start time.
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    zombie = ProcessIdentity.capture(proc.pid)
    assert (zombie.pid, zombie.start_time) == (identity.pid, identity.start_time)
    assert "already exited" in check_killable(identity)
    proc.wait()
    assert "already exited" in check_killable(identity)
    outcome = await terminate(identity, grace=0.1)
    assert outcome.status == "refused" and "already exited" in outcome.detail


def _other_users_process() -> subprocess.Popen | psutil.Process | None:
    """A process of another user: started as 'nobody' when we are root, else any found."""
    if os.getuid() == 0:
        try:
            # A shell, since the venv's interpreter may be unreadable to 'nobody'.
            proc = subprocess.Popen(
                ["/bin/sh", "-c", "echo ready; exec sleep 600"],
                stdout=subprocess.PIPE,
                text=True,
                user=65534,
                group=65534,
                cwd="/",
            )
            assert proc.stdout.readline().strip() == "ready"
            return proc
        except (OSError, subprocess.SubprocessError, AssertionError):
            return None
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.info["uids"] and proc.info["uids"].real != os.getuid() and proc.pid != 1:
                return proc
        except psutil.Error:
            continue
    return None


async def test_refuses_another_users_process(children):
    """A process owned by another user is refused even if the monitor could signal it."""
    other = _other_users_process()
    if other is None:
        pytest.skip("no process of another user exists and none can be started")
    if isinstance(other, subprocess.Popen):
        children.append(other)
    identity = ProcessIdentity.capture(other.pid)
    assert identity is not None and identity.uid != os.getuid()
    reason = check_killable(identity)
    assert reason is not None and f"uid {identity.uid}" in reason and "not to the monitor's user" in reason
    outcome = await terminate(identity, grace=0.1)
    assert outcome.status == "refused"
    still = ProcessIdentity.capture(other.pid)
    assert still is not None and still.start_time == identity.start_time  # not signalled


# -- real kills -----------------------------------------------------------------------------


async def test_terminate_stops_a_process_with_sigterm(children):
    """A cooperative process exits on SIGTERM; SIGKILL is not needed."""
    proc = spawn(SLEEPER)
    children.append(proc)
    identity = ProcessIdentity.capture(proc.pid)
    outcome = await terminate(identity, grace=10.0)
    assert outcome == Outcome("delivered", f"pid {proc.pid} exited after SIGTERM")
    assert proc.wait() == -signal.SIGTERM


async def test_terminate_escalates_to_sigkill_when_sigterm_is_ignored(children):
    """A process ignoring SIGTERM is SIGKILLed after the grace period."""
    proc = spawn(STUBBORN)
    children.append(proc)
    identity = ProcessIdentity.capture(proc.pid)
    outcome = await terminate(identity, grace=0.3)
    assert outcome.status == "delivered"
    assert "killed with SIGKILL" in outcome.detail
    assert proc.wait() == -signal.SIGKILL
