"""Who is at the other end of an agent's Unix-socket connection, and which pids it may report.

The kernel says (``SO_PEERCRED``) which process connected, read once when the
connection is accepted, while the peer surely runs (a hook may exit before
its lines are processed).  :class:`PeerPids` then judges each pid the agent
reports: the hub signals that pid on a kill, so it must name the agent's
process on this machine.
"""

from __future__ import annotations

import os
import socket
import struct

from monitor.control import ProcessIdentity, ancestors, same_pid_namespace


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid, uid, _gid = struct.unpack(
            "3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        )
    except OSError:
        return None
    return (pid, uid) if pid else None


def peer_pid(sock: socket.socket) -> int | None:
    """The connecting process's pid (Linux SO_PEERCRED), for naming the source."""
    credentials = peer_credentials(sock)
    return credentials[0] if credentials else None


class PeerPids:
    """What the kernel says about a Unix-socket peer, and the pids it may report.

    ``judge`` says whether a reported pid may name the agent's process (the
    peer, an ancestor or a child, in our pid namespace); ``confirmation`` is
    what the hub needs to treat it as confirmed by the agent (what
    ``auto_kill`` requires): the peer's credentials were read while it ran,
    and it runs as our user.
    """

    def __init__(self, pid: int | None, uid: int | None):
        self.pid = pid
        self.uid = uid
        self.family: frozenset[int] = frozenset()
        self.namespace_ok: bool | None = None
        if pid:
            self.namespace_ok = same_pid_namespace(pid)
            if self.namespace_ok:
                self.family = frozenset([pid, *ancestors(pid)])
        self._verdicts: dict[int, str | None] = {}
        self._confirmed: set[tuple[str, int]] = set()

    def judge(self, pid: int) -> str | None:
        """None if ``pid`` is trusted, else why not (remembered for 256 pids)."""
        verdict = self._verdicts.get(pid, "")
        if verdict == "":
            verdict = self._judge(pid)
            if len(self._verdicts) < 256:
                self._verdicts[pid] = verdict
        return verdict

    def _judge(self, pid: int) -> str | None:
        if self.namespace_ok is None:
            return None  # the peer is unknown or gone: the kill-time checks still apply
        if not self.namespace_ok:
            return f"pid {pid} comes from a process in another pid namespace (a container?)"
        if pid in self.family or self.pid in ancestors(pid):
            return None
        return (
            f"pid {pid} is not the connecting process (pid {self.pid}), "
            f"one of its ancestors or one of its children"
        )

    def confirmation(self, session: str, pid: int, what: str) -> tuple[ProcessIdentity, str] | None:
        """(identity, how) the first time a judged pid of ``session`` counts as
        confirmed by the agent; None when it does not (or was already sent)."""
        if not self.namespace_ok or self.uid not in (os.getuid(), 0):
            return None  # the peer left before we could look, or is not our user
        if (session, pid) in self._confirmed or len(self._confirmed) >= 256:
            return None
        identity = ProcessIdentity.capture(pid)
        if identity is None:
            return None
        self._confirmed.add((session, pid))
        return identity, f"socket peer credentials (the connecting {what} is pid {self.pid}, uid {self.uid})"
