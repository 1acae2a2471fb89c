"""Reading followed files: what was appended since the offset, decoded and handed on.

:class:`Tailer` reads each :class:`~monitor.sources.tailed.TailedFile` from its
offset, a bounded amount per call so that one busy file does not starve the
others; notices a file truncated or rewritten in place under it; decodes whole
lines (a :class:`~monitor.framing.LineSplitter` holds a half-written last
line) and hands events, bad-input problems and the read position to the sink.
It keeps at most ``max_open`` descriptors open, closing the least recently used.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from monitor.control import InboxChannel
from monitor.events import Event
from monitor.formats.base import Problem
from monitor.formats.compressed import Decompressed, codec_of
from monitor.formats.lines import LineDecoder
from monitor.formats.unsupported import PEEK_BYTES, is_binary, refusal
from monitor.framing import Line, LineSplitter
from monitor.safeopen import open_regular
from monitor.sources import Sink
from monitor.sources.fair import IngestMux, Lane
from monitor.sources.resume import position, resume
from monitor.sources.tailed import MARK_BYTES, TailedFile

#: Bytes per read syscall.
READ_CHUNK = 256 * 1024
#: Bytes read from one file before giving the others a turn.
ROUND_BYTES = 4 * 1024 * 1024
#: Events handed to the hub at once.
SUBMIT_BATCH = 512
#: Newlines before a late start position are counted (for ``file:line``) up to this size.
COUNT_LINES_LIMIT = 64 * 1024 * 1024
#: Problems reported per file: a file of garbage must not flood the operator.
PROBLEMS_PER_FILE = 100


def _line_start_before(fd: int, pos: int) -> int:
    """The offset of the line containing ``pos`` (just after the previous newline)."""
    end = pos
    while end > 0:
        start = max(0, end - 65536)
        block = os.pread(fd, end - start, start)
        nl = block.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0


def _line_start_after(fd: int, pos: int) -> int | None:
    """The first line start at or after ``pos``; None if that line has not ended yet."""
    if pos <= 0:
        return 0
    at = pos - 1
    while True:
        block = os.pread(fd, 65536, at)
        if not block:
            return None
        nl = block.find(b"\n")
        if nl >= 0:
            return at + nl + 1
        at += len(block)


def _count_newlines(fd: int, end: int) -> int:
    count = at = 0
    while at < end:
        block = os.pread(fd, min(1 << 20, end - at), at)
        if not block:
            break
        count += block.count(b"\n")
        at += len(block)
    return count


class Tailer:
    """Reads, decodes and submits what was appended to followed files.

    ``again(path, wake)`` asks for ``path`` to be checked on a later round
    (``wake``: soon); ``notice`` receives problems found where nothing can be
    awaited, to be reported on the next round."""

    def __init__(
        self,
        sink: Sink,
        *,
        fmt: str | None,
        max_line_bytes: int,
        clock: Callable[[], float],
        again: Callable[[str, bool], None],
        notice: Callable[[Problem], None],
        ingest: IngestMux | None = None,
    ):
        self.sink = sink
        #: The fair pump shared with the other sources (socket connections, OTLP):
        #: each file a lane; without it, batches go to the sink directly.
        self.ingest = ingest
        self.fmt = fmt
        self.max_line_bytes = max_line_bytes
        self.clock = clock
        self.again = again
        self.notice = notice
        #: The sink records read positions (the hub, when it has a store).
        self.keeps_positions = bool(getattr(sink, "keeps_positions", False))
        #: Awaited before each batch: returns once the sink has room for what can wait (files).
        self.room: Callable[[], Any] | None = getattr(sink, "room_for_files", None)
        self.open: OrderedDict[TailedFile, None] = OrderedDict()  # LRU of open descriptors
        self.max_open = 1024
        self.bytes_read = 0

    # -- descriptors -----------------------------------------------------------------

    def ensure_open(self, tf: TailedFile) -> int | None:
        if tf.fd is not None:
            self.open.move_to_end(tf)
            return tf.fd
        try:
            # Never blocks (a FIFO swapped in under the name), never follows a
            # link planted in a watched directory: monitor/safeopen.py.
            fd = open_regular(tf.path, follow=tf.follow)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not tf.open_error:
                tf.open_error = f"cannot read: {exc.strerror or exc}"
                self.notice(Problem(tf.path, None, tf.open_error))
            return None
        tf.open_error = ""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != tf.ident:
            os.close(fd)  # the name now belongs to another file; the next check sorts it out
            self.again(tf.path, False)
            return None
        tf.fd = fd
        self.open[tf] = None
        while len(self.open) > self.max_open:
            oldest = next(iter(self.open))
            if oldest is tf:
                break
            self.close(oldest)
        return fd

    def close(self, tf: TailedFile) -> None:
        self.open.pop(tf, None)
        if tf.fd is not None:
            try:
                os.close(tf.fd)
            except OSError:
                pass
            tf.fd = None

    # -- reading ---------------------------------------------------------------------

    async def _prepare(self, tf: TailedFile, fd: int) -> None:
        """Before the first read: line boundary, line numbering, decoder."""
        first_line = resume(tf, fd) if tf.resume is not None else None
        if first_line is None:
            if tf.align == "back":
                tf.offset = _line_start_before(fd, tf.offset)
            elif tf.align == "forward":
                start = _line_start_after(fd, tf.offset)
                tf.offset = start if start is not None else _line_start_before(fd, tf.offset)
            tf.align = ""
            first_line = 1
            if tf.offset > 0:
                if tf.offset <= COUNT_LINES_LIMIT:
                    first_line = 1 + await asyncio.to_thread(_count_newlines, fd, tf.offset)
                else:
                    tf.numbered = False
                tf.mark = os.pread(fd, min(MARK_BYTES, tf.offset), tf.offset - min(MARK_BYTES, tf.offset))
        tf.splitter = LineSplitter(self.max_line_bytes, first_line=first_line)
        if tf.decoder is None:
            tf.decoder = LineDecoder(tf.path, fmt=self.fmt, max_line_bytes=self.max_line_bytes)

    def _restart(self, tf: TailedFile, reason: str) -> Problem:
        tf.offset = 0
        tf.mark = b""
        tf.head_len, tf.head = 0, ""
        tf.numbered = True
        tf.binary = False
        tf.splitter = LineSplitter(self.max_line_bytes)
        return Problem(tf.path, None, reason)

    async def _check_truncated(self, tf: TailedFile, size: int) -> None:
        if size < tf.offset:
            reason = f"truncated from {tf.offset:,} to {size:,} bytes (copytruncate?); reading it again from the start"
            await self.report([self._restart(tf, reason)])

    async def _skip_binary(self, tf: TailedFile, fd: int, size: int, chunk: bytes) -> bool:
        """A file whose start is binary data is one problem, as ``scan`` says it, not one per
        "line": skip to its end, and keep skipping what is appended until it is rewritten."""
        if not tf.binary:
            if tf.offset != 0 or not is_binary(chunk[:PEEK_BYTES]):
                return False
            tf.binary = True
            await self.report([refusal(tf.path, f"binary data ({size:,} bytes), not a text log")])
        self.bytes_read += max(size - tf.offset, 0)
        tf.offset = size
        tf.mark = os.pread(fd, min(MARK_BYTES, size), size - min(MARK_BYTES, size))
        return True

    async def read(self, tf: TailedFile, st: os.stat_result | None = None, *, final: bool = False) -> None:
        """Read what was appended since the offset (at most ROUND_BYTES per
        call); a compressed file, whole (:meth:`_read_compressed`)."""
        if codec_of(tf.path) is None:
            await self._read_appended(tf, st, final)
            return
        fd = self.ensure_open(tf)
        if fd is not None:
            await self._read_compressed(tf, fd, st or os.fstat(fd), final)

    async def _read_appended(self, tf: TailedFile, st: os.stat_result | None, final: bool) -> None:
        fd = self.ensure_open(tf)
        if fd is None:
            return
        if st is None:
            st = os.fstat(fd)
        if tf.splitter is None:
            await self._prepare(tf, fd)
        assert tf.splitter is not None
        await self._check_truncated(tf, st.st_size)
        tf.mtime_ns = st.st_mtime_ns
        budget = ROUND_BYTES
        verify = bool(tf.mark)
        while budget > 0:
            want = min(READ_CHUNK, budget)
            if verify:
                # One read covers both the bytes before the offset (were they
                # rewritten?) and the new ones.
                verify = False
                mark = tf.mark
                data = os.pread(fd, want + len(mark), tf.offset - len(mark))
                if data[: len(mark)] != mark:
                    await self.report(
                        [
                            self._restart(
                                tf,
                                "rewritten in place (truncated and written "
                                "again); reading it again from the start",
                            )
                        ]
                    )
                    continue
                chunk = data[len(mark) :]
            else:
                chunk = os.pread(fd, want, tf.offset)
            if not chunk:
                break
            if await self._skip_binary(tf, fd, st.st_size, chunk):
                break
            tf.offset += len(chunk)
            budget -= len(chunk)
            self.bytes_read += len(chunk)
            tf.mark = chunk[-MARK_BYTES:] if len(chunk) >= MARK_BYTES else (tf.mark + chunk)[-MARK_BYTES:]
            tf.last_data = time.monotonic()
            await self.decode(tf, tf.splitter.feed(chunk))
            if len(chunk) < want:
                break  # at the end for now; the next change notification brings us back
        else:
            if tf.retired_at is None:
                self.again(tf.path, True)  # more to read: come back after the others
        if final:
            await self.decode(tf, tf.splitter.flush())

    async def _read_compressed(self, tf: TailedFile, fd: int, st: os.stat_result, final: bool) -> None:
        """A compressed file (``.gz``, ``.zst``) is not tailed: it is read
        whole, from its start, when it is found or changes, the lines read
        before (in this run or, by its stored position, an earlier one)
        skipped.  ``tf.offset`` is then its compressed size, stored with the
        next line: a restart does not read it again.  A stream cut short
        keeps its unfinished last line back until it grows or is finished."""
        if tf.splitter is None:
            first = resume(tf, fd) if tf.resume is not None else None
            if first is None and tf.align == "forward":
                tf.offset = 0  # the tail of a compressed file: all of it
            tf.align = ""
            tf.splitter = LineSplitter(self.max_line_bytes, first_line=first or 1)
            tf.decoder = tf.decoder or LineDecoder(tf.path, fmt=self.fmt, max_line_bytes=self.max_line_bytes)
        tf.mtime_ns = st.st_mtime_ns
        if st.st_size == tf.offset and (not final or not tf.splitter.pending_bytes):
            return  # read already (to its end, or up to the damage already reported)
        done = tf.splitter.lineno if st.st_size >= tf.offset else 0  # smaller: replaced, all of it new
        tf.splitter, tf.offset = LineSplitter(self.max_line_bytes), 0  # no position stored meanwhile
        with Decompressed(tf.path, fileobj=os.fdopen(os.dup(fd), "rb")) as stream:
            while chunk := stream.read(READ_CHUNK):
                tf.last_data = time.monotonic()
                self.bytes_read += len(chunk)
                await self.decode(tf, [line for line in tf.splitter.feed(chunk) if line[0] > done])
        problems = [Problem(tf.path, None, stream.error)] if stream.error else []
        if stream.error is None or final:  # (a truncated one may still be being written)
            await self.decode(tf, [line for line in tf.splitter.flush() if line[0] > done])
        tf.offset = st.st_size
        where = position(tf, packed=True) if self.keeps_positions else None
        if where is not None:
            await self._hand(tf, [], problems, where)
        elif problems:
            await self.report(problems)

    async def drain(self, tf: TailedFile) -> None:
        """Read ``tf`` to its current end, round after round."""
        if tf.fd is None:
            return
        size = os.fstat(tf.fd).st_size
        while tf.offset < size:
            before = tf.offset
            await self.read(tf)
            if tf.offset == before:
                break

    # -- handing on ------------------------------------------------------------------

    async def decode(self, tf: TailedFile, lines: list[Line]) -> None:
        if not lines:
            return
        decoder = tf.decoder
        assert decoder is not None
        now = self.clock()
        events: list[Event] = []
        problems: list[Problem] = []
        for lineno, raw, size in lines:
            where = lineno if tf.numbered else None
            tf.lines += 1
            if raw is None:
                problem: Problem | None = decoder.oversized(where or 0, size)
                new: list[Event] = []
            else:
                new, problem = decoder.feed(raw, where, now)
            if problem is not None:
                tf.problems += 1
                if tf.problems <= PROBLEMS_PER_FILE:
                    problems.append(problem)
                elif tf.problems == PROBLEMS_PER_FILE + 1:
                    problems.append(
                        Problem(
                            tf.path,
                            where,
                            f"more than {PROBLEMS_PER_FILE} bad lines; no longer reporting each one",
                        )
                    )
            if new:
                events.extend(new)
                if len(events) >= SUBMIT_BATCH:
                    await self._submit(tf, events, problems)
                    events, problems = [], []
        where_read = position(tf) if self.keeps_positions else None
        if events or problems or where_read is not None:
            await self._submit(tf, events, problems, where_read)

    async def _submit(
        self,
        tf: TailedFile,
        events: list[Event],
        problems: list[Problem],
        where_read: dict[str, Any] | None = None,
    ) -> None:
        tf.events += len(events)
        if events and tf.decoder is not None and tf.decoder.format == "native":
            # A native-format file session can be reached through ``<log>.inbox.jsonl``.
            for event in events:
                if event.session not in tf.sessions and len(tf.sessions) < 1024:
                    tf.sessions.add(event.session)
                    self.sink.register_channel(event.session, InboxChannel(tf.decoder.source))
        if events and self.room is not None:
            # A file can be read later: while the store is behind, reading
            # pauses here instead of filling the store's queue (what sockets
            # send cannot wait, and would be dropped behind a flood).
            await self.room()
        await self._hand(tf, events, problems, where_read)

    async def _hand(
        self, tf: TailedFile, events: list[Event], problems: list[Problem], where: dict[str, Any] | None
    ) -> None:
        """To the file's lane of the shared pump (waiting while the lane is full:
        the file is paused, never dropped), else straight to the sink."""
        ingest = self.ingest
        if ingest is None:
            if where is not None:
                await self.sink.submit(events, problems, position=where)  # type: ignore[call-arg]
            else:
                await self.sink.submit(events, problems)
            return
        lane = self._lane(tf, ingest)
        await ingest.room(lane)
        ingest.put(lane, events, problems, where)

    def _lane(self, tf: TailedFile, ingest: IngestMux) -> Lane:
        if tf.lane is None:
            tf.lane = ingest.lane(tf.path, rereadable=True)
        return tf.lane

    async def report(self, problems: list[Problem]) -> None:
        await self.sink.submit([], problems)
