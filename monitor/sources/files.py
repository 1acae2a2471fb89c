"""Following agent log files live: files, directories and globs.

``loopwatch watch PATH...`` accepts

* a **file** (it may not exist yet: it is picked up when it appears);
* a **directory**, watched recursively for ``*.jsonl`` / ``*.ndjson`` files,
  new ones included (``*.inbox.jsonl``, loopwatch's own control inboxes, are
  never read);
* a **glob** such as ``'logs/*/run-*.jsonl'`` or ``'runs/**/*.jsonl'``.

Each file is tracked by device, inode and byte offset.  `watchfiles`_ only says
*that* something changed, so on every change the file is stat'ed and the bytes
after the offset are read; a :class:`~monitor.framing.LineSplitter` holds a
half-written last line until its newline arrives, and lines longer than
``max_line_bytes`` are dropped as they stream past (reported, bounded memory).
Each file has its own :class:`~monitor.formats.lines.LineDecoder` (format
sniffed from its first record unless forced), so bad lines become problems
with ``file:line`` and never stop the tail.

What happens to a file over time:

* **truncated** (``copytruncate``): shorter than the offset, or the bytes just
  before the offset changed → reported, read again from the start;
* **rotated** (renamed, a new file created under the name): the old file is
  read to its end (and for a grace period after, since its writer may still
  hold it open), the new one is followed from its start;
* **renamed** to another name that is watched: followed under the new name
  without re-reading;
* **deleted**: read to its end, and followed while a process still has it
  open (an agent writing to a log that was deleted under it), up to
  ``DELETED_FOLLOW_SECONDS`` after the deletion; then forgotten;
* **appears later**: read from its start.

Where a previous watcher stopped (:class:`KnownPositions`, kept in the
store's ``file_positions`` table): a file whose identity -- device, inode and
a hash of its first bytes -- matches a stored position is resumed from it,
whatever the start policy, so restarting ``watch`` on the same database never
stores an event twice; a file that now has another identity under a name that
was read before (rotated or recreated while nobody watched) is read from its
start.  Each position is handed to the hub with the events read before it and
reaches the database after them.

Where reading starts for files that already exist (:class:`StartPolicy`):
by default files modified in the last 15 minutes are replayed (at most their
last 8 MiB, from a line boundary) so that an agent already looping shows up at
once in a fresh terminal, while older files start at their end so a directory
with months of logs neither floods the screen with stale detections nor takes
minutes to start.  ``--from-start`` replays everything, ``--from-end`` nothing.

Change notifications come from ``watchfiles.awatch`` with a short debounce
(its 1.6 s default is far too slow for live detection); because notifications
can be missed (overflowing queues, network file systems, renamed directories),
recently active files are re-checked every second and the whole tree is
rescanned periodically.

.. _watchfiles: https://watchfiles.helpmanual.io/
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat as statmod
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from monitor.events import Event
from monitor.formats.base import Problem
from monitor.formats.lines import DEFAULT_MAX_LINE_BYTES, LineDecoder
from monitor.framing import Line, LineSplitter
from monitor.sources import Sink
from monitor.sources.paths import StartPolicy, WatchSpec, is_under

log = logging.getLogger("loopwatch.files")

#: Bytes per read syscall.
READ_CHUNK = 256 * 1024
#: Bytes read from one file before giving the others a turn.
ROUND_BYTES = 4 * 1024 * 1024
#: Events handed to the hub at once.
SUBMIT_BATCH = 512
#: Bytes remembered just before the offset: if they change, the file was rewritten.
MARK_BYTES = 32
#: A rotated or deleted file is still read for this long (its writer may hold it open).
ROTATE_GRACE_SECONDS = 5.0
#: ...and past that for as long as another process holds it open (checked in
#: ``/proc``; elsewhere: while data keeps coming), up to this long.
DELETED_FOLLOW_SECONDS = 3600.0
#: How often the holders of retired files are looked up in ``/proc``.
HOLDERS_CHECK_SECONDS = 2.0
#: Descriptors of files quiet for this long are closed (they stay tracked).
IDLE_CLOSE_SECONDS = 120.0
#: Newlines before a late start position are counted (for ``file:line``) up to this size.
COUNT_LINES_LIMIT = 64 * 1024 * 1024
#: Problems reported per file: a file of garbage must not flood the operator.
PROBLEMS_PER_FILE = 100
#: Bytes at the start of a file hashed into its identity (with device and inode):
#: an inode reused by another file is not taken for the one read before.
HEAD_BYTES = 1024


def path_key(path: str) -> str:
    """``path`` as stored (any bytes a file name may hold, as valid text)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _head_hash(fd: int, length: int) -> str | None:
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


# -- one file --------------------------------------------------------------------------


@dataclass(eq=False)
class TailedFile:
    """The state kept for one followed file (by identity, not by name)."""

    path: str
    ident: tuple[int, int]  # (st_dev, st_ino)
    offset: int
    #: Before the first read: move ``offset`` back ("back") or forward
    #: ("forward") to a line boundary; "" when it is one already.
    align: str = ""
    fd: int | None = None
    splitter: LineSplitter | None = None
    decoder: LineDecoder | None = None
    numbered: bool = True  # False: started too deep into a huge file to count lines
    mtime_ns: int = -1
    mark: bytes = b""
    last_data: float = 0.0  # monotonic time data was last read
    retired_at: float | None = None
    open_error: str = ""  # why it cannot be opened, once reported
    sessions: set[str] = field(default_factory=set)
    #: A stored position to resume from, checked against the file's head first.
    resume: dict[str, Any] | None = None
    head_len: int = 0  # bytes hashed into ``head`` so far (up to HEAD_BYTES)
    head: str = ""
    lines: int = 0
    events: int = 0
    problems: int = 0


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


# -- the source --------------------------------------------------------------------------


class FileSource:
    """Follows the files named by ``paths`` and submits their events to ``sink``."""

    def __init__(self, paths: Sequence[str], sink: Sink, *, fmt: str | None = None,
                 start: StartPolicy | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 debounce_ms: int = 30, step_ms: int = 5, poll_seconds: float = 1.0,
                 full_scan_seconds: float = 15.0, directories: Sequence[str] = (),
                 rotate_grace_seconds: float = ROTATE_GRACE_SECONDS,
                 clock: Callable[[], float] = time.time, known: KnownPositions | None = None):
        self.specs = [WatchSpec.parse(p) for p in paths]
        self.specs += [WatchSpec.parse(p, directory=True) for p in directories]
        self.sink = sink
        self.fmt = fmt
        self.start_policy = start or StartPolicy()
        self.max_line_bytes = max_line_bytes
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.poll_seconds = poll_seconds
        self.full_scan_seconds = full_scan_seconds
        self.rotate_grace_seconds = rotate_grace_seconds
        self._holders_at = -HOLDERS_CHECK_SECONDS  # when retired files' holders were looked up
        self._holders: set[tuple[int, int]] | None = None
        self.clock = clock
        self.known = known or KnownPositions()
        #: The sink records read positions (the hub, when it has a store).
        self.keeps_positions = bool(getattr(sink, "keeps_positions", False))
        self.by_path: dict[str, TailedFile] = {}
        self.by_ident: dict[tuple[int, int], TailedFile] = {}
        self.retiring: dict[tuple[int, int], TailedFile] = {}
        self._open: OrderedDict[TailedFile, None] = OrderedDict()  # LRU of open descriptors
        self.max_open = 1024
        self._pending: set[str] = set()
        self._notices: list[Problem] = []  # found where no await is possible; reported next round
        self._wake = asyncio.Event()
        self._watchers: dict[bool, tuple[frozenset[str], asyncio.Task, asyncio.Event]] = {}
        self._watch_retry_at = 0.0
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._scan_cost = 0.0
        self._missing_reported: set[str] = set()
        self.bytes_read = 0
        self.scans = 0

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Start watching; returns once existing files have been read per the start policy."""
        self.max_open = _raise_fd_limit()
        self._ensure_watchers()
        # Let the watcher tasks set up their inotify watches before the first
        # scan, so nothing written in between goes unnoticed.
        await asyncio.sleep(0)
        for spec in self.specs:
            if not os.path.exists(spec.root if spec.kind != "file" else spec.path):
                self._missing_reported.add(spec.raw)
                await self._report([Problem(spec.raw, None, "does not exist yet; it will be read when it appears")])
        await self._full_scan(initial=True)
        self._task = asyncio.create_task(self._run(), name="loopwatch-files")

    async def stop(self) -> None:
        """Stop watching and close every file (pending half lines are not flushed)."""
        for _roots, task, stop in self._watchers.values():
            stop.set()
        # Also a flag: Python 3.11's wait_for can swallow a cancellation that
        # arrives as the wake-up event is set; the loop then sees the flag.
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        watchers = [task for _roots, task, _stop in self._watchers.values()]
        self._watchers.clear()
        for task in watchers:
            task.cancel()
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)
        for tf in list(self._open):
            self._close(tf)

    async def __aenter__(self) -> FileSource:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def files(self) -> list[TailedFile]:
        return list(self.by_path.values())

    def describe(self) -> str:
        parts = [spec.raw for spec in self.specs]
        return f"{len(self.by_path)} file(s) under {', '.join(parts) or 'nothing'}"

    # -- change notifications --------------------------------------------------------

    def _wanted(self, path: str) -> bool:
        return path in self.by_path or any(spec.matches(path) for spec in self.specs)

    def _desired_roots(self) -> dict[bool, frozenset[str]]:
        recursive = {s.root for s in self.specs if s.recursive and os.path.isdir(s.root)}
        flat = {s.root for s in self.specs if not s.recursive and os.path.isdir(s.root)}
        recursive = {r for r in recursive if not any(o != r and is_under(r, o) for o in recursive)}
        flat = {r for r in flat if not any(is_under(r, o) for o in recursive)}
        return {True: frozenset(recursive), False: frozenset(flat)}

    def _ensure_watchers(self) -> None:
        """(Re)start the change watchers when the set of existing roots changed."""
        from watchfiles import awatch  # imported here: cheap import of this module

        for recursive, roots in self._desired_roots().items():
            current = self._watchers.get(recursive)
            if current is not None and current[0] == roots and not current[1].done():
                continue
            if current is not None:
                current[2].set()
                current[1].cancel()
                del self._watchers[recursive]
            if not roots:
                continue
            stop = asyncio.Event()
            changes = awatch(*sorted(roots), watch_filter=lambda _c, p: self._wanted(p),
                             debounce=self.debounce_ms, step=self.step_ms, stop_event=stop,
                             recursive=recursive, ignore_permission_denied=True)
            task = asyncio.create_task(self._watch(changes, roots), name="loopwatch-watchfiles")
            self._watchers[recursive] = (roots, task, stop)

    async def _watch(self, changes, roots: frozenset[str]) -> None:
        try:
            async for batch in changes:
                for _change, path in batch:
                    self._pending.add(path)
                self._wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a watcher failure degrades to periodic rescans
            self._watch_retry_at = time.monotonic() + 5.0
            await self._report([Problem(", ".join(sorted(roots)), None,
                                        f"file change watcher failed ({exc}); relying on rescans")])

    # -- the main loop ---------------------------------------------------------------

    async def _run(self) -> None:
        now = time.monotonic()
        next_poll = now + self.poll_seconds
        next_full = now + max(self.full_scan_seconds, 20 * self._scan_cost)
        while not self._stopping:
            timeout = max(0.0, min(next_poll, next_full) - time.monotonic())
            if not self._pending:
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
            self._wake.clear()
            if self._stopping:
                break
            try:
                if self._notices:
                    notices, self._notices = self._notices, []
                    await self._report(notices)
                if self._pending:
                    paths, self._pending = self._pending, set()
                    for path in sorted(paths):
                        await self._check_path(path)
                now = time.monotonic()
                if now >= next_poll:
                    await self._poll()
                    next_poll = time.monotonic() + self.poll_seconds
                if now >= next_full:
                    await self._full_scan()
                    # Huge trees are walked less often: at most ~5% of the time.
                    next_full = time.monotonic() + max(self.full_scan_seconds, 20 * self._scan_cost)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must cost one round, not the whole tail
                log.exception("file source round failed")

    async def sync(self) -> None:
        """Check every followed file and every spec now (what the periodic rescans do)."""
        await self._full_scan()
        await self._poll()

    async def _poll(self) -> None:
        """The fast safety net: re-check files that are open (recently active)."""
        if time.monotonic() >= self._watch_retry_at:
            self._ensure_watchers()
        for spec in self.specs:
            if spec.raw in self._missing_reported and os.path.exists(
                    spec.path if spec.kind == "file" else spec.root):
                self._missing_reported.discard(spec.raw)
                for path in spec.existing():
                    await self._check_path(path)
        for tf in [tf for tf in self._open if tf.retired_at is None]:
            await self._check_path(tf.path)
        now = time.monotonic()
        for tf in list(self.retiring.values()):
            await self._drain(tf)
            if tf.retired_at is not None and now - tf.retired_at >= self.rotate_grace_seconds:
                verdict = await self._still_written(tf, now)
                if verdict != "open":
                    await self._finish(tf, cut=verdict == "limit")
        for tf in list(self._open):
            if tf.retired_at is None and now - tf.last_data > IDLE_CLOSE_SECONDS:
                self._close(tf)

    async def _full_scan(self, initial: bool = False) -> None:
        started = time.monotonic()
        seen: set[str] = set()
        for spec in self.specs:
            for path in spec.existing():
                if path in seen:
                    continue
                seen.add(path)
                await self._check_path(path, initial=initial)
        for path in [p for p in self.by_path if p not in seen]:
            await self._check_path(path)
        self._scan_cost = time.monotonic() - started
        self.scans += 1

    # -- one path --------------------------------------------------------------------

    async def _check_path(self, path: str, *, initial: bool = False) -> None:
        """Bring what we know about ``path`` up to date and read anything new."""
        tf = self.by_path.get(path)
        try:
            st = os.stat(path)
        except OSError:
            if tf is not None:
                await self._retire(tf, "deleted; read to its end")
            return
        if not statmod.S_ISREG(st.st_mode):
            return
        ident = (st.st_dev, st.st_ino)
        if tf is not None:
            if tf.ident == ident:
                if st.st_size != tf.offset or st.st_mtime_ns != tf.mtime_ns:
                    await self._read(tf, st)
                return
            await self._retire(tf, "replaced by a new file (rotated): finishing the old one, "
                                   "following the new one from its start")
            initial = False
        known = self.by_ident.get(ident)
        if known is not None:
            if known.path != path and self.by_path.get(known.path) is known and _same_file(known.path, ident):
                return  # a second name (hard link, overlapping specs) for a file already followed
            # The file we follow was renamed to another watched name: keep going.
            if self.by_path.get(known.path) is known:
                del self.by_path[known.path]
            self.retiring.pop(ident, None)
            known.retired_at = None
            known.path = path
            self.by_path[path] = known
            await self._read(known, st)
            return
        if not any(spec.matches(path) for spec in self.specs):
            return
        tf = self._new_file(path, st, initial)
        self.by_path[path] = tf
        self.by_ident[ident] = tf
        if not initial or tf.offset < st.st_size:
            await self._read(tf, st)  # also opens it, so the fast re-check covers it
        else:
            tf.mtime_ns = st.st_mtime_ns

    def _new_file(self, path: str, st: os.stat_result, initial: bool) -> TailedFile:
        ident = (st.st_dev, st.st_ino)
        if self.known:
            known = self.known.by_ident.get(ident)
            if known is not None and known["offset"] <= st.st_size:  # (also under a new name: renamed)
                return TailedFile(path, ident, int(known["offset"]), resume=known)
            before = self.known.by_path.get(path_key(path))
            if known is not None or (before is not None and (before["dev"], before["ino"]) != ident):
                self._notices.append(Problem(path, None, "replaced or truncated since loopwatch last read it: "
                                                         "reading it from the start"))
                self._wake.set()
                return TailedFile(path, ident, 0)
        if not initial:
            return TailedFile(path, ident, 0)
        policy = self.start_policy
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

    # -- reading ---------------------------------------------------------------------

    def _ensure_open(self, tf: TailedFile) -> int | None:
        if tf.fd is not None:
            self._open.move_to_end(tf)
            return tf.fd
        try:
            fd = os.open(tf.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not tf.open_error:
                tf.open_error = f"cannot read: {exc.strerror or exc}"
                self._notices.append(Problem(tf.path, None, tf.open_error))
                self._wake.set()
            return None
        tf.open_error = ""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != tf.ident:
            os.close(fd)  # the name now belongs to another file; the next check sorts it out
            self._pending.add(tf.path)
            return None
        tf.fd = fd
        self._open[tf] = None
        while len(self._open) > self.max_open:
            oldest = next(iter(self._open))
            if oldest is tf:
                break
            self._close(oldest)
        return fd

    def _close(self, tf: TailedFile) -> None:
        self._open.pop(tf, None)
        if tf.fd is not None:
            try:
                os.close(tf.fd)
            except OSError:
                pass
            tf.fd = None

    async def _prepare(self, tf: TailedFile, fd: int) -> None:
        """Before the first read: line boundary, line numbering, decoder."""
        if tf.resume is not None:
            resume, tf.resume = tf.resume, None
            head_len = int(resume["head_len"])
            head = _head_hash(fd, head_len) if head_len else ""
            if head == resume["head"]:  # the file read before: go on where it stopped
                tf.head_len, tf.head = head_len, head
                tf.align = ""
                tf.numbered = resume.get("line") is not None
                tf.mark = bytes(resume.get("mark") or b"")
                tf.splitter = LineSplitter(self.max_line_bytes, first_line=int(resume.get("line") or 1))
                if tf.decoder is None:
                    tf.decoder = LineDecoder(tf.path, fmt=self.fmt, max_line_bytes=self.max_line_bytes)
                return
            tf.offset, tf.align = 0, ""  # another file under a reused inode: all of it is new
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
        tf.splitter = LineSplitter(self.max_line_bytes)
        return Problem(tf.path, None, reason)

    async def _read(self, tf: TailedFile, st: os.stat_result | None = None, *, final: bool = False) -> None:
        """Read what was appended since the offset (at most ROUND_BYTES per call)."""
        fd = self._ensure_open(tf)
        if fd is None:
            return
        if st is None:
            st = os.fstat(fd)
        if tf.splitter is None:
            await self._prepare(tf, fd)
        assert tf.splitter is not None
        if st.st_size < tf.offset:
            await self._report([self._restart(
                tf, f"truncated from {tf.offset:,} to {st.st_size:,} bytes (copytruncate?); "
                    "reading it again from the start")])
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
                if data[:len(mark)] != mark:
                    await self._report([self._restart(tf, "rewritten in place (truncated and written "
                                                          "again); reading it again from the start")])
                    continue
                chunk = data[len(mark):]
            else:
                chunk = os.pread(fd, want, tf.offset)
            if not chunk:
                break
            tf.offset += len(chunk)
            budget -= len(chunk)
            self.bytes_read += len(chunk)
            tf.mark = chunk[-MARK_BYTES:] if len(chunk) >= MARK_BYTES else (tf.mark + chunk)[-MARK_BYTES:]
            tf.last_data = time.monotonic()
            await self._decode(tf, tf.splitter.feed(chunk))
            if len(chunk) < want:
                break  # at the end for now; the next change notification brings us back
        else:
            if tf.retired_at is None:
                self._pending.add(tf.path)  # more to read: come back after the others
                self._wake.set()
        if final:
            await self._decode(tf, tf.splitter.flush())

    async def _decode(self, tf: TailedFile, lines: list[Line]) -> None:
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
                    problems.append(Problem(tf.path, where, f"more than {PROBLEMS_PER_FILE} bad lines; "
                                                            "no longer reporting each one"))
            if new:
                events.extend(new)
                if len(events) >= SUBMIT_BATCH:
                    await self._submit(tf, events, problems)
                    events, problems = [], []
        position = self._position(tf) if self.keeps_positions else None
        if events or problems or position is not None:
            await self._submit(tf, events, problems, position)

    def _position(self, tf: TailedFile) -> dict[str, Any] | None:
        """How far ``tf`` has been read in whole lines, with its identity, to be stored."""
        splitter = tf.splitter
        if tf.fd is None or splitter is None:
            return None
        pending = splitter.pending_bytes
        consumed = tf.offset - pending
        if consumed <= 0:
            return None
        want = min(HEAD_BYTES, consumed)
        if tf.head_len < want:
            head = _head_hash(tf.fd, want)
            if head is None:
                return None
            tf.head_len, tf.head = want, head
        if pending:
            size = min(MARK_BYTES, consumed)
            mark = os.pread(tf.fd, size, consumed - size)
        else:
            mark = tf.mark
        return {"dev": tf.ident[0], "ino": tf.ident[1], "head_len": tf.head_len, "head": tf.head,
                "path": path_key(tf.path), "offset": consumed,
                "line": splitter.lineno + 1 if tf.numbered else None, "mark": mark}

    async def _submit(self, tf: TailedFile, events: list[Event], problems: list[Problem],
                      position: dict[str, Any] | None = None) -> None:
        tf.events += len(events)
        if events and tf.decoder is not None and tf.decoder.format == "native":
            for event in events:
                if event.session not in tf.sessions and len(tf.sessions) < 1024:
                    tf.sessions.add(event.session)
                    _register_inbox(self.sink, event.session, tf.decoder.source)
        if position is not None:
            await self.sink.submit(events, problems, position=position)  # type: ignore[call-arg]
        else:
            await self.sink.submit(events, problems)

    async def _report(self, problems: list[Problem]) -> None:
        await self.sink.submit([], problems)

    # -- files that go away ------------------------------------------------------------

    async def _retire(self, tf: TailedFile, reason: str) -> None:
        """The name no longer leads to this file: finish it, keep it briefly in case it was renamed."""
        if self.by_path.get(tf.path) is tf:
            del self.by_path[tf.path]
        if tf.fd is None and tf.decoder is None:
            self.by_ident.pop(tf.ident, None)  # never read: nothing to finish
            return
        if tf.fd is None:
            self.by_ident.pop(tf.ident, None)
            if tf.splitter is not None:
                await self._decode(tf, tf.splitter.flush())
            return
        tf.retired_at = time.monotonic()
        self.retiring[tf.ident] = tf
        await self._report([Problem(tf.path, None, reason)])
        await self._drain(tf)

    async def _drain(self, tf: TailedFile) -> None:
        if tf.fd is None:
            return
        size = os.fstat(tf.fd).st_size
        while tf.offset < size:
            before = tf.offset
            await self._read(tf)
            if tf.offset == before:
                break

    async def _still_written(self, tf: TailedFile, now: float) -> str:
        """"open" while a retired file may still be written, "limit" when
        :data:`DELETED_FOLLOW_SECONDS` passed, "done" otherwise."""
        if tf.retired_at is not None and now - tf.retired_at >= DELETED_FOLLOW_SECONDS:
            return "limit"
        if now - tf.last_data < self.rotate_grace_seconds:
            return "open"  # data still coming
        if now - self._holders_at >= HOLDERS_CHECK_SECONDS:
            self._holders_at = now
            skip = {tf.fd for tf in self.retiring.values() if tf.fd is not None}
            self._holders = await asyncio.to_thread(open_idents, set(self.retiring), skip)
        return "open" if self._holders is not None and tf.ident in self._holders else "done"

    async def _finish(self, tf: TailedFile, *, cut: bool = False) -> None:
        """End of a retired file: read the rest, including an unterminated last line
        (unless ``cut``: its writer still has it open, so that line is unfinished)."""
        if tf.fd is not None:
            await self._drain(tf)
            pending = tf.splitter.pending_bytes if tf.splitter is not None else 0
            if cut and pending:
                await self._report([Problem(tf.path, tf.splitter.lineno + 1, (
                    f"still being written {DELETED_FOLLOW_SECONDS:g}s after it was deleted or "
                    f"rotated; no longer followed: its unfinished last line ({pending:,} bytes) "
                    "was not read"))])
            else:
                await self._read(tf, final=True)
        self.retiring.pop(tf.ident, None)
        if self.by_ident.get(tf.ident) is tf:
            del self.by_ident[tf.ident]
        self._close(tf)


def open_idents(wanted: set[tuple[int, int]], skip_fds: set[int]) -> set[tuple[int, int]] | None:
    """Which of the files ``wanted`` (dev, ino) some process has open (this one's
    descriptors in ``skip_fds`` aside); None where ``/proc`` cannot tell."""
    proc = "/proc"
    if not os.path.isdir(f"{proc}/self/fd"):
        return None
    me = str(os.getpid())
    found: set[tuple[int, int]] = set()
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"{proc}/{pid}/fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            if pid == me and int(fd) in skip_fds:
                continue
            try:
                st = os.stat(f"{proc}/{pid}/fd/{fd}")
            except OSError:
                continue
            ident = (st.st_dev, st.st_ino)
            if ident in wanted:
                found.add(ident)
                if found == wanted:
                    return found
    return found


def _same_file(path: str, ident: tuple[int, int]) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def _register_inbox(sink: Sink, session: str, log_path: str) -> None:
    """A native-format file session can be reached through ``<log>.inbox.jsonl``."""
    try:
        from monitor.control import InboxChannel
    except ImportError:  # control not available: the session simply has no channel
        return
    sink.register_channel(session, InboxChannel(log_path))


def _raise_fd_limit() -> int:
    """Allow many open log files: raise the soft descriptor limit; return how many files to keep open."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        want = min(want, 65536)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    except (ImportError, ValueError, OSError):
        return 512
    limit = 65536 if soft == resource.RLIM_INFINITY else soft
    # Leave room for sockets, the database and the terminal.
    return max(64, min(limit - 256, 16384))


__all__ = ["FileSource", "KnownPositions", "StartPolicy", "TailedFile", "WatchSpec"]
