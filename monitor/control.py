"""Control channels: how an operator's action reaches an agent, and safe kills.

A session can be reached through a :class:`Channel`: its socket connection
(``monitor.sources.sockets.SocketChannel``), an inbox file next to its native
log (:class:`InboxChannel`), or, for hook-driven agents, a mailbox the next
hook call collects (:class:`HookMailbox`).  Every ``send`` returns an
:class:`Outcome` and never raises.

Killing is separate from channels because it needs a pid, and a pid alone is
not an identity: :class:`ProcessIdentity` records pid + start time + user when
a session is first seen, :func:`check_killable` refuses unless the process is
provably still that one, and :func:`terminate` sends SIGTERM, waits, then
SIGKILL.  Nothing here imports Textual.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import signal
import stat
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from monitor.identity import proc_stat_fields
from monitor.paths import inbox_path

DELIVERED, FAILED, UNSUPPORTED, REFUSED = "delivered", "failed", "unsupported", "refused"

#: What a hook session's queued message reports; the hook collects it later.
QUEUED_DETAIL = "queued for the agent's next hook call"
#: A guard's denial waits this long for the hook call of the call it denies.
DENY_SECONDS = 60.0


@dataclass(frozen=True)
class Outcome:
    """What became of one control action."""

    status: str  # "delivered" | "failed" | "unsupported" | "refused"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == DELIVERED


class Channel(Protocol):
    """A way to reach one session's agent."""

    name: str

    async def send(self, message: dict) -> Outcome: ...


def control_message(kind: str, session: str, **fields: Any) -> dict:
    """``{"type": kind, "session": session, "ts": now, **fields}``."""
    message: dict[str, Any] = {"type": kind, "session": session, "ts": time.time()}
    message.update(fields)
    return message


def encode_line(message: dict) -> bytes:
    """One control message as a complete JSONL line (non-JSON values become text).

    Text that is no valid Unicode (a lone surrogate an operator pasted or a
    nudge quoted from an agent's output) has the bad code points replaced by
    U+FFFD: a message always encodes, and never takes the ones after it down."""
    try:
        return orjson.dumps(message, default=str) + b"\n"
    except (TypeError, ValueError):  # orjson.JSONEncodeError: a lone surrogate, a too-deep value
        return orjson.dumps(_valid_text(message), default=str) + b"\n"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_text(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if depth > 32:
        return str(value)[:1000]
    if isinstance(value, dict):
        return {_valid_text(str(k)): _valid_text(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid_text(v, depth + 1) for v in value]
    return value


# -- inbox files ---------------------------------------------------------------


#: Never follow a link, never wait for a FIFO's reader, never become a terminal's owner.
_INBOX_FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | os.O_NOFOLLOW
    | os.O_NONBLOCK
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def open_inbox(path: Path) -> tuple[int | None, str]:
    """A descriptor to append to ``path``, or (None, why not).

    Accepts only a regular file of the monitor's user with one link (or
    creates one, 0600).  A symlink is refused by ``O_NOFOLLOW`` (ELOOP); a
    FIFO or device by ``O_NONBLOCK`` (ENXIO without a reader) or the
    ``fstat`` after opening; a hard link by the link count, so a write never
    lands in another file or blocks the monitor.
    """
    try:
        fd = os.open(path, _INBOX_FLAGS, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"refusing inbox {path}: it is a symbolic link"
        if exc.errno == errno.ENXIO:
            return None, f"refusing inbox {path}: it is a FIFO or socket, not a regular file"
        return None, f"cannot open inbox {path}: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        why = ""
        if not stat.S_ISREG(info.st_mode):
            why = "it is not a regular file"
        elif info.st_uid != os.getuid():
            why = f"it belongs to uid {info.st_uid}, not to the monitor's user (uid {os.getuid()})"
        elif info.st_nlink != 1:
            why = f"it has {info.st_nlink} hard links (it could be another file)"
        if why:
            os.close(fd)
            return None, f"refusing inbox {path}: {why}"
        # Writes go straight to a regular file; blocking mode keeps short writes rare.
        os.set_blocking(fd, True)
    except OSError as exc:
        os.close(fd)
        return None, f"cannot check inbox {path}: {exc.strerror or exc}"
    return fd, ""


class InboxChannel:
    """Appends control messages to ``<log>.inbox.jsonl`` next to a native log.

    Each message is one complete line written by a single ``write`` on an
    ``O_APPEND`` descriptor, so concurrent writers never interleave inside a
    line and a follower never sees half a message unless the disk is full
    (then the fragment is terminated with a newline and the send fails).
    """

    name = "inbox"

    def __init__(self, log_path: str | Path, *, fsync: bool = False):
        self.log_path = Path(log_path)
        self.path = inbox_path(log_path)
        self.fsync = fsync

    def append(self, message: dict) -> Outcome:
        """The blocking write; :meth:`send` is the async face of it."""
        data = encode_line(message)
        fd, problem = open_inbox(self.path)
        if fd is None:
            return Outcome(FAILED, problem)
        try:
            written = os.write(fd, data)
            if written != len(data):
                # Terminate the fragment so the next message starts on its own line.
                try:
                    os.write(fd, b"\n")
                except OSError:
                    pass
                return Outcome(FAILED, f"short write to {self.path} ({written} of {len(data)} bytes)")
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            return Outcome(FAILED, f"cannot write inbox {self.path}: {exc.strerror or exc}")
        finally:
            os.close(fd)
        return Outcome(DELIVERED, f"appended to {self.path}")

    async def send(self, message: dict) -> Outcome:
        if self.fsync:  # an fsync can take long; keep it off the event loop
            return await asyncio.to_thread(self.append, message)
        return self.append(message)


# -- hook mailboxes --------------------------------------------------------------


class HookMailbox:
    """Queues control messages for a session driven by short-lived hook processes.

    The socket server drains it when a hook sends ``{"type":"poll"}``.  Bounded:
    when full the oldest message is dropped (and counted) rather than growing.
    """

    name = "hook"

    def __init__(self, session: str, *, limit: int = 100):
        self.session = session
        self._queue: deque[dict] = deque(maxlen=limit)
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._queue)

    async def send(self, message: dict) -> Outcome:
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(message)
        return Outcome(DELIVERED, QUEUED_DETAIL)

    def pending(self, call_id: str | None = None) -> list[dict]:
        """The messages waiting, oldest first; they stay until :meth:`taken`.

        A guard's ``deny`` names the call it answers: it goes only to the poll
        of that call (``call_id``), and one older than :data:`DENY_SECONDS`
        (its call ran or was never asked about) is dropped."""
        if not any(m.get("type") == "deny" for m in self._queue):
            return list(self._queue)
        now = time.time()
        stale = [m for m in self._queue if m.get("type") == "deny" and now - m.get("ts", now) > DENY_SECONDS]
        if stale:
            self.taken(stale)
        return [m for m in self._queue if m.get("type") != "deny" or m.get("call_id") == call_id]

    def taken(self, messages: list[dict]) -> None:
        """``messages`` (from :meth:`pending`) reached the hook: remove them."""
        gone = {id(m) for m in messages}
        kept = [m for m in self._queue if id(m) not in gone]
        self._queue.clear()
        self._queue.extend(kept)

    def drain(self) -> list[dict]:
        messages = self.pending()
        self.taken(messages)
        return messages


# -- process identity and kills ------------------------------------------------------


def _clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


def _proc_stat(pid: int) -> tuple[str, int, float] | None:
    """(state, ppid, start seconds since boot) from ``/proc/<pid>/stat``; None if unreadable.

    The raw start tick count never changes for a process, unlike wall-clock
    start times derived from a boot time that moves with clock adjustments.
    """
    try:
        fields = proc_stat_fields(pid)
        return fields[0].decode(), int(fields[1]), int(fields[19]) / _clock_ticks()
    except (OSError, IndexError, ValueError):
        return None


def _proc_uid(pid: int) -> int | None:
    """The real uid from ``/proc/<pid>/status`` (the directory's owner can be root)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _boot_time() -> float:
    """When the machine booted, in epoch seconds on today's clock: /proc start
    times count ticks of CLOCK_BOOTTIME, so this is exact to a tick (psutil's
    boot time is whole seconds)."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is not None:
        return time.time() - time.clock_gettime(clock)
    import psutil

    return psutil.boot_time()


_HAVE_PROC = os.path.isdir("/proc/self") and _proc_stat(os.getpid()) is not None


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as it was when its session was first seen.

    ``start_time`` is a stable per-process stamp: seconds since boot from
    ``/proc`` on Linux, psutil's creation time elsewhere.  A pid whose start
    time differs is another process that reused the number.
    """

    pid: int
    start_time: float
    uid: int
    cmdline: str
    #: Wall-clock creation time (epoch seconds), to compare with record times.
    #: Not part of the identity: derived from the clock each time it is read.
    created: float = field(default=0.0, compare=False)

    @classmethod
    def capture(cls, pid: int) -> ProcessIdentity | None:
        """The identity of the running process ``pid``; None if there is none."""
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return None
        if _HAVE_PROC:
            stat = _proc_stat(pid)
            if stat is None:
                return None
            uid = _proc_uid(pid)
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    raw = f.read(4096)
            except OSError:
                return None
            if uid is None:
                return None
            cmdline = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
            return cls(pid, stat[2], uid, cmdline, _boot_time() + stat[2])
        import psutil

        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                created = proc.create_time()
                return cls(pid, created, proc.uids().real, " ".join(proc.cmdline()), created)
        except (psutil.Error, OSError):
            return None

    def describe(self, width: int = 60) -> str:
        """``pid 123 (python agent.py)`` for messages."""
        cmd = " ".join(self.cmdline.split()) or "?"
        if len(cmd) > width:
            cmd = cmd[: width - 1] + "…"
        return f"pid {self.pid} ({cmd})"


def _same_start(a: float, b: float) -> bool:
    return abs(a - b) < 1e-6


def _is_zombie(pid: int) -> bool:
    """An exited process not yet reaped by its parent still has a pid and a start time."""
    if _HAVE_PROC:
        stat = _proc_stat(pid)
        return stat is None or stat[0] in ("Z", "X")
    import psutil

    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return True


def _is_gone(identity: ProcessIdentity) -> bool:
    """True when the identified process has exited (a zombie counts as exited)."""
    current = ProcessIdentity.capture(identity.pid)
    if current is None or not _same_start(current.start_time, identity.start_time):
        return True
    return _is_zombie(identity.pid)


def _parent_of(pid: int) -> int:
    if _HAVE_PROC:
        stat = _proc_stat(pid)
        return stat[1] if stat else 0
    import psutil

    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return 0


def ancestors(pid: int) -> list[int]:
    """The parent, grandparent, … of ``pid`` (pid 1 and 0 excluded), nearest first."""
    found: list[int] = []
    pid = _parent_of(pid) if pid > 0 else 0
    while pid > 1 and pid not in found and len(found) < 64:
        found.append(pid)
        pid = _parent_of(pid)
    return found


def same_pid_namespace(pid: int) -> bool | None:
    """Whether ``pid`` sees the same pids as the monitor (None: cannot tell).

    A process in a container has its own pid numbers: a pid it reports for
    itself names some other process here.
    """
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino == os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _ancestors() -> set[int]:
    """Pids of the monitor's parent, grandparent, … (killing one could kill the monitor's terminal)."""
    return set(ancestors(os.getpid()))


def check_killable(identity: ProcessIdentity | None) -> str | None:
    """None when ``identity`` may be killed now; otherwise why not, in words."""
    if identity is None:
        return "no process id is known for this session"
    pid = identity.pid
    if pid <= 0:
        return f"refusing to signal pid {pid}: not a single process"
    if pid == 1:
        return "refusing to kill pid 1 (init)"
    if pid == os.getpid():
        return f"refusing to kill pid {pid}: it is the monitor itself"
    if pid == os.getppid():
        return f"refusing to kill pid {pid}: it is the monitor's parent process"
    if pid in _ancestors():
        return f"refusing to kill pid {pid}: it is an ancestor of the monitor"
    me = os.getuid()
    if identity.uid != me:
        return f"refusing to kill pid {pid}: it belongs to uid {identity.uid}, not to the monitor's user (uid {me})"
    current = ProcessIdentity.capture(pid)
    if current is None:
        return f"pid {pid} has already exited"
    if not _same_start(current.start_time, identity.start_time):
        return (
            f"refusing to kill pid {pid}: it is no longer the session's process "
            f"(the pid was reused by another process: {current.describe()})"
        )
    if _is_zombie(pid):
        return f"pid {pid} has already exited"
    if current.uid != me:
        return f"refusing to kill pid {pid}: it now belongs to uid {current.uid}, not to uid {me}"
    return None


#: Clock slack when comparing a process's creation time with a record's time.
START_SLACK_SECONDS = 1.0


def _log_owner_problem(path: str) -> str | None:
    """None when the log file (and the link to it, if any) belongs to the monitor's user."""
    me = os.getuid()
    try:
        link = os.lstat(path)
        target = os.stat(path)
    except OSError as exc:
        return f"cannot check who owns the log file {path}: {exc.strerror or exc}"
    for info in (link, target):
        if info.st_uid != me:
            return (
                f"the log file {path} belongs to uid {info.st_uid}, not to the monitor's user "
                f"(uid {me}): another user's log cannot name a process to kill"
            )
    return None


@dataclass(frozen=True)
class PidClaim:
    """A pid some record named for a session, and what backs the claim.

    ``since`` is the time of the first record that named the pid: the
    process must have started before it (a reused pid, then a replay of the
    old log, names a process younger than its records).  ``log_path`` is the
    log file that named it ("" for sockets and hooks).  ``confirmed`` says how
    the agent itself proved the pid is its own (socket peer credentials, a
    hook's parent chain); "" when only a file says so.
    """

    identity: ProcessIdentity
    since: float
    log_path: str = ""
    confirmed: str = ""

    def refusal(self) -> str | None:
        """None when the pid may be signalled now; otherwise why not."""
        reason = check_killable(self.identity)
        if reason is not None:
            return reason
        identity = self.identity
        if identity.created and identity.created > self.since + START_SLACK_SECONDS:
            return (
                f"refusing to kill pid {identity.pid}: the process started "
                f"{identity.created - self.since:.1f}s after the first record naming it "
                "(a reused pid or a replayed log)"
            )
        if self.log_path:
            return _log_owner_problem(self.log_path)
        return None

    def verified(self) -> list[str]:
        """What was checked, in words, for the kill dialog."""
        me = os.getuid()
        facts = [
            f"process owned by your user (uid {me}); not pid 1, the monitor or its ancestors",
            "same process as when first seen (pid + start time)",
            "process started before the first record naming it",
        ]
        if self.log_path:
            facts.append(f"log file owned by your user (uid {me})")
        facts.append(
            f"confirmed by the agent: {self.confirmed}"
            if self.confirmed
            else "NOT confirmed by the agent: only the log file names this pid"
        )
        return facts


def _open_pidfd(pid: int) -> int | None:
    """A pidfd pins the process: signals sent through it cannot hit a reused pid."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:  # too old a kernel, seccomp, or already gone
        return None


def _signal(identity: ProcessIdentity, pidfd: int | None, sig: int) -> None:
    if pidfd is not None:
        signal.pidfd_send_signal(pidfd, sig)
    else:
        os.kill(identity.pid, sig)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _wait_gone(identity: ProcessIdentity, pidfd: int | None, timeout: float) -> bool:
    """Wait until the process exits or ``timeout`` passes; True if it exited."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    exited: asyncio.Future[None] | None = None
    if pidfd is not None:
        # A pidfd becomes readable when its process exits: no polling needed,
        # but keep a slow poll as well in case the loop cannot watch it.
        future: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(pidfd, _resolve, future)
            exited = future
        except (OSError, NotImplementedError, ValueError):
            pass
    try:
        while True:
            if _is_gone(identity):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            step = min(remaining, 0.5 if exited is not None else 0.02)
            if exited is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(exited), step)
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(step)
    finally:
        if exited is not None and pidfd is not None:
            loop.remove_reader(pidfd)


async def terminate(identity: ProcessIdentity, grace: float = 5.0) -> Outcome:
    """SIGTERM the session's process, then SIGKILL it if it outlives ``grace`` seconds.

    Refuses (``refused``) unless :func:`check_killable` passes right before
    each signal.
    """
    reason = check_killable(identity)
    if reason is not None:
        return Outcome(REFUSED, reason)
    pidfd = _open_pidfd(identity.pid)
    try:
        # Re-check after pinning: if the pid was reused in between, the pidfd
        # refers to the new process and the start time no longer matches.
        reason = check_killable(identity)
        if reason is not None:
            return Outcome(REFUSED, reason)
        try:
            _signal(identity, pidfd, signal.SIGTERM)
        except ProcessLookupError:
            return Outcome(DELIVERED, f"pid {identity.pid} had already exited")
        except PermissionError as exc:
            return Outcome(FAILED, f"SIGTERM to pid {identity.pid} not permitted: {exc.strerror or exc}")
        if await _wait_gone(identity, pidfd, grace):
            return Outcome(DELIVERED, f"pid {identity.pid} exited after SIGTERM")
        if pidfd is None:  # without a pidfd, make sure the pid was not reused meanwhile
            if _is_gone(identity):
                return Outcome(DELIVERED, f"pid {identity.pid} exited after SIGTERM")
            reason = check_killable(identity)
            if reason is not None:
                return Outcome(REFUSED, reason)
        try:
            _signal(identity, pidfd, signal.SIGKILL)
        except ProcessLookupError:
            return Outcome(DELIVERED, f"pid {identity.pid} exited after SIGTERM")
        except PermissionError as exc:
            return Outcome(FAILED, f"SIGKILL to pid {identity.pid} not permitted: {exc.strerror or exc}")
        if await _wait_gone(identity, pidfd, 5.0):
            return Outcome(
                DELIVERED, f"pid {identity.pid} ignored SIGTERM for {grace:g}s; killed with SIGKILL"
            )
        return Outcome(FAILED, f"pid {identity.pid} is still running after SIGKILL (uninterruptible?)")
    finally:
        if pidfd is not None:
            os.close(pidfd)


# -- pause and resume ------------------------------------------------------------------


def process_state(pid: int) -> str | None:
    """The process's state letter from ``/proc`` (``T``: stopped), or None."""
    stat = _proc_stat(pid) if _HAVE_PROC else None
    return stat[0] if stat is not None else None


def _suspend_refusal(identity: ProcessIdentity | None, verb: str) -> str | None:
    """:func:`check_killable`'s proof, worded for ``verb`` (pause or resume)."""
    reason = check_killable(identity)
    return None if reason is None else reason.replace("refusing to kill", f"refusing to {verb}")


async def suspend(identity: ProcessIdentity, pause: bool) -> Outcome:
    """SIGSTOP (``pause``) or SIGCONT the session's process, with the kill's proof
    (same user, pid + start time, never pid 1, the monitor or its ancestors),
    checked again after the pid is pinned by a pidfd."""
    verb, sig, name = ("pause", signal.SIGSTOP, "SIGSTOP") if pause else ("resume", signal.SIGCONT, "SIGCONT")
    reason = _suspend_refusal(identity, verb)
    if reason is not None:
        return Outcome(REFUSED, reason)
    pidfd = _open_pidfd(identity.pid)
    try:
        reason = _suspend_refusal(identity, verb)
        if reason is not None:
            return Outcome(REFUSED, reason)
        try:
            _signal(identity, pidfd, sig)
        except ProcessLookupError:
            return Outcome(FAILED, f"pid {identity.pid} has already exited")
        except PermissionError as exc:
            return Outcome(FAILED, f"{name} to pid {identity.pid} not permitted: {exc.strerror or exc}")
    finally:
        if pidfd is not None:
            os.close(pidfd)
    # The kernel stops the process asynchronously: say what /proc shows once it shows it.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.0
    state = process_state(identity.pid)
    while _HAVE_PROC and (state in ("T", "t")) != pause and loop.time() < deadline:
        await asyncio.sleep(0.005)
        state = process_state(identity.pid)
    done = "stopped" if pause else "running again"
    shown = f" (state {state})" if state else ""
    return Outcome(DELIVERED, f"{name} sent to pid {identity.pid}: {done}{shown}")
