"""Where reading a newly found file starts, and how far it has been read, by identity.

A file is known by device, inode and a hash of its first bytes, so an inode
reused by another file is not taken for the one read before.
:class:`KnownPositions` holds where a previous watcher stopped (the store's
``file_positions`` table); :class:`StartPoints` decides, for each file found,
whether it is resumed from there, read from its start, or read per the
:class:`~monitor.sources.paths.StartPolicy`; :func:`position` is the record
stored after each read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from typing import Any

from monitor.formats.base import Problem
from monitor.sources.paths import StartPolicy
from monitor.sources.tailed import MARK_BYTES, TailedFile

#: Bytes at the start of a file hashed into its identity (with device and inode).
HEAD_BYTES = 1024


def path_key(path: str) -> str:
    """``path`` as stored (any bytes a file name may hold, as valid text)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def head_hash(fd: int, length: int) -> str | None:
    data = os.pread(fd, length, 0)
    if len(data) < length:
        return None
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class KnownPositions:
    """Where a previous watcher stopped reading each file, by identity and by name."""

    def __init__(self, records: Iterable[dict[str, Any]] = ()):
        self.by_ident: dict[tuple[int, int], dict[str, Any]] = {}
        self.by_path: dict[str, dict[str, Any]] = {}
        for record in records:
            self.by_ident[int(record["dev"]), int(record["ino"])] = record
            known = self.by_path.get(record["path"])
            if known is None or record.get("updated", 0) >= known.get("updated", 0):
                self.by_path[record["path"]] = record

    def __bool__(self) -> bool:
        return bool(self.by_ident)


class StartPoints:
    """Where each newly found file starts: a stored position, its start, or the start policy.

    ``notice`` receives what the operator should hear (a file replaced since
    loopwatch last read it)."""

    def __init__(
        self,
        policy: StartPolicy,
        known: KnownPositions,
        clock: Callable[[], float],
        notice: Callable[[Problem], None],
    ):
        self.policy = policy
        self.known = known
        self.clock = clock
        self.notice = notice

    def new_file(self, path: str, st: os.stat_result, initial: bool) -> TailedFile:
        """The state for a file just found; ``initial``: it existed when watching began."""
        ident = (st.st_dev, st.st_ino)
        if self.known:
            known = self.known.by_ident.get(ident)
            if known is not None and known["offset"] <= st.st_size:  # (also under a new name: renamed)
                return TailedFile(path, ident, int(known["offset"]), resume=known)
            before = self.known.by_path.get(path_key(path))
            if known is not None or (before is not None and (before["dev"], before["ino"]) != ident):
                self.notice(
                    Problem(
                        path,
                        None,
                        "replaced or truncated since loopwatch last read it: reading it from the start",
                    )
                )
                return TailedFile(path, ident, 0)
        if not initial:
            return TailedFile(path, ident, 0)
        policy = self.policy
        mode = policy.mode
        if mode == "recent":
            age = self.clock() - st.st_mtime
            mode = "tail" if age <= policy.recent_seconds else "end"
        if mode == "start" or st.st_size == 0:
            return TailedFile(path, ident, 0)
        if mode == "tail":
            if st.st_size <= policy.tail_bytes:
                return TailedFile(path, ident, 0)
            return TailedFile(path, ident, st.st_size - policy.tail_bytes, align="forward")
        # End: the boundary is found lazily, on the first read, so that a tree
        # of old logs costs one stat per file at start-up.
        return TailedFile(path, ident, st.st_size, align="back", mtime_ns=st.st_mtime_ns)


def resume(tf: TailedFile, fd: int) -> int | None:
    """Take up ``tf`` where a previous watcher stopped if its head still matches:
    the number of the next line; None (and ``tf`` set to read from its start)
    when another file now has that inode."""
    record, tf.resume = tf.resume, None
    assert record is not None
    head_len = int(record["head_len"])
    head = head_hash(fd, head_len) if head_len else ""
    if head is None or head != record["head"]:  # the stored head is always a str
        tf.offset, tf.align = 0, ""  # another file under a reused inode: all of it is new
        return None
    tf.head_len, tf.head = head_len, head
    tf.align = ""
    tf.numbered = record.get("line") is not None
    tf.mark = bytes(record.get("mark") or b"")
    return int(record.get("line") or 1)


def position(tf: TailedFile, *, packed: bool = False) -> dict[str, Any] | None:
    """How far ``tf`` has been read in whole lines, with its identity, to be
    stored.  ``packed``: a compressed file, read whole (its offset is its
    compressed size; what its splitter holds is decompressed, so not counted)."""
    splitter = tf.splitter
    if tf.fd is None or splitter is None:
        return None
    pending = 0 if packed else splitter.pending_bytes
    consumed = tf.offset - pending
    if consumed <= 0:
        return None
    want = min(HEAD_BYTES, consumed)
    if tf.head_len < want:
        head = head_hash(tf.fd, want)
        if head is None:
            return None
        tf.head_len, tf.head = want, head
    if pending:
        size = min(MARK_BYTES, consumed)
        mark = os.pread(tf.fd, size, consumed - size)
    else:
        mark = tf.mark
    return {
        "dev": tf.ident[0],
        "ino": tf.ident[1],
        "head_len": tf.head_len,
        "head": tf.head,
        "path": path_key(tf.path),
        "offset": consumed,
        "line": splitter.lineno + 1 if tf.numbered else None,
        "mark": mark,
    }
