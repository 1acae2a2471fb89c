"""``scan --jobs N``: how N processes share one scan, with the detections of one.

:func:`monitor.scan.scan_sharded` starts the workers; this module is what
they share it by (it imports nothing from :mod:`monitor.scan`).

Sessions are sharded among worker processes by a stable hash of their id.
Every worker reads every file, decodes only the lines that may be its own
(a native record names its session) and runs the same
:class:`~monitor.detect.engine.Engine` over its own sessions' events only;
each reports the bad lines it decoded for itself, and worker 0 (this
process) those every worker decodes alike.  What needs every session -- the global detectors,
i.e. the swarm -- is split (:class:`~monitor.detect.base.ShardableDetector`):
each worker records what its events show the detector, tagged with the
event's position in the whole input, and the parent process counts those
sightings in that order, as one process would have seen them.

The parent then merges the workers' detections and the swarm's by that
position, so the output is the single-process output: the same detections,
lines and levels, in the same order (by file, then line).  Escalation is per
session and per pattern, so the swarm's levels can be worked out apart from
the other detectors' -- except where a session escalates more patterns than
the policy remembers, or a swarm detection cites exactly the evidence of
another detection of the same event.  Neither happens on real input; if one
does, the scan runs again in one process rather than report anything else.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from monitor.config import Config
from monitor.cost import LoopCosts, episode_costs
from monitor.detect.base import Detection, Detector, ShardableDetector
from monitor.detect.detectors import REGISTRY
from monitor.detect.escalation import MAX_PATTERNS, EscalationPolicy, pattern_key
from monitor.events import Event, Level
from monitor.formats.base import Problem

#: Below this many bytes of input the default job count runs one process:
#: starting workers costs more than the scan.
SHARD_MIN_BYTES = 4 << 20
#: A worker's entry in the status array while it is between files / once done.
IDLE, DONE = -1, -2
#: Where an event is in the whole input: (feed, line, k) or (feed, n, 0); see ``Shard``.
Position = tuple[int, int | None, int]


class ScanAborted(RuntimeError):
    """A worker process died: the scan has no complete result."""


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def regular_file(path: str) -> bool:
    """Whether every worker can read all of ``path`` (not standard input, a
    FIFO or a device, whose lines would be split among the readers)."""
    try:
        return path != "-" and stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # each worker reports it as one process would


def default_jobs(paths: list[str]) -> int:
    """The job count when none is asked for: every usable core, but one
    for standard input or a small input."""
    if "-" in paths:
        return 1
    size = 0
    for path in paths:
        try:
            size += os.path.getsize(path)
        except OSError:
            pass
    return usable_cores() if size >= SHARD_MIN_BYTES else 1


def shardable(config: Config | None) -> bool:
    """Whether every enabled global detector can be split among workers."""
    config = config or Config()
    return all(
        issubclass(cls, ShardableDetector)
        for name, cls in REGISTRY.items()
        if cls.scope == "global" and config.detector_settings(name).enabled
    )


@dataclass
class WorkerResult:
    """What one worker sends back: its detections and sightings, each with
    the position of its event in the whole input; its sessions' agents and
    events; each line file's problems it reports (see ``Shard.note_problems``);
    and (from worker 0 only) the rest of the counts."""

    detections: list[tuple[Position, Detection]] = field(default_factory=list)
    sightings: list[tuple] = field(default_factory=list)
    #: Per detection (same order), its session's usage totals then (cost.LoopCosts.totals).
    totals: list[tuple] = field(default_factory=list)
    agents: dict[str, str | None] = field(default_factory=dict)
    events: int = 0
    line_problems: list[tuple | None] = field(default_factory=list)
    lines: int = 0
    files: int = 0
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    unsupported: int = 0
    formats: dict[str, str] = field(default_factory=dict)


class Shard:
    """One worker's share: which events are its own, their positions, and
    the sightings its stand-ins for the global detectors record.

    A position is ``(file, line, k)`` for the k-th event of a line, so that
    a worker need not decode other workers' lines to place its own events
    (``mine``); ``(file, n, 0)`` for the n-th of a document or database,
    which every worker reads whole."""

    def __init__(self, index: int, jobs: int, status: MutableSequence[int], files: list[str]):
        self.index, self.jobs, self.status = index, jobs, status
        self.files = {path: number for number, path in enumerate(files)}
        self.reporter = index == 0  # reports what every worker reads alike (and the counts)
        self.fed = 0  # feeds made so far: every worker makes the same ones in the same order
        self.position: Position = (0, None, 0)  # set before the engine sees an event
        self.owners: dict[str, int] = {}
        self.events = 0
        self.detections: list[tuple[Position, Detection]] = []
        self.sightings: list[tuple] = []
        self.totals: list[tuple] = []
        self.line_problems: list[tuple | None] = []
        self.costs: ShardCosts | None = None  # the worker engine's, set once it exists

    def owner(self, session: str) -> int:
        owner = self.owners.get(session)
        if owner is None:
            owner = self.owners[session] = shard_of(session, self.jobs)
        return owner

    def mine(self, session: str) -> bool:
        """Whether ``session`` is this worker's."""
        owner = self.owners.get(session)
        return (owner if owner is not None else self.owner(session)) == self.index

    def feed(
        self, process_many: Callable[[Iterable[Event]], list[Detection]], path: str, by_line: bool = True
    ) -> Callable[[list[Event]], None]:
        """The feed (:func:`monitor.scan.feeder`) of ``path``'s events (of
        its lines, or ``by_line`` false, of a whole document or database):
        this worker's through ``process_many``, each at its position.  Their
        detections are noted as the engine concludes each event
        (:class:`ShardCosts`), where the position is still that event's."""
        self.status[self.index] = self.files.get(path, IDLE)
        self.fed += 1
        number, index, owners, owner = self.fed, self.index, self.owners, self.owner
        last, k, count = None, 0, 0

        def own(events: list[Event]) -> Iterator[Event]:
            nonlocal last, k, count
            for event in events:
                if by_line:
                    if event.line == last:
                        k += 1
                    else:
                        last, k = event.line, 0
                else:
                    count += 1
                shard = owners.get(event.session)
                if (shard if shard is not None else owner(event.session)) == index:
                    # The engine takes the next event only once it is done with this one.
                    self.position = (number, last, k) if by_line else (number, count, 0)
                    self.events += 1
                    yield event

        def feed(events: list[Event]) -> None:
            process_many(own(events))

        return feed

    def detected(self, detections: list[Detection], totals: tuple) -> None:
        """Note the detections of the event at ``position``, and their
        session's usage totals then (:func:`monitor.cost.episode_costs`)."""
        position = self.position
        self.detections.extend((position, d) for d in detections)
        self.totals.extend([totals] * len(detections))

    def note_problems(self, at: int, decoder, refused: bool) -> None:
        """A line file's problems this worker reports (those of its lines,
        and worker 0's of the lines every worker decodes), and where in its
        report they are: the parent merges each file's, by line."""
        self.line_problems.append(
            None if refused else (at, decoder.problems, decoder.problem_count, decoder.max_problems_kept)
        )

    def stand_in(self, detector: Detector) -> Detector:
        if not isinstance(detector, ShardableDetector):  # shardable() checked them all
            raise TypeError(f"{detector.name} cannot be split among scan workers")
        return _Sighter(detector, self)


class ShardCosts(LoopCosts):
    """A worker engine's costs: it tells the shard of each event's detections
    instead of costing them (the parent does, from every worker's: ``merge``)."""

    def __init__(self, prices, shard: Shard):
        super().__init__(prices)
        self.shard = shard

    def detected(self, session: str, detections: list, escalation: Any, ts: float, seq: int = 0) -> None:
        self.shard.detected(detections, self.totals(session))


class _Sighter(Detector):
    """Stands in for a global detector in a worker: records the sightings
    of this worker's events, detects nothing."""

    scope = "global"

    def __init__(self, inner: ShardableDetector, shard: Shard):
        super().__init__(inner.settings)
        self.inner, self.shard = inner, shard
        # Each stand-in takes the class-level identity of the detector it
        # stands in for, on the instance (one _Sighter class for them all).
        self.name, self.kinds = inner.name, inner.kinds  # type: ignore[misc]
        self.resets_on_user_turn = inner.resets_on_user_turn  # type: ignore[misc]

    def observe(self, event: Event, view) -> None:
        sighting = self.inner.sight(event, view)
        costs = self.shard.costs
        assert costs is not None, "_work sets the shard's costs before any event"
        if sighting is not None:
            self.shard.sightings.append(
                (
                    self.shard.position,
                    event.session,
                    event.source,
                    event.line,
                    event.ts,
                    event.seq,
                    self.name,
                    sighting,
                    costs.totals(event.session),
                )
            )


def shard_of(session: str, jobs: int) -> int:
    """The worker that owns ``session``: stable across processes and runs."""
    return zlib.crc32(session.encode("utf-8", "surrogatepass")) % jobs


def merge_problems(results: list[WorkerResult]) -> tuple[list[Problem], int]:
    """Worker 0's problems with each line file's merged in from every
    worker's (each reported those of the lines it decoded for itself), in
    line order and as many kept as one process keeps; and their count."""
    first = results[0]
    problems, count = list(first.problems), first.problem_count
    # From the last file back, so that the places noted before stay right.
    for number in reversed(range(len(first.line_problems))):
        noted = first.line_problems[number]
        if noted is None:
            continue  # a file refused whole: worker 0 reported it
        at, kept, _, cap = noted
        merged = list(kept)
        for result in results[1:]:
            other = result.line_problems[number]
            if other is not None:
                merged.extend(other[1])
                count += other[2]
        merged.sort(key=_line_of)
        problems[at : at + len(kept)] = merged[:cap]
    return problems, count


def _line_of(problem: Problem) -> int:
    return problem.line or 0


_POSITION = itemgetter(0)
#: A detection's place: its event's position, then the worker's before the global detectors', then its rank.
_RANKED = itemgetter(0, 1, 2)


def merge(results: list[WorkerResult], config: Config | None) -> tuple[list[Detection], bool]:
    """Every detection in single-process order, with the global detectors'
    counted from the sightings; and whether that order and those levels are
    provably the single process's (see the module's docstring)."""
    config = config or Config()
    counters: dict[str, ShardableDetector] = {
        name: cls(config.detector_settings(name))
        for name, cls in REGISTRY.items()
        if cls.scope == "global"
        and config.detector_settings(name).enabled
        and issubclass(cls, ShardableDetector)  # all of them: shardable() holds
    }
    policy = EscalationPolicy(config.escalation)
    # A worker's sightings are in input order, and one event's in its engine's
    # order of the global detectors (REGISTRY's, as here); no event is two
    # workers', so a stable sort by position alone gives one process's order.
    sightings = sorted((s for result in results for s in result.sightings), key=_POSITION)
    keyed: list[tuple[Position, int, int, Detection, tuple]] = []
    for result in results:
        keyed.extend(
            (position, 0, rank, d, result.totals[rank])
            for rank, (position, d) in enumerate(result.detections)
        )
    globals_at: dict[Position, list[Detection]] = {}
    for rank, (position, session, source, line, ts, seq, name, sighting, totals) in enumerate(sightings):
        for detection in counters[name].count(sighting, None) or ():
            detection.session = detection.session or session
            detection.source, detection.line, detection.ts, detection.seq = source, line, ts, seq
            policy.apply(detection)
            keyed.append((position, 1, rank, detection, totals))
            globals_at.setdefault(position, []).append(detection)
    keyed.sort(key=_RANKED)
    episode_costs((k[3], k[4]) for k in keyed)
    merged = [k[3] for k in keyed]
    return merged, not globals_at or _independent(keyed, globals_at)


def _independent(
    keyed: list[tuple[Position, int, int, Detection, tuple]], globals_at: dict[Position, list[Detection]]
) -> bool:
    """Whether the global detectors' detections could not have changed the
    others' (or been dropped for them) in one process: no event where one
    cites exactly the same evidence as another, and no session escalating
    more patterns than its escalation state remembers."""
    at: dict[Position, list[Detection]] = {}
    patterns: dict[str, set[int]] = {}
    for position, _, _, detection, *_ in keyed:
        if position in globals_at:
            at.setdefault(position, []).append(detection)
        if detection.proposed >= Level.WARN:
            patterns.setdefault(detection.session, set()).add(
                pattern_key(detection.detector, detection.pattern)
            )
    for detections in at.values():
        keys = [frozenset(ref.seq for ref in d.evidence) for d in detections]
        if len(keys) > 1 and len(set(k for k in keys if k)) < sum(1 for k in keys if k):
            return False
    return all(len(keys) < MAX_PATTERNS for keys in patterns.values())
