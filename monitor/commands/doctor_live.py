"""``doctor``'s lines for the live parts that have no endpoint to reach: the notice for a
session left waiting for input, and pause/kill (can this machine prove a process?).

The guard, the alerts and the OTLP export have their own checks in
:mod:`monitor.commands.doctor`; these two complete "doctor reports each part" (issue 35).
"""

from __future__ import annotations

import os
from typing import Any

#: One line of the report: (status "OK" | "FIX" | "--", what, detail); doctor makes its Check of it.
Line = tuple[str, str, str]


def check_waiting(config: Any) -> list[Line]:
    """``[sources] waiting_notice_seconds``: when a session waiting for the person raises a notice."""
    seconds = config.sources.waiting_notice_seconds
    if not seconds:
        return [
            ("--", "waiting for input", "no notice for a long wait ([sources] waiting_notice_seconds = 0)")
        ]
    return [
        (
            "OK",
            "waiting for input",
            f"a session waiting for you (a permission prompt, a question, an elicitation) raises a notice "
            f"after {seconds:g} s ([sources] waiting_notice_seconds)",
        )
    ]


def check_pause() -> list[Line]:
    """Whether ``p`` (pause/resume) and kill can prove a process here: they signal only a
    process whose pid and start time are known (this check captures the doctor's own)."""
    from monitor.control import ProcessIdentity

    if ProcessIdentity.capture(os.getpid()) is None:
        return [
            (
                "FIX",
                "pause and kill",
                "cannot read a process's start time here (no /proc, no psutil): "
                "loopwatch refuses every pause and kill",
            )
        ]
    how = "/proc" if os.path.isdir("/proc/self") else "psutil"
    pinned = (
        "signals go through a pidfd, so a reused pid is never hit"
        if hasattr(os, "pidfd_open")
        else "no pidfd here: the process is checked again right before each signal"
    )
    return [
        (
            "OK",
            "pause and kill",
            f"a session's process is proven by pid and start time ({how}); {pinned}; "
            "a session needs a pid from a hook's SessionStart or a socket client",
        )
    ]
