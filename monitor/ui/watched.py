"""What a live monitor watches and where agents reach it, for the empty dashboard and the log pane.

Read from the running :class:`~monitor.hub.live.LiveMonitor` (or an object holding it as
``live``, as the demo does) when asked, since its sources exist only once it has started.
No Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Watched:
    #: "3 file(s) under ~/logs/*.jsonl (only new lines are read)", or "" when no file is followed.
    files: str = ""
    #: The Unix socket agents connect to (and TCP, when listening), or "" with ``--no-socket``.
    socket: str = ""
    #: The OTLP receiver, or "".
    otlp: str = ""
    #: The database actions and events are recorded to, or "".
    db: str = ""


def watched(owner: Any) -> Watched:
    """What ``owner`` (a LiveMonitor, or something with one as ``live``) watches now."""
    live = getattr(owner, "live", None) or owner
    if live is None:
        return Watched()
    files = getattr(live, "files", None)
    sockets = getattr(live, "sockets", None)
    otlp = getattr(live, "otlp", None)
    store = getattr(live, "store", None)
    socket = ""
    if sockets is not None:
        socket = str(sockets.unix_path)
        if getattr(sockets, "tcp_address", None):
            socket += " and tcp {}:{}".format(*sockets.tcp_address)
    return Watched(
        files=f"{files.describe()} ({files.start_policy.describe()})" if files is not None else "",
        socket=socket,
        otlp=otlp.describe() if otlp is not None else "",
        db=str(store.path) if store is not None else "",
    )


def unix_socket(facts: Watched) -> str:
    """The socket's path alone (without "and tcp …")."""
    return facts.socket.split(" and tcp ")[0]


def connect_lines(facts: Watched) -> list[tuple[str, str]]:
    """(command, what it does): the ways to bring an agent to this monitor."""
    lines = [
        ("loopwatch install-hook claude", "Claude Code: its hooks report every tool call here"),
        ("loopwatch install-hook codex", "Codex: the same through its hooks"),
    ]
    socket = unix_socket(facts)
    if socket:
        lines.append(
            (f"LOOPWATCH_SOCKET={socket} python examples/example_agent.py", "an agent on the Python client")
        )
    lines.append(("loopwatch watch PATH…", "follow agents' log files (Claude, Codex, Aider, native …)"))
    return lines
