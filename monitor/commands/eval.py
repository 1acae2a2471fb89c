"""``loopwatch eval``: score a preset or a config on labelled runs (docs/commands.md)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from monitor.commands.common import ConfigError, add_config_options, config_from_args, fail

if TYPE_CHECKING:
    from monitor.evaluate import Hit, Score
    from monitor.events import Level

#: Each --require: its text, whether it holds, the value it was checked on.
Checks = list[tuple[str, bool, float | None]]

HELP = (
    "score detection on labelled runs: stuck episodes caught, honest runs warned (exit 1 if --require fails)"
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("labels", nargs="?", metavar="LABELS.toml", help="the label file (docs/real-runs.md)")
    add_config_options(parser)
    parser.add_argument(
        "--split",
        choices=("dev", "validation", "all"),
        default="all",
        help="score only the runs of this part of the label file (default: all)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object with every count and list")
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="SPEC",
        help="a threshold on the total, e.g. caught>=0.85 or false_alarms<=0.05 (fractions; "
        "repeatable); exit 1 when one is not met",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        metavar="N",
        help="worker processes, runs shared among them (default: every usable core)",
    )
    parser.add_argument(
        "--detections",
        metavar="FILE",
        help="score these detections (JSON lines in `scan --json --detections`'s shape: file, line, detector, level) "
        "instead of loopwatch's own: another detector's, or an older run's",
    )
    parser.add_argument(
        "--write-expected",
        metavar="FILE",
        help="also write the episodes caught at warn and the honest runs quiet today to FILE "
        "(what tests/test_real_runs.py holds the line on)",
    )
    parser.add_argument(
        "--assign-split",
        nargs="+",
        metavar="PATH",
        help="print the split (dev or validation) of each PATH, as written in a label file, and exit",
    )


def _print_splits(labels_path: str | None, paths: list[str]) -> int:
    """``--assign-split``: each PATH's split. With a label file, a run it holds gets the split written
    there, and a PATH that names a file on disk is taken relative to the label file (a path as typed
    from the repository root, ``tests/corpus/x.gz``, hashed as typed would get another run's split)."""
    from monitor.labels import LabelError, load_labels, split_for

    written: dict[str, str] = {}
    base: Path | None = None
    if labels_path is not None:
        try:
            label_file = load_labels(labels_path)
        except LabelError as exc:
            return fail(f"eval: {exc}")
        base = label_file.path.resolve().parent
        written = {run.path: run.split for run in label_file.runs}
    for path in paths:
        key = path
        if base is not None and Path(path).exists():
            try:
                key = Path(path).resolve().relative_to(base).as_posix()
            except ValueError:
                key = path  # outside the label file's folder: as typed
        print(f"{written.get(key) or split_for(key)}\t{path}")
    return 0


def run(args: argparse.Namespace) -> int:
    from monitor.evaluate import Requirement, evaluate, load_detections
    from monitor.labels import LabelError, load_labels
    from monitor.scan_jobs import usable_cores

    if args.assign_split:
        return _print_splits(args.labels, args.assign_split)
    if args.labels is None:
        return fail("eval: name a label file (LABELS.toml), or --assign-split PATH…")
    try:
        config = config_from_args(args)
        requirements = [Requirement.parse(spec) for spec in args.require]
    except ConfigError as exc:
        return fail(str(exc))
    except ValueError as exc:
        return fail(f"--require: {exc}")
    if args.jobs is not None and args.jobs < 1:
        return fail("--jobs: expected a number of processes, 1 or more")
    try:
        labels = load_labels(args.labels)
        found = load_detections(args.detections) if args.detections else None
        result = evaluate(labels, config, args.split, args.jobs or usable_cores(), found)
    except LabelError as exc:
        return fail(f"eval: {exc}")
    checks: Checks = [(str(req), *req.check(result)) for req in requirements]
    args.preset, args.config = config.preset, str(config.path) if config.path else None
    if args.json:
        print(orjson.dumps(_as_json(result, args, checks)).decode())
    else:
        print(_as_text(result, args, checks))
    if args.write_expected:
        Path(args.write_expected).write_text(expected_text(result, args), encoding="utf-8")
    return 0 if all(ok for _, ok, _ in checks) else 1


def _as_json(result: Score, args: argparse.Namespace, checks: Checks) -> dict[str, Any]:
    from monitor.evaluate import LEVELS

    return {
        "labels": args.labels,
        "split": args.split,
        "preset": args.preset,
        "config": args.config,
        "runs": len(result.runs),
        "sources": {
            s.name: {
                "agent": s.agent,
                "model": s.model,
                "repository": s.repository,
                "path": s.path,
                "licence": s.licence,
                "selection": s.selection,
            }
            for s in result.sources.values()
        },
        "levels": {
            level.label: {
                "total": result.total(level).to_dict(),
                "agents": {a: t.to_dict() for a, t in sorted(result.tallies[level].items()) if a},
                "detectors": {kind: dict(sorted(c.items())) for kind, c in result.shares[level].items()},
            }
            for level in LEVELS
        },
        "findings": [finding.to_dict() for finding in result.findings],
        "borderline": [
            {"path": run.path, "agent": run.agent, "first_warning": hit.to_dict() if hit else None}
            for run, hit in result.borderline
        ],
        "unreadable": [
            {"path": run.path, "agent": run.agent, "reason": why} for run, why in result.unreadable
        ],
        "requirements": [{"spec": spec, "met": ok, "value": value} for spec, ok, value in checks],
    }


def _percent(n: int, of: int) -> str:
    return f"{n} ({100 * n / of:.0f}%)" if of else "-"


def _table(result: Score, level: Level) -> list[str]:
    tallies = result.tallies[level]
    agents = sorted(a for a in tallies if a)
    width = max([len(a) for a in agents] + [5])
    head = f"  {'agent':<{width}}  episodes  caught     late       missed     honest  false alarms  outside"
    lines = [f"at {level.label}:", head]
    for agent in [*agents, ""]:
        t = tallies[agent]
        lines.append(
            f"  {agent or 'total':<{width}}  {t.episodes:>8}  {_percent(t.caught, t.episodes):<9}  "
            f"{_percent(t.late, t.episodes):<9}  {_percent(t.missed, t.episodes):<9}  {t.honest:>6}  "
            f"{_percent(t.false_alarms, t.honest):<12}  {t.outside}"
        )
    return lines


def _hit(hit: Hit | None) -> str:
    return (
        f"{hit.detector} at {hit.line if hit.line is not None else '-'} ({hit.level.label})"
        if hit
        else "none"
    )


def _as_text(result: Score, args: argparse.Namespace, checks: Checks) -> str:
    from monitor.evaluate import LEVELS

    what = f"preset {args.preset}" + (f", config {args.config}" if args.config else "")
    lines = [
        f"loopwatch eval {args.labels} ({what}, split {args.split}): {len(result.runs)} run(s), "
        f"{len(result.borderline)} borderline, {len(result.unreadable)} unreadable"
    ]
    for level in LEVELS:
        lines += _table(result, level)
    for level in LEVELS:
        lines += _details(result, level)
    if result.borderline:
        lines.append("borderline (not scored): first warning")
        lines += [f"  {run.path}: {_hit(hit)}" for run, hit in result.borderline]
    if result.unreadable:
        lines.append("unreadable:")
        lines += [f"  {run.path}: {why}" for run, why in result.unreadable]
    for spec, ok, value in checks:
        shown = "cannot be measured (no runs for it)" if value is None else f"{value:.3f}"
        lines.append(f"require {spec}: {shown}: {'met' if ok else 'NOT MET'}")
    return "\n".join(lines)


def _details(result: Score, level: Level) -> list[str]:
    findings = [f for f in result.findings if f.level == level]
    lines = []
    if findings:
        lines.append(f"misses, late catches and false alarms at {level.label} (first warning):")
    for f in findings:
        episode = f" episode {f.episode[0]}-{f.episode[1]}" if f.episode else ""
        lines.append(f"  {f.kind:<11} {f.run.path}{episode}: {_hit(f.first)}")
    shares = result.shares[level]
    detectors = sorted(set(shares["true"]) | set(shares["false"]))
    if detectors:
        true_total, false_total = sum(shares["true"].values()), sum(shares["false"].values())
        lines.append(f"detectors' first warnings at {level.label}: true (in an episode) / false (honest run)")
        for name in detectors:
            lines.append(
                f"  {name:<18} {_percent(shares['true'][name], true_total):<10} "
                f"{_percent(shares['false'][name], false_total)}"
            )
    return lines


def expected_text(result: Score, args: argparse.Namespace) -> str:
    """The expected-results file: what is right today, to hold the line on."""
    from monitor.events import Level

    caught = sorted({f"{run.path}@{first}-{last}" for run, (first, last), _ in result.caught[Level.WARN]})
    quiet = sorted(run.path for run in result.quiet[Level.WARN])
    splits = ["dev", "validation"] if args.split == "all" else [args.split]
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    lines = [
        f"# Written by `loopwatch eval {args.labels} --split {args.split} --write-expected FILE` on {when}:",
        "# the stuck episodes caught at warn (PATH@FIRST-LAST) and the honest runs that stay below warn, today.",
        "# tests/test_real_runs.py fails when one of them is lost.  Rewrite it after an intended improvement.",
        f"splits = {orjson.dumps(splits).decode()}",
        "caught = [",
        *(f"  {orjson.dumps(item).decode()}," for item in caught),
        "]",
        "quiet = [",
        *(f"  {orjson.dumps(item).decode()}," for item in quiet),
        "]",
        "# runs no reader of loopwatch's can read yet (each new reader shrinks this list)",
        "unreadable = [",
        *(f"  {orjson.dumps(item).decode()}," for item in sorted(run.path for run, _ in result.unreadable)),
        "]",
    ]
    return "\n".join(lines) + "\n"
