"""Per-run detections of the corpus's development part, and a leave-one-source-out table.

Issue 31's generalisation check, on the development part only (it refuses any other
part: the validation part is scored once, by the lead, never tuned on)::

    .venv/bin/python tests/corpus/dev_runs.py dump OUT.json [--preset P] [--jobs N]
    .venv/bin/python tests/corpus/dev_runs.py table BEFORE.json AFTER.json [--motivated SRC,SRC]
    .venv/bin/python tests/corpus/dev_runs.py near OUT.json     # honest runs at notice or above

``dump`` scans each dev run as ``loopwatch eval`` does (the same ``scan``) and keeps
every detection at ``notice`` or above: detector, line, level, the level the detector
proposed. ``table`` compares two dumps per source: honest runs reaching notice and
warn, and stuck episodes caught at warn (a detection inside the episode), before →
after; with ``--motivated`` the sources a change was made for are totalled apart from
all the other dev sources (a quieting rule that loses catches elsewhere is no win).
``near`` lists the honest runs at notice or above, per agent, with their detectors.
Episodes are counted as labelled, each on its own (``eval`` counts the episodes of runs
that share one harness failure ``pattern`` once, so its totals are smaller).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
LABELS = HERE / "labels.toml"


def _scan(job: tuple[str, str]) -> list[dict]:
    from monitor.config import build_config
    from monitor.events import Level
    from monitor.scan import scan

    path, preset = job
    config = build_config({}, preset=preset)
    try:
        report = scan([path], config, jobs=1)
    except OSError:
        return []
    return [
        {"detector": d.detector, "line": d.line, "level": d.level.label, "proposed": d.proposed.label}
        for d in report.detections
        if d.level >= Level.NOTICE
    ]


def dump(out: str, preset: str, jobs: int) -> None:
    from monitor.labels import load_labels

    runs = [r for r in load_labels(LABELS).runs if r.split == "dev" and r.label in ("honest", "stuck")]
    work = [(str(r.file), preset) for r in runs]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        found = list(pool.map(_scan, work, chunksize=1))
    rows = [
        {
            "path": r.path,
            "source": r.source,
            "agent": r.agent,
            "label": r.label,
            "episodes": [list(e) for e in r.episodes],
            "detections": d,
        }
        for r, d in zip(runs, found, strict=True)
    ]
    Path(out).write_bytes(orjson.dumps({"preset": preset, "split": "dev", "runs": rows}))


RANK = {"notice": 1, "warn": 2, "critical": 3, "terminate": 4}


def _reaches(row: dict, level: str) -> bool:
    return any(RANK[d["level"]] >= RANK[level] for d in row["detections"])


def _caught(row: dict) -> int:
    hits = [d["line"] for d in row["detections"] if RANK[d["level"]] >= RANK["warn"] and d["line"]]
    return sum(any(a <= h <= b for h in hits) for a, b in row["episodes"])


def _tally(rows: list[dict]) -> tuple[int, int, int, int, int]:
    honest = [r for r in rows if r["label"] == "honest"]
    episodes = sum(len(r["episodes"]) for r in rows if r["label"] == "stuck")
    return (
        len(honest),
        sum(_reaches(r, "notice") for r in honest),
        sum(_reaches(r, "warn") for r in honest),
        episodes,
        sum(_caught(r) for r in rows if r["label"] == "stuck"),
    )


def _load(path: str) -> list[dict]:
    data = orjson.loads(Path(path).read_bytes())
    if data.get("split") != "dev":
        sys.exit(f"{path}: not a dump of the development part")
    return data["runs"]


def table(before: str, after: str, motivated: set[str]) -> None:
    old, new = _load(before), _load(after)
    groups: dict[str, tuple[list[dict], list[dict]]] = {}
    for name in sorted({r["source"] for r in old}):
        groups[name] = ([r for r in old if r["source"] == name], [r for r in new if r["source"] == name])
    if motivated:
        inside = [n for n in groups if n in motivated]
        groups["= motivating sources"] = tuple(  # type: ignore[assignment]
            [r for n in inside for r in groups[n][i]] for i in (0, 1)
        )
        groups["= all other sources"] = tuple(  # type: ignore[assignment]
            [r for n in list(groups) if n not in motivated and not n.startswith("=") for r in groups[n][i]]
            for i in (0, 1)
        )
    groups["= total"] = (old, new)
    print(
        f"{'source':36} {'honest':>6} {'at notice':>11} {'at warn':>9} {'episodes':>8} {'caught at warn':>14}"
    )
    for name, (a, b) in groups.items():
        ta, tb = _tally(a), _tally(b)
        print(
            f"{name:36} {ta[0]:>6} {ta[1]:>4} → {tb[1]:<4} {ta[2]:>3} → {tb[2]:<3} {ta[3]:>8} {ta[4]:>6} → {tb[4]:<6}"
        )


def near(path: str) -> None:
    rows = [r for r in _load(path) if r["label"] == "honest" and _reaches(r, "notice")]
    per_agent = Counter(r["agent"] for r in _load(path) if r["label"] == "honest")
    for agent in sorted(per_agent):
        mine = [r for r in rows if r["agent"] == agent]
        warned = sum(_reaches(r, "warn") for r in mine)
        print(f"{agent}: {len(mine)} of {per_agent[agent]} honest at notice+, {warned} at warn+")
        for r in mine:
            top = max(RANK[d["level"]] for d in r["detections"])
            names = Counter(d["detector"] for d in r["detections"])
            print(f"  {top} {r['path']}: {dict(names)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out")
    d.add_argument("--preset", default="balanced")
    d.add_argument("--jobs", type=int, default=2)
    t = sub.add_parser("table")
    t.add_argument("before")
    t.add_argument("after")
    t.add_argument("--motivated", default="")
    n = sub.add_parser("near")
    n.add_argument("dump")
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.out, args.preset, args.jobs)
    elif args.command == "table":
        table(args.before, args.after, {s for s in args.motivated.split(",") if s})
    else:
        near(args.dump)


if __name__ == "__main__":
    main()
