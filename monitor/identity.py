"""Who acted and which monitor process did it: the one format for each.

* :func:`current_user` is the operator recorded as ``who`` of an action
  (the OS user name, or ``uid N`` where the user has no passwd entry).
* :func:`owner_stamp` is a monitor process as ``pid:start`` (its start tick
  from ``/proc``, ``?`` where that cannot be read), written on every action
  and session row it records; :func:`owner_running` says whether that process
  still runs, so a reader can tell a watcher that stopped, even by SIGKILL,
  from one still running -- a reused pid has another start tick.

Standard library only: the store, the hub and read-only commands use it.
"""

from __future__ import annotations

import getpass
import os


def current_user() -> str:
    """The OS user who acts through this process."""
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): the uid still says who
        return f"uid {os.getuid()}"


def proc_stat_fields(pid: int) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` from the state on (field 3): the
    command name before them may hold spaces and parentheses, so the split is
    after its last ``)``.  Raises :class:`OSError` where the file cannot be read."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return data[data.rfind(b")") + 2 :].split()


def _proc_start(pid: int) -> str | None:
    """The start tick of a live process (None: no such process, or a zombie)."""
    try:
        fields = proc_stat_fields(pid)
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return fields[19].decode() if len(fields) > 19 else "?"


def process_start(pid: int) -> str | None:
    """The start stamp of ``pid`` if it runs ("?" where it cannot be read)."""
    if os.path.isdir("/proc/self"):
        return _proc_start(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        return "?"
    return "?"


def owner_stamp(pid: int | None = None) -> str:
    """``pid:start`` of this process (or of ``pid``)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{process_start(pid) or '?'}"


def owner_running(owner: str | None) -> bool:
    """True while the process that wrote ``owner`` still runs (never for a later
    process that reused its pid: the start stamp differs)."""
    if not owner or ":" not in owner:
        return False
    pid_text, _, start = owner.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    now = process_start(pid)
    if now is None:
        return False
    return start == "?" or now == "?" or now == start
