"""Offline scanning: run the live engine over finished log files.

Files are read together through one :class:`~monitor.detect.engine.Engine`, so
a loop spread over several sessions (a swarm) is seen as it would be live.
With ``jobs`` > 1 (:func:`scan_sharded`, :func:`scan_store_sharded`) the scan
runs in that many processes with the detections of one; how they share it
(which sessions are whose, the global detectors' sightings, the merge) is
:mod:`monitor.scan_jobs`, which this module imports and never the reverse.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from monitor import collector
from monitor.config import Config
from monitor.cost import spend_text
from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.events import Event, Kind, Level
from monitor.formats import LINE_FORMATS, documents
from monitor.formats.base import Problem
from monitor.formats.compressed import Decompressed, is_damage, open_log, plain_path, read_all
from monitor.formats.lines import LineDecoder
from monitor.formats.unsupported import PEEK_BYTES, describe, is_binary, refusal
from monitor.framing import LineSplitter
from monitor.safeopen import open_input, open_regular

if TYPE_CHECKING:
    from monitor.scan_jobs import WorkerResult

STDIN = "-"
LINE_FORMAT_NAMES = frozenset(LINE_FORMATS)
#: Events that are an agent's work (a document with none of them and problems is refused).
_WORK = frozenset({Kind.MESSAGE, Kind.TOOL_CALL, Kind.TOOL_RESULT})
#: Bytes read at a time from a file being scanned.
CHUNK_BYTES = 1 << 20
#: Lines decoded per batch.
BATCH_LINES = 64


@dataclass
class ScanReport:
    """What a scan found: detections, bad input, and counts."""

    #: The engine that ran the scan (``None`` for a sharded scan: see ``agents``).
    engine: Engine | None
    detections: list[Detection] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    files: int = 0
    lines: int = 0
    events: int = 0
    formats: dict[str, str] = field(default_factory=dict)
    #: Each file's last unit, what a detection's line counts (its last line; a
    #: document's last step): filled by a one-process scan (``eval`` checks
    #: labelled episodes against it).
    units: dict[str, int] = field(default_factory=dict)
    #: Files that were none of the supported formats (each reported once).
    unsupported: int = 0
    #: Set by :func:`scan_store`: the database re-scanned and how many sessions.
    database: str | None = None
    stored_sessions: int = 0
    #: Each session seen and its agent (filled from the engine when it is read).
    agents: dict[str, str | None] = field(default_factory=dict)
    _reasons: dict[str, str] | None = field(default=None, repr=False)

    def session_agents(self) -> dict[str, str | None]:
        """Each session seen, in order of first sight, and its agent (if known)."""
        if self.engine is not None and not self.agents:
            self.agents = self.engine.agents()
        return self.agents

    def session_reason(self, session: str) -> str:
        """What the session's escalation state says of it: the message of its
        latest detection at its highest level."""
        if self.engine is not None:
            return self.engine.reason(session)
        if self._reasons is None:  # the policy's rule, replayed over the merged detections
            shown: dict[str, tuple[Level, str]] = {}
            for d in self.detections:
                if d.level > Level.NONE and d.level >= shown.get(d.session, (Level.NONE, ""))[0]:
                    shown[d.session] = (d.level, d.message)
            self._reasons = {sid: reason for sid, (_, reason) in shown.items()}
        return self._reasons.get(session, "")

    @property
    def worst(self) -> Level:
        return max((d.level for d in self.detections), default=Level.NONE)

    @property
    def exit_code(self) -> int:
        return 1 if self.worst >= Level.WARN else 0

    @property
    def nothing_read(self) -> bool:
        """True when no file (or none at all) could be read as an agent log:
        every one was of no supported format.  An empty log is read: it is
        only empty."""
        return self.database is None and self.unsupported == self.files


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files named directly, or found (``*.jsonl``, ``*.traj``, ``*.json``) under directories."""
    out: list[str] = []
    for raw in paths:
        if raw == STDIN:
            out.append(raw)
            continue
        path = Path(raw).expanduser()
        if path.is_dir() and documents.events_dir(path) is not None:
            out.append(str(path))  # an OpenHands conversation: one document
        elif (
            path.is_dir()
            and documents.opencode_storage(path) is not None
            and not (path / "opencode.db").exists()
        ):
            out.append(
                str(documents.opencode_storage(path))
            )  # OpenCode's older storage/ folder (the database replaces it where both are)
        elif path.is_dir():
            out.extend(_found(path))
        else:
            out.append(str(path))
    return out


def _found(folder: Path) -> list[str]:
    """The logs under ``folder``; the event files of an OpenHands V1
    conversation (``<id>/events/event-*.json``) are one path, their folder."""
    found: list[str] = []
    conversations: set[Path] = set()
    for p in sorted(folder.rglob("*")):
        if documents.is_event_file(p):
            if p.parent not in conversations and p.is_file():
                conversations.add(p.parent)
                found.append(str(p.parent))
        elif (
            p.is_file()
            and (plain_path(p).suffix in (".jsonl", ".ndjson", ".traj") or documents.claims(p))
            and not plain_path(p).name.endswith(".inbox.jsonl")
        ):
            found.append(str(p))
    return found


def named_paths(paths: Iterable[str]) -> set[str]:
    """The paths of :func:`expand_paths` named as such, not found in a directory."""
    return {raw if raw == STDIN else str(Path(raw).expanduser()) for raw in paths}


def unreadable(path: str) -> str | None:
    """Why ``path`` cannot be scanned, or None.  A pipe or FIFO is not
    opened to find out: its writer would see the test open and close it."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            os.close(open_regular(path, follow=True))
        elif not os.access(path, os.R_OK):
            return os.strerror(errno.EACCES)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def read_event_batches(
    path: str,
    decoder: LineDecoder,
    stream=None,
    head: bytes = b"",
    mine: Callable[[str], bool] | None = None,
    reporter: bool = True,
) -> Iterator[list[Event]]:
    """The events of one line-format file, a chunk's worth at a time, bad
    lines reported to ``decoder``.  Batches keep the per-line work in one
    loop (:meth:`LineDecoder.feed_lines`) instead of a generator per layer.
    ``head``: what was already read of ``stream``; ``mine`` and ``reporter``
    as for :meth:`LineDecoder.feed_lines`."""
    opened = stream is None
    stream = stream if stream is not None else open_input(path, named=True)
    splitter = LineSplitter(decoder.max_line_bytes, newlines=True)
    feed_lines, read = decoder.feed_lines, stream.read
    try:
        for chunk in chain((head,) if head else (), iter(partial(read, CHUNK_BYTES), b"")):
            lines = splitter.feed(chunk)
            # Small batches: events that live through many allocations make
            # the cyclic GC traverse (and promote) them, which costs more than
            # the batching saves.
            for start in range(0, len(lines), BATCH_LINES):
                events = feed_lines(lines[start : start + BATCH_LINES], None, mine, reporter)
                if events:
                    yield events
        events = feed_lines(splitter.flush(), None, mine, reporter)
        if events:
            yield events
    finally:
        if opened:
            stream.close()


def read_events(path: str, decoder: LineDecoder, stream=None) -> Iterator[Event]:
    """Events of one line-format file, reporting bad lines to ``decoder``."""
    for events in read_event_batches(path, decoder, stream):
        yield from events


#: The cyclic collector's first threshold during a scan (CPython's default is 700).
SCAN_GC_THRESHOLD = 50_000


def rare_collections(threshold: int = SCAN_GC_THRESHOLD) -> AbstractContextManager[None]:
    """The cyclic collector run rarely for the length of a scan: a scan makes no
    reference cycles (a test checks), so collecting only costs time."""
    return collector.rare_collections(threshold)


def scan(
    paths: Iterable[str],
    config: Config | None = None,
    fmt: str | None = None,
    engine: Engine | None = None,
    progress: Any = None,
    jobs: int = 1,
) -> ScanReport:
    """Scan files (``-`` is stdin) and return the report; ``progress`` (a
    :class:`monitor.progress.Progress`) is told how far it got.  With ``jobs``
    > 1 the scan runs in that many processes, sessions sharded among them
    (the same detections: see :mod:`monitor.scan_jobs`).

    Raises ``OSError`` for a path that cannot be read."""
    if jobs > 1:
        return scan_sharded(paths, config, fmt, jobs, progress)
    with rare_collections():
        try:
            return _scan(paths, config, fmt, engine, progress)
        finally:
            if progress is not None:
                progress.finish()


def feeder(
    process_many: Callable[[list[Event]], list[Detection]], found: list[Detection]
) -> Callable[[list[Event]], None]:
    """What runs a batch of events through ``process_many`` (the engine's),
    their detections added to ``found``: one call a batch, not one an event."""

    def feed(events: list[Event]) -> None:
        detections = process_many(events)
        if detections:
            found.extend(detections)

    return feed


def _feed(
    engine: Engine, report: ScanReport, shard: Any, path: str, by_line: bool
) -> Callable[[list[Event]], None]:
    """The feed of ``path``'s events (of its lines, or of a whole document
    or database): the engine's, or a sharded worker's."""
    if shard is None:
        return feeder(engine.process_many, report.detections)
    return shard.feed(engine.process_many, path, by_line)


def _sizes(paths: list[str]) -> list[int]:
    sizes = []
    for path in paths:
        try:
            sizes.append(0 if path == STDIN else os.path.getsize(path))
        except OSError:
            sizes.append(0)
    return sizes


def _scan(
    paths: Iterable[str],
    config: Config | None,
    fmt: str | None,
    engine: Engine | None,
    progress: Any = None,
    shard: Any = None,
) -> ScanReport:
    """The scan; with ``shard`` (a :class:`~monitor.scan_jobs.Shard`), one
    worker's share of a sharded scan: ``shard.feed(process_many, path)`` in place
    of the engine's feed (see :func:`feeder`), its lines decoded as
    ``shard.mine`` and ``shard.reporter`` say, and each file's line problems
    noted for the parent to merge."""
    engine = engine or Engine(config)
    report = ScanReport(engine=engine)
    #: Document sessions named so far, by file: two runs of one task stay two sessions.
    named: dict[str, str] = {}
    paths = list(paths)
    files = expand_paths(paths)
    direct = named_paths(paths)
    sizes = _sizes(files) if progress is not None else []
    total, before = sum(sizes), 0
    passed = 0  # records other workers decode (a sharded scan), for the progress line
    for index, path in enumerate(files):
        report.files += 1
        if progress is not None:
            before = sum(sizes[:index])
            progress.update(index, len(files), before, total, report.events + passed)
        if path != STDIN and _read_document(
            report, _feed(engine, report, shard, path, False), Path(path), fmt, named, path in direct
        ):
            continue
        passed += _scan_line_file(
            report,
            engine,
            shard,
            path,
            fmt,
            progress,
            (index, len(files), before, total, passed),
            path in direct,
        )
    return report


def _scan_line_file(
    report: ScanReport,
    engine: Engine,
    shard: Any,
    path: str,
    fmt: str | None,
    progress: Any,
    at: tuple[int, int, int, int, int],
    named: bool = True,
) -> int:
    """Scan one file of lines (or standard input) into ``report``; the number of
    records it passed over for other workers (a sharded scan).  ``at`` is where
    the progress line stands: (file index, files, bytes before, bytes in all, records passed).
    ``named``: the operator named the path (a link is followed, a pipe read)."""
    index, count, before, total, passed = at
    opened = _open_lines(report, path, named)
    if opened is None:
        return 0
    stream, head = opened
    source = "<stdin>" if path == STDIN else path
    decoder = LineDecoder(
        source, fmt=fmt if fmt in LINE_FORMAT_NAMES else None, session="stdin" if path == STDIN else None
    )
    feed = _feed(engine, report, shard, path, True)
    tell = stream.tell if progress is not None and path != STDIN and stream.seekable() else None
    try:
        mine, reporter = (None, True) if shard is None else (shard.mine, shard.reporter)
        steps = 0  # a format whose lines hold whole runs counts in steps (openhands-eval: history[])
        for events in read_event_batches(path, decoder, stream, head, mine, reporter):
            report.events += len(events)
            feed(events)
            if decoder.format in _STEP_UNITS:
                steps = max(steps, max((e.line or 0 for e in events), default=0))
            if tell is not None:  # (with records left to other workers: as one process counts)
                progress.update(index, count, before + tell(), total, report.events + passed + decoder.passed)
    finally:
        if path != STDIN:
            stream.close()
    report.lines += decoder.lines
    refused = decoder.format is None and decoder.problem_count
    if shard is not None:
        shard.note_problems(len(report.problems), decoder, refused)
    if refused:
        first = decoder.problems[0].reason if decoder.problems else None
        what = describe(Path(path), first) if path != STDIN else f"not JSON lines ({first})"
        _refuse(report, source, what)
        return decoder.passed
    report.problems.extend(decoder.problems)
    report.problem_count += decoder.problem_count
    _damaged(report, stream, source)
    report.formats[source] = decoder.format or "unknown"
    report.units[source] = steps or decoder.lines
    return decoder.passed


#: Line formats whose events' ``line`` is a step of the run a line holds, not the file's line.
_STEP_UNITS = frozenset({"openhands-eval"})


def _open_lines(report: ScanReport, path: str, named: bool) -> tuple[Any, bytes] | None:
    """A file of lines opened once, its head peeked from it (a FIFO or a shell's <(...) can be read
    only once); None, and the file refused, when it cannot be read or is binary."""
    if path == STDIN:
        return sys.stdin.buffer, b""
    try:
        stream = open_log(path, named)
    except OSError as exc:
        _refuse(report, path, f"cannot be read ({exc.strerror or exc})")
        return None
    head = stream.read(PEEK_BYTES)
    if is_binary(head):
        stream.close()
        _refuse(report, path, describe(Path(path)))
        return None
    return stream, head


def _damaged(report: ScanReport, stream: Any, source: str) -> None:
    """Report a compressed file's damage (truncated, corrupt, too large):
    what came before it was read."""
    if isinstance(stream, Decompressed) and stream.error is not None:
        report.problems.append(Problem(source, None, stream.error))
        report.problem_count += 1


def _read_document(
    report: ScanReport,
    feed: Callable[[list[Event]], None],
    path: Path,
    fmt: str | None,
    named: dict[str, str],
    direct: bool,
) -> bool:
    """Scan ``path`` if it is a whole-document trajectory (or ``fmt`` forces
    one); False when it is to be read as lines.  ``direct``: named on the
    command line, not found in a directory (monitor/safeopen.py)."""
    kind = documents.kind_of(path, named=direct) if fmt is None else fmt
    if kind not in documents.DOCUMENT_FORMATS:
        return False
    if fmt is not None and fmt in LINE_FORMAT_NAMES and not _chat_document(path, direct):
        return False  # --format chat on JSONL: one message a line
    session = documents.session_of(path)
    if session in named.values():
        number = 2
        while f"{session}~{number}" in named.values():
            number += 1
        session = f"{session}~{number}"
    named[str(path)] = session
    try:
        events, problems = documents.load(path, session=session, fmt=fmt, named=direct)
    except OSError as exc:
        _refuse(report, str(path), f"cannot be read ({exc.strerror or exc})")
        return True
    database = kind in documents.DATABASE_FORMATS  # (its problem is its own: locked, torn …)
    if (
        not any(e.kind in _WORK for e in events)
        and problems
        and not is_damage(problems[0].reason)
        and not database
    ):
        _refuse(report, str(path), describe(path, problems[0].reason))
        return True
    report.formats[str(path)] = kind
    report.units[str(path)] = _units(path, kind, events)
    report.problems.extend(problems)
    report.problem_count += len(problems)
    report.events += len(events)
    feed(events)
    return True


def _units(path: Path, kind: str, events: list[Event]) -> int:
    """How far a document's unit goes: its last line for a Markdown history (a label may end on a line
    no event starts on), else the last step an event came from."""
    last = max((e.line for e in events if e.line is not None), default=0)
    if kind == "aider":
        raw, _damage = read_all(path)
        last = max(last, raw.count(b"\n") + (not raw.endswith(b"\n")))
    return last


def _chat_document(path: Path, direct: bool) -> bool:
    """True when the whole file is one chat document (not JSON lines)."""
    try:
        return documents.chat_messages(orjson.loads(read_all(path, direct)[0])) is not None
    except (OSError, ValueError):
        return False


def _refuse(report: ScanReport, source: str, what: str) -> None:
    report.unsupported += 1
    report.formats[source] = "unsupported"
    report.problems.append(refusal(source, what))
    report.problem_count += 1


def format_human(report: ScanReport, min_level: Level = Level.NOTICE) -> str:
    """The report as text: detections grouped per session, then a summary."""
    lines: list[str] = []
    by_session: dict[str, list[Detection]] = {}
    for detection in report.detections:
        if detection.level >= min_level:
            by_session.setdefault(detection.session, []).append(detection)
    for session, detections in by_session.items():
        reason = report.session_reason(session)
        worst = max(d.level for d in detections)
        agent_name = report.session_agents().get(session) or "agent"
        lines.append(
            f"session {session} ({agent_name}): {worst.label.upper()}" + (f" — {reason}" if reason else "")
        )
        for d in detections:
            cost = f"  [loop so far {spend_text(d.cost)}]" if d.cost else ""
            lines.append(f"  {d.level.label:<9} {d.detector:<17} {d.where}  {d.message}{cost}")
    lines.append(scanned_line(report))
    return "\n".join(lines)


def scanned_line(report: ScanReport, episodes: int | None = None) -> str:
    """The closing line of the text output: what was read, the detections by
    level (and the loop episodes, when counted), bad lines, the worst level."""
    counts = {lvl: sum(1 for d in report.detections if d.level == lvl) for lvl in Level if lvl}
    summary = ", ".join(f"{n} {lvl.label}" for lvl, n in counts.items() if n) or "no detections"
    if episodes is not None:
        summary = f"{episodes} loop episode(s); detections {summary}"
    scanned = (
        f"{report.stored_sessions} stored session(s) from {report.database}"
        if report.database is not None
        else f"{report.files} file(s)"
    )
    return (
        f"scanned {scanned}, {report.events:,} events in "
        f"{len(report.session_agents())} session(s): {summary}; "
        f"{report.problem_count} bad line(s); worst: {report.worst.label}"
    )


#: Up to this many sessions, ``scan_store`` merges per-session streams (each in
#: its stored order); beyond it, one stream ordered by event time keeps memory
#: bounded however many sessions there are.
MERGE_SESSIONS = 50


def scan_store(
    store,
    sessions: Iterable[str] | None = None,
    config: Config | None = None,
    engine: Engine | None = None,
    jobs: int = 1,
    shard: Any = None,
) -> ScanReport:
    """Re-scan sessions stored in a :class:`monitor.store.Store` (all of them
    by default) through the engine, e.g. with another preset; with ``jobs``
    > 1 in that many processes (see :mod:`monitor.scan_jobs`).

    Sessions are replayed together in event-time order, as they happened
    live, so detectors that look across sessions (swarm) see the same thing.
    ``shard`` is as for files (see ``_scan``)."""
    import heapq

    ids = list(sessions) if sessions is not None else store.session_ids()
    if jobs > 1:
        return scan_store_sharded(store.path, ids, sessions is None, config, jobs)
    engine = engine or Engine(config)
    report = ScanReport(engine=engine, database=str(store.path), stored_sessions=len(ids))
    if len(ids) <= MERGE_SESSIONS:
        page = max(100, 20_000 // max(len(ids), 1))
        stream = heapq.merge(*(store.iter_events(s, page_size=page) for s in ids), key=lambda e: e.ts)
    else:
        stream = store.iter_events_by_time(None if sessions is None else ids)
    feed = _feed(engine, report, shard, str(store.path), False)
    with rare_collections():
        while events := list(islice(stream, BATCH_LINES)):
            report.events += len(events)
            feed(events)
    return report


def now() -> float:
    return time.time()


# -- in N processes (scan --jobs): the sharding itself is in monitor.scan_jobs --

_status: MutableSequence[int] | None = None
#: The progress display, drawn by worker 0 (which reads every file), where
#: the workers are forked and so share the parent's stderr.
_progress = None


def _init(status: MutableSequence[int]) -> None:
    global _status
    _status = status


def _work(
    index: int,
    jobs: int,
    files: list[str],
    config: Config | None,
    fmt: str | None,
    stored: tuple[list[str], bool] | None = None,
) -> WorkerResult:
    """One worker's scan of ``files``, or with ``stored`` (session ids, and
    whether they are all of them) of the database ``files[0]``."""
    from monitor.scan_jobs import DONE, Shard, ShardCosts, WorkerResult

    status = _status
    assert status is not None, "_init runs first in every worker"
    shard = Shard(index, jobs, status, files)
    engine = Engine(config, global_wrapper=shard.stand_in)
    engine.costs = shard.costs = ShardCosts(engine.costs.prices, shard)
    if stored is not None:
        from monitor.store import Store

        store = Store(files[0])
        try:
            ids, every = stored
            report = scan_store(store, None if every else ids, config, engine, shard=shard)
        finally:
            store.close()
    else:
        progress = _progress if index == 0 else None
        with rare_collections():
            try:
                report = _scan(files, config, fmt, engine, progress, shard=shard)
            finally:
                if progress is not None:
                    progress.finish()
    status[index] = DONE
    result = WorkerResult(
        detections=shard.detections,
        sightings=shard.sightings,
        totals=shard.totals,
        agents=engine.agents(),
        events=shard.events,
        line_problems=shard.line_problems,
    )
    if index == 0:
        result.lines, result.files = report.lines, report.files
        result.problems, result.problem_count = report.problems, report.problem_count
        result.unsupported, result.formats = report.unsupported, report.formats
    return result


def scan_sharded(paths: Iterable[str], config: Config | None, fmt: str | None, jobs: int, progress=None):
    """The scan of ``paths`` in ``jobs`` worker processes (see the module's
    docstring); a :class:`ScanReport` equal to one process's.

    Raises :class:`~monitor.scan_jobs.ScanAborted` if a worker dies, ``OSError`` as ``scan``."""
    from monitor.scan_jobs import regular_file, shardable

    files = expand_paths(paths)
    if jobs <= 1 or not all(map(regular_file, files)) or not shardable(config):
        return scan(files, config, fmt, progress=progress)
    global _progress
    _progress = progress
    try:
        report = _run(files, config, fmt, jobs)
    finally:
        _progress = None
    return report if report is not None else scan(files, config, fmt)


def scan_store_sharded(path, ids: list[str], every: bool, config: Config | None, jobs: int):
    """``scan --db`` in ``jobs`` worker processes, as :func:`scan_sharded`:
    each worker replays every stored session in the same order and runs its own."""
    from monitor.scan_jobs import shardable
    from monitor.store import Store

    report = _run([str(path)], config, None, jobs, (ids, every)) if shardable(config) else None
    if report is None:
        store = Store(path)
        try:
            return scan_store(store, None if every else ids, config)
        finally:
            store.close()
    report.database, report.stored_sessions = str(path), len(ids)
    return report


def _run(files: list[str], config: Config | None, fmt: str | None, jobs: int, stored=None):
    """The merged report of ``jobs`` workers, or ``None`` where it could
    differ from one process's (then the caller scans in one)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from monitor.scan_jobs import IDLE, ScanAborted, merge, merge_problems

    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    status = context.Array("i", [IDLE] * jobs, lock=False)
    _init(status)
    # Held over the whole run, not only each worker's scan: the results are
    # pickled, unpickled and merged as tens of thousands of objects in no cycle.
    with rare_collections():
        # This process runs share 0 itself: one worker fewer to start, and its
        # result (the largest, with the counts) is never pickled.
        with ProcessPoolExecutor(jobs - 1, mp_context=context, initializer=_init, initargs=(status,)) as pool:
            futures = [
                pool.submit(_work, index, jobs, files, config, fmt, stored) for index in range(1, jobs)
            ]
            try:
                results = [_work(0, jobs, files, config, fmt, stored)]
                results.extend(future.result() for future in futures)
            except BrokenProcessPool:
                reading = sorted({files[status[i]] for i in range(jobs) if 0 <= status[i] < len(files)})
                where = f" while reading {', '.join(reading)}" if reading else ""
                raise ScanAborted(f"a scan worker process died{where}; no result (try --jobs 1)") from None
        merged, exact = merge(results, config)
    if not exact:
        return None
    first = results[0]
    problems, problem_count = merge_problems(results)
    report = ScanReport(
        engine=None,
        detections=merged,
        problems=problems,
        problem_count=problem_count,
        files=first.files,
        lines=first.lines,
        events=sum(result.events for result in results),
        formats=first.formats,
        unsupported=first.unsupported,
    )
    for result in results:
        report.agents.update(result.agents)
    return report
