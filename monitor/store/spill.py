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

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

#: Default bound of the spill file: about 250,000 typical rows.
SPILL_BYTES = 512 * 1024 * 1024


def _encode(kind: str, row: list[Any]) -> bytes:
    try:
        return orjson.dumps([kind, row]) + b"\n"
    except TypeError:  # an integer beyond 64 bits: kept exactly, SQLite's verdict comes later
        return json.dumps([kind, row], default=str).encode() + b"\n"


class Spill:
    """An append-only file of queued rows, read back first-in first-out.

    Not thread-safe: the writer calls it with its queue lock held."""

    def __init__(self, directory: Path, max_bytes: int = SPILL_BYTES):
        self.directory = directory
        self.max_bytes = max_bytes
        self.count = 0  # rows in the file not read back yet
        self.total = 0  # rows ever spilled
        self._file: Any = None
        self._read_at = 0
        self._size = 0

    def _open(self) -> Any:
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self.directory, prefix=".loopwatch-spill-")
        return self._file

    def room(self, rows: list[tuple[str, list[Any]]]) -> list[bytes] | None:
        """The encoded rows if they fit under ``max_bytes``, else None."""
        lines = [_encode(kind, row) for kind, row in rows]
        if self._size + sum(map(len, lines)) > self.max_bytes:
            return None
        return lines

    def append(self, lines: list[bytes]) -> None:
        file = self._open()
        file.seek(0, os.SEEK_END)
        file.write(b"".join(lines))
        self._size += sum(map(len, lines))
        self.count += len(lines)
        self.total += len(lines)

    def take(self, limit: int) -> list[tuple[str, list[Any]]]:
        """Up to ``limit`` rows, oldest first."""
        if not self.count or limit <= 0:
            return []
        file = self._file
        file.flush()
        file.seek(self._read_at)
        out: list[tuple[str, list[Any]]] = []
        while len(out) < limit:
            line = file.readline()
            if not line:
                break
            try:
                kind, row = orjson.loads(line)
            except orjson.JSONDecodeError:  # what _encode wrote with json
                kind, row = json.loads(line)
            out.append((kind, row))
        self._read_at = file.tell()
        self.count -= len(out)
        if self.count <= 0:  # all read back: start the file over
            self.count = 0
            file.seek(0)
            file.truncate()
            self._read_at = self._size = 0
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
