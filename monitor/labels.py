"""Label files: real runs labelled by reading them, for ``loopwatch eval``.

A label file (TOML, docs/real-runs.md, "The label file") names runs by path,
relative to the file, each ``stuck`` (with the episodes a reader calls
stuck, in the run's own unit: what ``scan`` reports as the line), ``honest``
or ``borderline``, with where it came from (``[source.<name>]``) and which
part of the corpus it is in (``split``, fixed by :func:`split_for`).

The labels of issue 13 (``label = "loop"``, ``loops = [...]``, the source
named by the path's first directory) are read as the same thing.

Loading checks everything that can be checked without reading the runs and
raises :class:`LabelError` with one message naming the file and the run;
whether an episode lies inside its run is checked by ``eval``, which reads it.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

LABELS = ("stuck", "honest", "borderline")
#: Runs in a corpus that are not scored: not read yet, or not readable as an agent run by a person.
UNSCORED = ("unlabelled", "unreadable")
SPLITS = ("dev", "validation")
PICKS = ("random", "failure-signal")
_SOURCE_KEYS = frozenset(
    {"agent", "model", "repository", "path", "licence", "license", "selection", "note", "format", "unit"}
)
_RUN_KEYS = frozenset(
    {"path", "source", "agent", "model", "split", "picked", "label", "episodes", "loops", "reads", "note"}
    # provenance of one run where it differs from its source's, and what the reader needs to know
    | {"repository", "licence", "models", "source_file", "signal", "unit_note", "tuned", "pattern"}
)


class LabelError(ValueError):
    """A label file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Source:
    """Where a group of runs came from."""

    name: str
    agent: str
    model: str = ""
    repository: str = ""
    path: str = ""
    licence: str = ""
    selection: str = ""


@dataclass(frozen=True)
class Run:
    """One labelled run."""

    path: str  # as written: relative to the label file, posix form
    file: Path  # where it is
    source: str
    agent: str
    model: str
    split: str
    picked: str
    label: str
    episodes: tuple[tuple[int, int], ...]
    reads: int | None = None
    note: str = ""
    #: One harness failure that many runs of a source repeat: its episodes count once in the totals.
    pattern: str = ""


@dataclass(frozen=True)
class LabelFile:
    path: Path
    sources: dict[str, Source]
    runs: tuple[Run, ...]


def split_for(path: str) -> str:
    """The part of the corpus a run is in, from its path relative to the label
    file (posix form): ``"validation"`` when the SHA-256 of the path, as a
    number, is 0 modulo 3 (about a third), else ``"dev"``."""
    digest = hashlib.sha256(PurePosixPath(path).as_posix().encode("utf-8")).hexdigest()
    return "validation" if int(digest, 16) % 3 == 0 else "dev"


def load_labels(path: str | Path) -> LabelFile:
    """The label file at ``path``, checked; :class:`LabelError` when it is not usable."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LabelError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LabelError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(data) - {"source", "run"}
    if unknown:
        raise LabelError(
            f"{path}: unknown table(s) {', '.join(sorted(unknown))} (expected [source.NAME], [[run]])"
        )
    sources = _sources(path, data.get("source", {}))
    raw_runs = data.get("run", [])
    if not isinstance(raw_runs, list) or not raw_runs:
        raise LabelError(f"{path}: no [[run]] entries")
    runs: list[Run] = []
    seen: set[str] = set()
    for number, raw in enumerate(raw_runs, 1):
        run = _run(path, number, raw, sources)
        if run.path in seen:
            raise LabelError(f"{path}: run {number} ({run.path}): labelled twice")
        seen.add(run.path)
        runs.append(run)
    return LabelFile(path, sources, tuple(runs))


def _sources(path: Path, raw: Any) -> dict[str, Source]:
    if not isinstance(raw, dict):
        raise LabelError(f"{path}: [source] must be tables [source.NAME]")
    out: dict[str, Source] = {}
    for name, table in raw.items():
        where = f"{path}: [source.{name}]"
        if not isinstance(table, dict):
            raise LabelError(f"{where}: expected a table")
        unknown = set(table) - _SOURCE_KEYS
        if unknown:
            raise LabelError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        values = {key: _text(where, table, key) for key in table}
        if not values.get("agent"):
            raise LabelError(f"{where}: agent is required (the harness: claude-code, codex, swe-agent, …)")
        out[name] = Source(
            name,
            values["agent"],
            values.get("model", ""),
            values.get("repository", ""),
            values.get("path", ""),
            values.get("licence", values.get("license", "")),
            values.get("selection", ""),
        )
    return out


def _text(where: str, table: dict[str, Any], key: str) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        raise LabelError(f"{where}: {key} must be a string, not {value!r}")
    return value


def _run(path: Path, number: int, raw: Any, sources: dict[str, Source]) -> Run:
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str) or not raw["path"]:
        raise LabelError(f"{path}: run {number}: path (relative to the label file) is required")
    rel = raw["path"]
    where = f"{path}: run {number} ({rel})"
    unknown = set(raw) - _RUN_KEYS
    if unknown:
        raise LabelError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("source", "agent", "model", "split", "picked", "label", "note", "pattern"):
        _text(where, raw, key)
    file = path.parent / rel
    if not file.is_file():
        raise LabelError(f"{where}: no such file {file}")
    source = _source_of(where, raw, sources)
    label = "stuck" if raw.get("label") == "loop" else raw.get("label", "")
    if label not in LABELS + UNSCORED:
        raise LabelError(
            f"{where}: label must be one of {', '.join(LABELS + UNSCORED)}, not {raw.get('label')!r}"
        )
    tuned = raw.get("tuned", False)
    if not isinstance(tuned, bool):
        raise LabelError(f"{where}: tuned must be true or false, not {tuned!r}")
    # A run detection was tuned on before the split existed can only be development data.
    split = raw.get("split") or ("dev" if tuned else split_for(rel))
    if split not in SPLITS:
        raise LabelError(f"{where}: split must be dev or validation, not {split!r}")
    if tuned and split != "dev":
        raise LabelError(f"{where}: a tuned run is development data: split must be dev")
    if not tuned and split != split_for(rel):
        raise LabelError(
            f"{where}: split is {split!r} but its path puts it in {split_for(rel)!r} (split_for)"
        )
    picked = raw.get("picked") or "random"
    if picked not in PICKS:
        raise LabelError(f"{where}: picked must be random or failure-signal, not {picked!r}")
    reads = raw.get("reads")
    if reads is not None and (not isinstance(reads, int) or isinstance(reads, bool) or reads < 1):
        raise LabelError(f"{where}: reads must be a whole number, 1 or more, not {reads!r}")
    agent = raw.get("agent") or (sources[source].agent if source else "") or "unknown"
    model = raw.get("model") or (sources[source].model if source else "")
    episodes = _episodes(where, raw, label)
    note, pattern = raw.get("note", ""), raw.get("pattern", "")
    return Run(rel, file, source, agent, model, split, picked, label, episodes, reads, note, pattern)


def _source_of(where: str, raw: dict[str, Any], sources: dict[str, Source]) -> str:
    """The run's source: named, or (labels of issue 13) its path's first
    directory that names one."""
    name = raw.get("source")
    if name:
        if name not in sources:
            raise LabelError(f"{where}: source {name!r} is not a [source.NAME] of this file")
        return str(name)
    for part in PurePosixPath(raw["path"]).parts[:-1]:
        if part in sources:
            return part
    if sources and not raw.get("agent"):
        raise LabelError(f"{where}: source is required (one of {', '.join(sources)})")
    return ""


def _episodes(where: str, raw: dict[str, Any], label: str) -> tuple[tuple[int, int], ...]:
    if "episodes" in raw and "loops" in raw:
        raise LabelError(f"{where}: episodes and loops (its old name) both given")
    value = raw.get("episodes", raw.get("loops"))
    if label != "stuck":
        if value:
            raise LabelError(f"{where}: episodes are for stuck runs only (this one is {label})")
        return ()
    if not isinstance(value, list) or not value:
        raise LabelError(f"{where}: a stuck run needs episodes = [[first, last], …]")
    out: list[tuple[int, int]] = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in item)
        ):
            raise LabelError(f"{where}: an episode is [first, last] (two whole numbers), not {item!r}")
        first, last = item
        if first < 1 or first > last:
            raise LabelError(f"{where}: episode [{first}, {last}] does not exist (1 <= first <= last)")
        out.append((first, last))
    return tuple(out)
