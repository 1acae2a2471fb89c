"""Opening a file someone else may have swapped: never block, never follow, regular only.

A watched or scanned directory may be shared (a 1777 ``/tmp/logs``): between
our ``stat`` and our ``open`` another user can put a FIFO under the name, and
a plain ``open`` of a FIFO blocks until a writer comes -- for ever, if the
FIFO is already unlinked, and no signal handler runs meanwhile.  So the open
itself never blocks (``O_NONBLOCK``), never follows a link planted in the
directory (``O_NOFOLLOW``, unless the operator named the link), and what was
opened is checked with ``fstat``; only then is ``O_NONBLOCK`` cleared.
Stdlib only: the sources, the scan and the commands share it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat


class NotRegular(OSError):
    """What was opened is a FIFO, a device, a socket or a directory."""


def kind_of(mode: int) -> str:
    """A file type in words (``a FIFO``), for messages."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], *, follow: bool = False) -> int:
    """A read-only, blocking, close-on-exec descriptor of the regular file at ``path``.

    Raises :class:`NotRegular` (an ``OSError``, ``strerror`` saying what it
    is) for anything else, and ``OSError(ELOOP)`` for a symbolic link unless
    ``follow``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise OSError(errno.ELOOP, "a symbolic link (not followed)", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, f"{kind_of(mode)}, not a regular file: not read", str(path))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_stream(path: str | os.PathLike[str], *, follow: bool = False):
    """:func:`open_regular` as a binary file object."""
    return os.fdopen(open_regular(path, follow=follow), "rb")


def open_input(path: str | os.PathLike[str], *, named: bool):
    """A file to scan, as a binary file object.

    ``named``: the operator named this path on the command line, so a link is
    followed and a pipe is theirs to give (``scan <(zcat log.gz)``: opened
    blocking, as it must be to wait for its writer).  A file found in a
    directory must be a regular file, not a link, opened without blocking."""
    if named:
        try:
            pipe = not stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            pipe = False  # (open_regular says why)
        if pipe:
            return open(path, "rb")  # noqa: SIM115 (the caller closes it)
    return open_regular_stream(path, follow=named)


__all__ = ["NotRegular", "kind_of", "open_input", "open_regular", "open_regular_stream"]
