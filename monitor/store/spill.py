"""The store queue's overflow on disk, so back-pressure never drops rows silently.

When the writer cannot keep up (another process holds the database's write
lock, a slow disk), rows beyond the in-memory queue go to an anonymous
temporary file next to the database (unlinked at once: it never outlives the
process and nobody else can open it) and come back, in order, as the writer
catches up.  The file is bounded (``max_bytes``); only past that are rows
dropped, and each is counted.

Rows are lists of str, int, float and None (see :mod:`monitor.store.rows`),
written as one JSON line each.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

#: Default bound of the spill file: about 250,000 typical rows.
SPILL_BYTES = 512 * 1024 * 1024
#: Bytes read back at a time.
READ_BYTES = 1 << 20


def _encode(kind: str, row: list[Any]) -> bytes:
    try:
        return orjson.dumps([kind, row]) + b"\n"
    except TypeError:  # an integer beyond 64 bits: kept exactly, SQLite's verdict comes later
        return json.dumps([kind, row], default=str).encode() + b"\n"


class Spill:
    """An append-only file of queued rows, read back first-in first-out.

    Rows are written whole or not at all: an append goes at the file's logical
    end with one ``pwrite``; a short or failed write (a full disk) leaves the
    end where it was, so the torn bytes are overwritten by the next append and
    never read.  Reading stops at the logical end and checks every line; one
    that does not decode (it cannot happen, but a disk can lie) is skipped and
    counted in ``torn``, never raised to the writer.

    Not thread-safe: the writer calls it with its queue lock held."""

    def __init__(self, directory: Path, max_bytes: int = SPILL_BYTES):
        self.directory = directory
        self.max_bytes = max_bytes
        self.count = 0  # rows in the file not read back yet
        self.total = 0  # rows ever spilled
        self.torn = 0  # rows read back that did not decode (skipped)
        self._file: Any = None
        self._read_at = 0
        self._size = 0  # the logical end: everything before it was written whole

    def _open(self) -> Any:
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self.directory, prefix=".loopwatch-spill-", buffering=0)
        return self._file

    def room(self, rows: list[tuple[str, list[Any]]]) -> list[bytes] | None:
        """The encoded rows if they fit under ``max_bytes``, else None."""
        lines = [_encode(kind, row) for kind, row in rows]
        if self._size + sum(map(len, lines)) > self.max_bytes:
            return None
        return lines

    def append(self, lines: list[bytes]) -> None:
        """Write ``lines`` whole, or raise OSError having kept none of them."""
        fd = self._open().fileno()
        data = b"".join(lines)
        written = 0
        try:
            while written < len(data):
                n = os.pwrite(fd, data[written:] if written else data, self._size + written)
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += n
        except OSError:
            try:
                os.ftruncate(fd, self._size)  # give the torn bytes back to the disk
            except OSError:
                pass
            raise
        self._size += len(data)
        self.count += len(lines)
        self.total += len(lines)

    def take(self, limit: int) -> list[tuple[str, list[Any]]]:
        """Up to ``limit`` rows, oldest first."""
        if not self.count or limit <= 0:
            return []
        fd = self._file.fileno()
        out: list[tuple[str, list[Any]]] = []
        taken = 0
        while taken < limit and self._read_at < self._size:
            block = os.pread(fd, min(READ_BYTES, self._size - self._read_at), self._read_at)
            if not block:
                break
            end = block.rfind(b"\n")
            if end < 0:
                if len(block) < self._size - self._read_at:  # a line longer than a block
                    block = os.pread(fd, self._size - self._read_at, self._read_at)
                    end = block.rfind(b"\n")
                if end < 0:  # no newline before the logical end: a torn tail
                    self.torn += 1
                    self._read_at = self._size
                    break
            lines = block[: end + 1].splitlines()
            used = 0
            for line in lines:
                if taken >= limit:
                    break
                used += len(line) + 1
                taken += 1
                row = _decode(line)
                if row is None:
                    self.torn += 1
                else:
                    out.append(row)
            self._read_at += used
        self.count -= taken
        if self.count <= 0 or self._read_at >= self._size:  # all read back: start the file over
            self.count = 0
            os.ftruncate(fd, 0)
            self._read_at = self._size = 0
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _decode(line: bytes) -> tuple[str, list[Any]] | None:
    try:
        try:
            kind, row = orjson.loads(line)
        except orjson.JSONDecodeError:  # what _encode wrote with json
            kind, row = json.loads(line)
    except (ValueError, TypeError):
        return None
    if not isinstance(kind, str) or not isinstance(row, list):
        return None
    return kind, row
