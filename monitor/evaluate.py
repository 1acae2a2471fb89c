"""``loopwatch eval``: how a preset or a config does on labelled real runs.

Each labelled run (:mod:`monitor.labels`) is scanned on its own by
:func:`monitor.scan.scan`, exactly as ``loopwatch scan RUN`` scans it (the
same engine, the same code path: no second pipeline), in ``jobs`` processes
one run at a time.  Its detections at ``warn`` or above are then scored
against its label, at two levels, ``warn`` and ``terminate``:

* a stuck **episode** ``[first, last]`` is *caught* when a detection at the
  level has a line in ``[first, last]``; *late* when none has, but one has a
  line after ``last`` and before the next labelled episode of the run begins
  (or the run ends); *missed* otherwise;
* an **honest** run reaching the level is a *false alarm*;
* a detection at the level in a stuck run outside every episode and every
  late window is counted as *outside* (per run);
* **borderline** runs are shown apart, never scored;
* a run no format of loopwatch reads is *unreadable*: counted and listed.

A detector's share counts *first* warnings: the first detection at the level
inside each caught episode (true) and the first of each false-alarm run
(false), so a detector that repeats itself is counted once per finding.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from monitor.config import Config
from monitor.events import Level
from monitor.formats.compressed import is_damage
from monitor.labels import LABELS, LabelError, LabelFile, Run, Source

#: The levels scored, lowest first.
LEVELS = (Level.WARN, Level.TERMINATE)


@dataclass(frozen=True)
class Hit:
    """One detection at warn or above: who, where, how high."""

    detector: str
    line: int | None
    level: Level

    def to_dict(self) -> dict[str, Any]:
        return {"detector": self.detector, "line": self.line, "level": self.level.label}


@dataclass(frozen=True)
class RunScan:
    """What scanning one run gave: its hits in order, its last unit, or why it is unreadable."""

    hits: tuple[Hit, ...]
    units: int
    unreadable: str = ""
    problems: int = 0


def scan_run(path: str, config: Config | None) -> RunScan:
    """``loopwatch scan PATH``, kept to what eval needs."""
    from monitor.scan import scan

    try:
        report = scan([path], config, jobs=1)
    except OSError as exc:
        return RunScan((), 0, f"cannot read: {exc.strerror or exc}")
    damage = [p.reason for p in report.problems if is_damage(p.reason)]
    if report.nothing_read or (damage and report.events == 0):
        reasons = [p.reason for p in report.problems] or ["nothing read"]
        return RunScan((), 0, (damage or reasons)[0], report.problem_count)
    hits = tuple(Hit(d.detector, d.line, d.level) for d in report.detections if d.level >= Level.WARN)
    return RunScan(hits, report.units.get(path, 0), "", report.problem_count)


def _scan_one(job: tuple[str, Config | None]) -> RunScan:
    return scan_run(*job)


def scan_runs(runs: Sequence[Run], config: Config | None, jobs: int = 1) -> list[RunScan]:
    """Every run scanned, in order; ``jobs`` processes share them."""
    work = [(str(run.file), config) for run in runs]
    if jobs <= 1 or len(work) <= 1:
        return [scan_run(*job) for job in work]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(min(jobs, len(work)), mp_context=context) as pool:
        return list(pool.map(_scan_one, work, chunksize=1))


def check_ranges(runs: Sequence[Run], scans: Sequence[RunScan]) -> None:
    """Refuse an episode that does not exist in its (readable) run."""
    for run, scanned in zip(runs, scans, strict=True):
        if scanned.unreadable:
            continue
        for first, last in run.episodes:
            if last > scanned.units:
                raise LabelError(
                    f"{run.path}: episode [{first}, {last}] does not exist: the run ends at "
                    f"{scanned.units} (its last line, or step of a document)"
                )


# -- scoring ----------------------------------------------------------------------------


@dataclass
class Tally:
    """The counts at one level, for one agent or all."""

    episodes: int = 0
    caught: int = 0
    late: int = 0
    missed: int = 0
    honest: int = 0
    false_alarms: int = 0
    stuck_runs: int = 0
    outside: int = 0

    def rates(self) -> dict[str, float | None]:
        def share(n: int, of: int) -> float | None:
            return n / of if of else None

        return {
            "caught": share(self.caught, self.episodes),
            "late": share(self.late, self.episodes),
            "missed": share(self.missed, self.episodes),
            "false_alarms": share(self.false_alarms, self.honest),
            "outside": share(self.outside, self.stuck_runs),
        }

    def to_dict(self) -> dict[str, Any]:
        counts = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return {**counts, "rates": self.rates()}


@dataclass(frozen=True)
class Finding:
    """A miss, a late catch or a false alarm, with the run's first warning at the level."""

    level: Level
    kind: str  # "missed" | "late" | "false_alarm"
    run: Run
    episode: tuple[int, int] | None
    first: Hit | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level.label,
            "kind": self.kind,
            "path": self.run.path,
            "agent": self.run.agent,
            "episode": list(self.episode) if self.episode else None,
            "first_warning": self.first.to_dict() if self.first else None,
        }


@dataclass
class Score:
    """The whole evaluation."""

    runs: list[Run]
    tallies: dict[Level, dict[str, Tally]] = field(default_factory=dict)  # level -> agent ("" = total)
    findings: list[Finding] = field(default_factory=list)
    caught: dict[Level, list[tuple[Run, tuple[int, int], Hit]]] = field(default_factory=dict)
    quiet: dict[Level, list[Run]] = field(default_factory=dict)
    shares: dict[Level, dict[str, Counter[str]]] = field(default_factory=dict)  # "true"/"false" -> detector
    borderline: list[tuple[Run, Hit | None]] = field(default_factory=list)
    unreadable: list[tuple[Run, str]] = field(default_factory=list)
    sources: dict[str, Source] = field(default_factory=dict)  # the label file's, for the record

    def total(self, level: Level = Level.WARN) -> Tally:
        return self.tallies[level][""]


def score(runs: Sequence[Run], scans: Sequence[RunScan]) -> Score:
    """Score every run's hits against its label (see the module's docstring)."""
    result = Score(list(runs))
    for level in LEVELS:
        result.tallies[level] = {"": Tally()}
        result.caught[level], result.quiet[level] = [], []
        result.shares[level] = {"true": Counter(), "false": Counter()}
    for run, scanned in zip(runs, scans, strict=True):
        if scanned.unreadable:
            result.unreadable.append((run, scanned.unreadable))
        elif run.label == "borderline":
            result.borderline.append((run, scanned.hits[0] if scanned.hits else None))
        else:
            for level in LEVELS:
                _score_run(result, level, run, [h for h in scanned.hits if h.level >= level])
    for level in LEVELS:
        _count_patterns_once(result, level)
    return result


def _count_patterns_once(result: Score, level: Level) -> None:
    """Episodes of runs that share a harness failure ``pattern`` (same agent) count as one episode in
    the tallies, with the outcome most of them had (caught wins a tie): many runs failing the same
    way are one behaviour to catch, not many."""
    outcomes: dict[tuple[str, str], list[str]] = {}
    for run, _episode, _hit in result.caught[level]:
        if run.pattern:
            outcomes.setdefault((run.agent, run.pattern), []).append("caught")
    for finding in result.findings:
        if finding.level == level and finding.run.pattern and finding.episode is not None:
            outcomes.setdefault((finding.run.agent, finding.run.pattern), []).append(finding.kind)
    for (agent, _pattern), kinds in outcomes.items():
        order = ("caught", "late", "missed")
        kept = max(order, key=lambda kind: (kinds.count(kind), -order.index(kind)))
        for tally in (result.tallies[level][""], result.tallies[level][agent]):
            tally.episodes -= len(kinds) - 1
            for kind in order:
                setattr(tally, kind, getattr(tally, kind) - kinds.count(kind) + (kind == kept))


def _score_run(result: Score, level: Level, run: Run, hits: list[Hit]) -> None:
    tallies = result.tallies[level]
    counts = [tallies[""], tallies.setdefault(run.agent, Tally())]
    shares = result.shares[level]
    if run.label == "honest":
        for tally in counts:
            tally.honest += 1
            tally.false_alarms += bool(hits)
        if hits:
            result.findings.append(Finding(level, "false_alarm", run, None, hits[0]))
            shares["false"][hits[0].detector] += 1
        else:
            result.quiet[level].append(run)
        return
    windows = _late_windows(run.episodes)
    used: set[int] = set()
    for episode, (after, before) in zip(run.episodes, windows, strict=True):
        first, last = episode
        inside = [i for i, h in enumerate(hits) if h.line is not None and first <= h.line <= last]
        late = [i for i, h in enumerate(hits) if h.line is not None and after < h.line < before]
        used.update(inside, late)
        kind = "caught" if inside else "late" if late else "missed"
        for tally in counts:
            tally.episodes += 1
            setattr(tally, kind, getattr(tally, kind) + 1)
        if inside:
            result.caught[level].append((run, episode, hits[inside[0]]))
            shares["true"][hits[inside[0]].detector] += 1
        else:
            shown = hits[late[0]] if late else (hits[0] if hits else None)
            result.findings.append(Finding(level, kind, run, episode, shown))
    for tally in counts:
        tally.stuck_runs += 1
        tally.outside += len(used) < len(hits)


def _late_windows(episodes: Sequence[tuple[int, int]]) -> list[tuple[int, float]]:
    """For each episode, the open interval after it where a catch is late:
    from its last unit to the next episode's first (or the end)."""
    starts = sorted(first for first, _ in episodes)
    out: list[tuple[int, float]] = []
    for _first, last in episodes:
        later = [s for s in starts if s > last]
        out.append((last, float(min(later)) if later else float("inf")))
    return out


# -- requirements -----------------------------------------------------------------------

_OPERATORS = (">=", "<=", "==", ">", "<")


@dataclass(frozen=True)
class Requirement:
    """``caught>=0.85``: a metric of the total, an operator, a fraction."""

    metric: str
    op: str
    value: float

    @classmethod
    def parse(cls, spec: str) -> Requirement:
        for op in _OPERATORS:
            name, found, number = spec.partition(op)
            if found:
                break
        else:
            raise ValueError(f"{spec!r}: expected METRIC>=N or METRIC<=N (e.g. caught>=0.85)")
        name = name.strip()
        if name not in metric_names():
            raise ValueError(f"{spec!r}: unknown metric {name!r} (one of: {', '.join(metric_names())})")
        try:
            value = float(number)
        except ValueError:
            raise ValueError(f"{spec!r}: {number.strip()!r} is not a number (a fraction: 0.85)") from None
        return cls(name, op, value)

    def check(self, result: Score) -> tuple[bool, float | None]:
        """Whether it holds, and the value it was checked on (None: no runs to measure)."""
        actual = metric(result, self.metric)
        if actual is None:
            return False, None
        holds = {
            ">=": actual >= self.value,
            "<=": actual <= self.value,
            "==": actual == self.value,
            ">": actual > self.value,
            "<": actual < self.value,
        }[self.op]
        return holds, actual

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"


def metric_names() -> list[str]:
    """What ``--require`` can name: the total's rates at warn, ``terminate_…`` the same at
    terminate, and ``unreadable`` (a fraction of the runs)."""
    rates = list(Tally().rates())
    return [*rates, *(f"terminate_{name}" for name in rates), "unreadable"]


def metric(result: Score, name: str) -> float | None:
    if name == "unreadable":
        return len(result.unreadable) / len(result.runs) if result.runs else None
    level = Level.WARN
    if name.startswith("terminate_"):
        level, name = Level.TERMINATE, name[len("terminate_") :]
    return result.total(level).rates()[name]


def select(runs: Iterable[Run], split: str) -> list[Run]:
    """The labelled runs of ``split`` (``"all"``: every one); runs not labelled yet are left out."""
    return [run for run in runs if (split == "all" or run.split == split) and run.label in LABELS]


def load_detections(path: str | Path) -> dict[str, list[Hit]]:
    """Detections written by another detector in ``scan --json --detections``'s shape (one object a line with at least
    ``file``, ``line``, ``detector`` and ``level``), by file; :class:`LabelError` for a bad line."""
    found: dict[str, list[Hit]] = {}
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
            level = Level.parse(str(record["level"]))
            hit = Hit(str(record["detector"]), _line(record.get("line")), level)
            where = str(Path(str(record["file"])).resolve())
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise LabelError(f"{path}:{number}: not a detection ({exc})") from None
        if hit.level >= Level.WARN:
            found.setdefault(where, []).append(hit)
    return found


def _line(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def with_detections(runs: Sequence[Run], scans: list[RunScan], found: dict[str, list[Hit]]) -> list[RunScan]:
    """``scans`` with each readable run's hits replaced by the given detections of its file."""
    out = []
    for run, scanned in zip(runs, scans, strict=True):
        hits = tuple(found.get(str(run.file.resolve()), ()))
        out.append(scanned if scanned.unreadable else RunScan(hits, scanned.units, "", scanned.problems))
    return out


def evaluate(
    labels: LabelFile,
    config: Config | None,
    split: str = "all",
    jobs: int = 1,
    detections: dict[str, list[Hit]] | None = None,
) -> Score:
    """Scan and score the runs of ``split``; :class:`LabelError` for an episode out of its run.
    With ``detections`` (:func:`load_detections`), those are scored instead of loopwatch's own (the runs
    are still read, for their length and whether they can be read at all)."""
    runs = select(labels.runs, split)
    scans = scan_runs(runs, config, jobs)
    if detections is not None:
        scans = with_detections(runs, scans, detections)
    check_ranges(runs, scans)
    result = score(runs, scans)
    result.sources = labels.sources
    return result
