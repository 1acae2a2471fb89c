"""Following agent log files live: files, directories and globs.

``loopwatch watch PATH...`` accepts

* a **file** (it may not exist yet: it is picked up when it appears);
* a **directory**, watched recursively for ``*.jsonl`` / ``*.ndjson`` files
  and the documents agents rewrite (``*.traj``, ``*.traj.json``,
  ``api_conversation_history.json`` and its ``ui_messages.json``,
  ``.aider.chat.history.md``, an
  OpenHands conversation's ``events/event-*.json``: read by
  :mod:`monitor.sources.documents`), new ones included
  (``*.inbox.jsonl``, loopwatch's own control inboxes, are never read);
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

Where the parts live: :mod:`monitor.sources.watching` (change notifications),
:mod:`monitor.sources.resume` (identity, stored positions, the start policy),
:mod:`monitor.sources.tail` (reading and decoding one file); this module keeps
track of which file is where and runs the rounds.

.. _watchfiles: https://watchfiles.helpmanual.io/
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat as statmod
import time
from collections.abc import Callable, Iterable, Sequence

from monitor.formats.base import Problem
from monitor.formats.documents import DATABASE_FORMATS
from monitor.formats.lines import DEFAULT_MAX_LINE_BYTES
from monitor.safeopen import kind_of
from monitor.sources import Sink
from monitor.sources.databases import DatabaseFollower, is_database_name
from monitor.sources.documents import DocumentFollower
from monitor.sources.fair import IngestMux
from monitor.sources.paths import StartPolicy, WatchSpec
from monitor.sources.resume import KnownPositions, StartPoints
from monitor.sources.storage import StorageFollower
from monitor.sources.tail import Tailer
from monitor.sources.tailed import TailedFile
from monitor.sources.watching import ChangeWatcher

log = logging.getLogger("loopwatch.files")

#: A rotated or deleted file is still read for this long (its writer may hold it open).
ROTATE_GRACE_SECONDS = 5.0
#: ...and past that for as long as another process holds it open (checked in
#: ``/proc``; elsewhere: while data keeps coming), up to this long.
DELETED_FOLLOW_SECONDS = 3600.0
#: How often the holders of retired files are looked up in ``/proc``.
HOLDERS_CHECK_SECONDS = 2.0
#: Paths reported as not regular files (FIFOs, devices) that are remembered, so each is said once.
ODD_REPORTED = 1024
#: Descriptors of files quiet for this long are closed (they stay tracked).
IDLE_CLOSE_SECONDS = 120.0


class FileSource:
    """Follows the files named by ``paths`` and submits their events to ``sink``.

    This class keeps track of which file is where (names, identities, files
    going away) and runs the rounds; :class:`~monitor.sources.watching.ChangeWatcher`
    says what changed, :class:`~monitor.sources.resume.StartPoints` where a new
    file starts and :class:`~monitor.sources.tail.Tailer` reads it."""

    def __init__(
        self,
        paths: Sequence[str],
        sink: Sink,
        *,
        fmt: str | None = None,
        start: StartPolicy | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        debounce_ms: int = 30,
        step_ms: int = 5,
        poll_seconds: float = 1.0,
        full_scan_seconds: float = 15.0,
        directories: Sequence[str] = (),
        rotate_grace_seconds: float = ROTATE_GRACE_SECONDS,
        clock: Callable[[], float] = time.time,
        known: KnownPositions | None = None,
        ingest: IngestMux | None = None,
    ):
        self.specs = [WatchSpec.parse(p) for p in paths]
        self.specs += [WatchSpec.parse(p, directory=True) for p in directories]
        self.sink = sink
        self.start_policy = start or StartPolicy()
        self.poll_seconds = poll_seconds
        self.full_scan_seconds = full_scan_seconds
        self.rotate_grace_seconds = rotate_grace_seconds
        self._holders_at = -HOLDERS_CHECK_SECONDS  # when retired files' holders were looked up
        self._holders: set[tuple[int, int]] | None = None
        self.by_path: dict[str, TailedFile] = {}
        self.by_ident: dict[tuple[int, int], TailedFile] = {}
        self.retiring: dict[tuple[int, int], TailedFile] = {}
        self._pending: set[str] = set()
        self._notices: list[Problem] = []  # found where no await is possible; reported next round
        self._wake = asyncio.Event()
        self.starts = StartPoints(self.start_policy, known or KnownPositions(), clock, self._notice)
        self.tailer = Tailer(
            sink, fmt=fmt, max_line_bytes=max_line_bytes, clock=clock, again=self._again, notice=self._notice
        )
        self.tailer.ingest = ingest  # a live monitor's pump shared by every source (sources/fair.py)
        # Not tailed: documents (trajectories, Aider histories) are read whole on change, agents'
        # SQLite databases (OpenCode, Goose) polled for new rows, OpenCode's storage/ files one by one.
        self.documents = DocumentFollower(sink, self._again, fmt)
        self.databases = DatabaseFollower(sink, self.start_policy, clock)
        self.storage = StorageFollower(sink, self.starts.known, self._again)
        self.watcher = ChangeWatcher(
            self.specs,
            self._wanted,
            self._changed,
            self.tailer.report,
            debounce_ms=debounce_ms,
            step_ms=step_ms,
        )
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._scan_cost = 0.0
        self._missing_reported: set[str] = set()
        self._odd_reported: set[str] = set()

    @property
    def bytes_read(self) -> int:
        return sum(part.bytes_read for part in (self.tailer, self.documents, self.databases, self.storage))

    async def _read(self, tf: TailedFile, st: os.stat_result) -> None:
        kind = self.documents.kind(tf)
        if kind == "opencode-storage":
            await self.storage.read(tf, st)
        elif kind in DATABASE_FORMATS or is_database_name(tf.path):
            await self.databases.read(tf, kind if kind in DATABASE_FORMATS else None)
        elif kind is not None:
            await self.documents.read(tf, st)
        else:
            await self.tailer.read(tf, st)

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Start watching; returns once existing files have been read per the start policy."""
        self.tailer.max_open = _raise_fd_limit()
        self.watcher.ensure()
        # Let the watcher tasks set up their inotify watches before the first
        # scan, so nothing written in between goes unnoticed.
        await asyncio.sleep(0)
        for spec in self.specs:
            if not os.path.exists(spec.root if spec.kind != "file" else spec.path):
                self._missing_reported.add(spec.raw)
                await self.tailer.report(
                    [Problem(spec.raw, None, "does not exist yet; it will be read when it appears")]
                )
        await self._full_scan(initial=True)
        self._task = asyncio.create_task(self._run(), name="loopwatch-files")

    async def stop(self) -> None:
        """Stop watching and close every file (pending half lines are not flushed)."""
        self.watcher.signal_stop()
        # Also a flag: Python 3.11's wait_for can swallow a cancellation that
        # arrives as the wake-up event is set; the loop then sees the flag.
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.watcher.stop()
        for tf in list(self.tailer.open):
            self.tailer.close(tf)

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

    # -- what to look at next ----------------------------------------------------------

    def _wanted(self, path: str) -> bool:
        return path in self.by_path or any(spec.matches(path) for spec in self.specs)

    def _changed(self, paths: Iterable[str]) -> None:
        self._pending.update(paths)
        self._wake.set()

    def _again(self, path: str, wake: bool) -> None:
        self._pending.add(path)
        if wake:
            self._wake.set()

    def _notice(self, problem: Problem) -> None:
        self._notices.append(problem)
        self._wake.set()

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
                    await self.tailer.report(notices)
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
        self.watcher.ensure_if_due()
        for spec in self.specs:
            if spec.raw in self._missing_reported and os.path.exists(
                spec.path if spec.kind == "file" else spec.root
            ):
                self._missing_reported.discard(spec.raw)
                for path in spec.existing():
                    await self._check_path(path)
        for tf in [tf for tf in self.tailer.open if tf.retired_at is None]:
            await self._check_path(tf.path)
        for tf in self.databases.followed():
            if self.by_path.get(tf.path) is tf:  # (a WAL database's writes change its -wal, not it)
                await self.databases.read(tf, None)
        now = time.monotonic()
        for tf in list(self.retiring.values()):
            await self.tailer.drain(tf)
            if tf.retired_at is not None and now - tf.retired_at >= self.rotate_grace_seconds:
                verdict = await self._still_written(tf, now)
                if verdict != "open":
                    await self._finish(tf, cut=verdict == "limit")
        for tf in list(self.tailer.open):
            if tf.retired_at is None and now - tf.last_data > IDLE_CLOSE_SECONDS:
                self.tailer.close(tf)

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
            self._not_regular(path, st.st_mode)
            return
        ident = (st.st_dev, st.st_ino)
        if tf is not None:
            if tf.ident == ident:
                if st.st_size != tf.offset or st.st_mtime_ns != tf.mtime_ns:
                    await self._read(tf, st)
                return
            await self._retire(
                tf,
                "replaced by a new file (rotated): finishing the old one, "
                "following the new one from its start",
            )
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
            known.follow = self._named(path)
            self.by_path[path] = known
            await self._read(known, st)
            return
        if not any(spec.matches(path) for spec in self.specs):
            return
        tf = self.starts.new_file(path, st, initial)
        tf.follow = self._named(path)
        self.by_path[path] = tf
        self.by_ident[ident] = tf
        if not initial or tf.offset < st.st_size or self.documents.kind(tf) is not None:
            await self._read(tf, st)  # also opens it, so the fast re-check covers it
        else:
            tf.mtime_ns = st.st_mtime_ns

    def _named(self, path: str) -> bool:
        """The operator named ``path`` itself: a symbolic link there is followed."""
        return any(spec.kind == "file" and spec.path == path for spec in self.specs)

    def _not_regular(self, path: str, mode: int) -> None:
        """A FIFO, device or socket under a log's name is never opened: said once."""
        if path in self._odd_reported or not any(spec.matches(path) for spec in self.specs):
            return
        if len(self._odd_reported) < ODD_REPORTED:
            self._odd_reported.add(path)
            self._notice(Problem(path, None, f"{kind_of(mode)}, not a regular file: not read"))

    # -- files that go away ------------------------------------------------------------

    async def _retire(self, tf: TailedFile, reason: str) -> None:
        """The name no longer leads to this file: finish it, keep it briefly in case it was renamed."""
        if self.by_path.get(tf.path) is tf:
            del self.by_path[tf.path]
        self.documents.forget(tf)
        self.databases.forget(tf)
        if tf.fd is None and tf.decoder is None:
            self.by_ident.pop(tf.ident, None)  # never read: nothing to finish
            return
        if tf.fd is None:
            self.by_ident.pop(tf.ident, None)
            if tf.splitter is not None:
                await self.tailer.decode(tf, tf.splitter.flush())
            return
        tf.retired_at = time.monotonic()
        self.retiring[tf.ident] = tf
        await self.tailer.report([Problem(tf.path, None, reason)])
        await self.tailer.drain(tf)

    async def _still_written(self, tf: TailedFile, now: float) -> str:
        """ "open" while a retired file may still be written, "limit" when
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
            await self.tailer.drain(tf)
            pending = tf.splitter.pending_bytes if tf.splitter is not None else 0
            if cut and pending and tf.splitter is not None:
                await self.tailer.report(
                    [
                        Problem(
                            tf.path,
                            tf.splitter.lineno + 1,
                            (
                                f"still being written {DELETED_FOLLOW_SECONDS:g}s after it was deleted or "
                                f"rotated; no longer followed: its unfinished last line ({pending:,} bytes) "
                                "was not read"
                            ),
                        )
                    ]
                )
            else:
                await self.tailer.read(tf, final=True)
        self.retiring.pop(tf.ident, None)
        if self.by_ident.get(tf.ident) is tf:
            del self.by_ident[tf.ident]
        self.tailer.close(tf)


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
