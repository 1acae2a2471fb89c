"""What the store does at start about a run that ended without closing it.

A monitor killed with SIGKILL (or by a power cut) while carrying out an
action leaves the action ``pending``: it was recorded before it was carried
out, and its outcome never was.  :func:`reconcile_pending` finishes every
pending action whose monitor is gone (each action row names its ``owner``,
the monitor process as ``pid:start``), with what can be known now: a kill
whose target process has exited is ``delivered``; anything else is
``failed`` with the reason.  Actions of a monitor still running on the same
database are left alone.

Sessions such a monitor was delivering still say ``live`` (or ``idle``):
:func:`reconcile_sessions` marks them ``stopped``, as a monitor that stops
cleanly does (each session row names its ``owner`` too, schema v6).  The
owner stamp is :func:`monitor.identity.owner_stamp`.

It also writes the ``store_losses`` rows (rows the store could not record,
see :mod:`monitor.store.writer`).
"""

from __future__ import annotations

import time
from typing import Any

from sqlite_utils import Database

from monitor.identity import owner_running, owner_stamp, process_start

INTERRUPTED = "interrupted: the monitor stopped before this action's outcome was recorded"


def _kill_outcome(db: Database, session: str) -> tuple[str, str]:
    row = db.execute("SELECT pid FROM sessions WHERE id = ?", [session]).fetchone()
    pid = row[0] if row else None
    if not isinstance(pid, int) or pid <= 0:
        return "failed", f"{INTERRUPTED}; the session has no known pid to check"
    if process_start(pid) is None:
        return "delivered", f"{INTERRUPTED}; at restart pid {pid} had exited"
    return "failed", (
        f"{INTERRUPTED}; at restart a process with pid {pid} was still running "
        "(kill it again if it is still the agent)"
    )


def reconcile_pending(db: Database, clock=time.time) -> list[dict[str, Any]]:
    """Finish the pending actions of monitors that are gone; return them (committed)."""
    rows = db.execute("SELECT id, session, kind, owner FROM actions WHERE outcome = 'pending'").fetchall()
    done: list[dict[str, Any]] = []
    for action_id, session, kind, owner in rows:
        if owner_running(owner):
            continue
        outcome, detail = (
            _kill_outcome(db, session)
            if kind == "kill"
            else ("failed", f"{INTERRUPTED}; it may or may not have reached the agent")
        )
        done.append({"id": action_id, "session": session, "kind": kind, "outcome": outcome, "detail": detail})
    if done:
        with db.conn:
            db.conn.executemany(
                "UPDATE actions SET outcome = ?, detail = CASE WHEN detail = '' THEN ? "
                "ELSE detail || ' | ' || ? END, finished_ts = ? WHERE id = ? AND outcome = 'pending'",
                [[d["outcome"], d["detail"], d["detail"], clock(), d["id"]] for d in done],
            )
    return done


def record_loss(db: Database, dropped: int, failed: int, reason: str, clock=time.time) -> None:
    """One ``store_losses`` row: how many rows this run lost so far (in an open transaction)."""
    db.execute(
        "INSERT INTO store_losses (ts, owner, dropped, failed, reason) VALUES (?, ?, ?, ?, ?)",
        [clock(), owner_stamp(), dropped, failed, reason],
    )


def reconcile_sessions(db: Database, me: str) -> int:
    """Mark ``stopped`` the sessions not ended whose watcher is gone (``me`` is
    this one); return how many.  A session without an owner was recorded
    before v6, by a watcher that is not writing v6 rows now."""
    owners = [
        row[0]
        for row in db.execute(
            "SELECT DISTINCT owner FROM sessions WHERE status NOT IN ('ended', 'stopped')"
        ).fetchall()
    ]
    gone = [owner for owner in owners if owner != me and not owner_running(owner)]
    if not gone:
        return 0
    with db.conn:
        return sum(
            db.conn.execute(
                "UPDATE sessions SET status = 'stopped' WHERE status NOT IN ('ended', 'stopped') "
                "AND owner IS ?",
                [owner],
            ).rowcount
            for owner in gone
        )
