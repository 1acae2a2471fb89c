"""What the store does at start about a run that ended without closing it.

A monitor killed with SIGKILL (or by a power cut) while carrying out an
action leaves the action ``pending``: it was recorded before it was carried
out, and its outcome never was.  :func:`reconcile_pending` finishes every
pending action whose monitor is gone (each action row names its ``owner``,
the monitor process as ``pid:start``), with what can be known now: a kill
whose target process has exited is ``delivered``; anything else is
``failed`` with the reason.  Actions of a monitor still running on the same
database are left alone.

It also provides the owner stamp of this process and the ``store_losses``
rows (rows the store could not record, see :mod:`monitor.store_writer`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from sqlite_utils import Database

INTERRUPTED = "interrupted: the monitor stopped before this action's outcome was recorded"


def _proc_start(pid: int) -> str | None:
    """The start tick of a live process (None: no such process, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    fields = data[data.rfind(b")") + 2:].split()
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return fields[19].decode() if len(fields) > 19 else "?"


def _alive(pid: int) -> str | None:
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
    """``pid:start`` of this process (or ``pid``), written in each action row."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_alive(pid) or '?'}"


def owner_running(owner: str | None) -> bool:
    """True while the monitor that wrote ``owner`` still runs (never true for this one's
    predecessor with a reused pid: the start stamp differs)."""
    if not owner or ":" not in owner:
        return False
    pid_text, _, start = owner.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    now = _alive(pid)
    if now is None:
        return False
    return start == "?" or now == "?" or now == start


def _kill_outcome(db: Database, session: str) -> tuple[str, str]:
    row = db.execute("SELECT pid FROM sessions WHERE id = ?", [session]).fetchone()
    pid = row[0] if row else None
    if not isinstance(pid, int) or pid <= 0:
        return "failed", f"{INTERRUPTED}; the session has no known pid to check"
    if _alive(pid) is None:
        return "delivered", f"{INTERRUPTED}; at restart pid {pid} had exited"
    return "failed", (f"{INTERRUPTED}; at restart a process with pid {pid} was still running "
                      "(kill it again if it is still the agent)")


def reconcile_pending(db: Database, clock=time.time) -> list[dict[str, Any]]:
    """Finish the pending actions of monitors that are gone; return them (committed)."""
    rows = db.execute("SELECT id, session, kind, owner FROM actions WHERE outcome = 'pending'").fetchall()
    done: list[dict[str, Any]] = []
    for action_id, session, kind, owner in rows:
        if owner_running(owner):
            continue
        outcome, detail = _kill_outcome(db, session) if kind == "kill" else (
            "failed", f"{INTERRUPTED}; it may or may not have reached the agent")
        done.append({"id": action_id, "session": session, "kind": kind, "outcome": outcome,
                     "detail": detail})
    if done:
        with db.conn:
            db.conn.executemany(
                "UPDATE actions SET outcome = ?, detail = CASE WHEN detail = '' THEN ? "
                "ELSE detail || ' | ' || ? END, finished_ts = ? WHERE id = ? AND outcome = 'pending'",
                [[d["outcome"], d["detail"], d["detail"], clock(), d["id"]] for d in done])
    return done


def record_loss(db: Database, dropped: int, failed: int, reason: str, clock=time.time) -> None:
    """One ``store_losses`` row: how many rows this run lost so far (in an open transaction)."""
    db.execute("INSERT INTO store_losses (ts, owner, dropped, failed, reason) VALUES (?, ?, ?, ?, ?)",
               [clock(), owner_stamp(), dropped, failed, reason])
