"""Who is at the other end of the monitor's Unix socket, and whose directory it lives in.

Without ``XDG_RUNTIME_DIR`` the default socket lives in ``/tmp/loopwatch-<uid>``,
a name any local user can create first.  So a socket directory that sits in
a shared directory (its parent is world-writable, like ``/tmp``) must be a
real directory, not a symlink, owned by the monitor's user with no access for
group or others; :func:`private_dir_problem` checks that with ``lstat``
before every use (the server creates it 0700 and never ``chmod``-s one it did
not create), and :func:`listener_problem` checks the credentials of the
process listening on a socket (``SO_PEERCRED``) before a client sends
anything.  Standard library only: ``loopwatch hook`` imports this on every
tool call.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path


def in_shared_dir(directory: Path) -> bool:
    """True when ``directory``'s parent lets other users create entries (``/tmp`` and the like)."""
    try:
        return bool(os.stat(directory.parent).st_mode & stat.S_IWOTH)
    except OSError:
        return False


def private_dir_problem(directory: Path) -> str | None:
    """None when ``directory`` is a real directory of ours that no one else can use; else why not."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return f"{directory} does not exist"
    except OSError as exc:
        return f"cannot check {directory}: {exc.strerror or exc}"
    me = os.getuid()
    if stat.S_ISLNK(info.st_mode):
        return f"{directory} is a symbolic link; refusing to use it for the monitor's socket"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != me:
        return (
            f"{directory} belongs to uid {info.st_uid}, not to you (uid {me}): another user may "
            "have created it; refusing to use it (set XDG_RUNTIME_DIR or pass --socket)"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        return (
            f"{directory} has mode {stat.S_IMODE(info.st_mode):o}; the socket directory must be "
            "0700 (remove it and let loopwatch create it)"
        )
    return None


def ensure_private_dir(directory: Path) -> str | None:
    """Create ``directory`` 0700 if it does not exist, then check it; None when usable."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot create {directory}: {exc.strerror or exc}"
    return private_dir_problem(directory)


def socket_dir_problem(path: Path) -> str | None:
    """The check a client makes before connecting to the Unix socket ``path``."""
    directory = path.parent
    if in_shared_dir(directory):
        return private_dir_problem(directory)
    return None


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (of a listener: the one that called listen)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        _pid, uid, _gid = struct.unpack(
            "3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        )
    except OSError:
        return None
    return uid


def listener_problem(sock: socket.socket) -> str | None:
    """None when the connected socket's listener runs as us (or root); else why not to talk to it."""
    uid = peer_uid(sock)
    if uid is None:
        option = getattr(socket, "SO_PEERCRED", None)
        return None if option is None else "cannot read the listening process's credentials"
    if uid not in (os.getuid(), 0):
        return (
            f"the process listening on the socket runs as uid {uid}, not as you (uid {os.getuid()}); "
            "refusing to send it anything"
        )
    return None
