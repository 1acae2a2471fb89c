"""Leave-one-source-out check of a detection change, on the development part only.

Usage::

    loopwatch eval tests/corpus/labels.toml --split dev --json > before.json
    # ... change a rule ...
    loopwatch eval tests/corpus/labels.toml --split dev --json > after.json
    python tests/corpus/compare.py before.json after.json --motivated aider,openclaw-glm5

Prints, per source of the development part, the stuck episodes caught inside the episode
(at `warn` and at `terminate`) and the honest runs warned, before and after, then the same
summed over the sources that motivated the rule and over all the *other* sources: a rule
that generalises helps (or at least does not hurt) outside the sources that showed it.
Episodes are counted one by one here (a run pattern is not folded into one as the eval's
totals do). The script reads only the two eval outputs and the dev entries of the label file;
it refuses an eval output of any split but ``dev``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

LABELS = Path(__file__).with_name("labels.toml")
LEVELS = ("warn", "terminate")


def dev_runs(labels: Path) -> dict[str, dict]:
    """The labelled runs of the development part, by path."""
    data = tomllib.loads(labels.read_text(encoding="utf-8"))
    return {
        run["path"]: run
        for run in data.get("run", [])
        if run.get("split") == "dev" and run.get("label") in ("stuck", "honest")
    }


def tally(result: dict, runs: dict[str, dict]) -> dict[tuple[str, str], dict[str, int]]:
    """(source, level) -> episodes, caught, honest, warned."""
    if result.get("split") != "dev":
        sys.exit(f"compare.py: an eval of split {result.get('split')!r}; only dev may be read")
    bad: dict[str, set[tuple[str, object]]] = defaultdict(set)
    for finding in result["findings"]:
        episode = finding.get("episode")
        bad[finding["level"]].add((finding["path"], tuple(episode) if episode else None))
    out: dict[tuple[str, str], dict[str, int]] = {}
    for path, run in runs.items():
        for level in LEVELS:
            row = out.setdefault((run["source"], level), defaultdict(int))
            if run["label"] == "honest":
                row["honest"] += 1
                row["warned"] += (path, None) in bad[level]
                continue
            for episode in run.get("episodes", []):
                row["episodes"] += 1
                row["caught"] += (path, tuple(episode)) not in bad[level]
    return out


def _cell(before: dict[str, int], after: dict[str, int]) -> str:
    caught = f"{before['caught']}->{after['caught']}/{after['episodes']}"
    warned = f"{before['warned']}->{after['warned']}/{after['honest']}"
    return f"{caught:>12} {warned:>10}"


def _sum(rows: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for row in rows:
        for key, value in row.items():
            total[key] += value
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--motivated", default="", help="comma-separated sources that showed the rule")
    parser.add_argument("--labels", type=Path, default=LABELS)
    args = parser.parse_args(argv)
    runs = dev_runs(args.labels)
    before = tally(json.loads(args.before.read_text()), runs)
    after = tally(json.loads(args.after.read_text()), runs)
    motivated = {name for name in args.motivated.split(",") if name}
    sources = sorted({source for source, _ in after})
    print(f"{'source':34} {'warn: caught':>12} {'warned':>10}   {'terminate: caught':>12} {'warned':>10}")
    for source in sources:
        mark = "*" if source in motivated else " "
        cells = "   ".join(_cell(before[source, lv], after[source, lv]) for lv in LEVELS)
        print(f"{mark}{source:33} {cells}")
    for name, keep in (("motivated (*)", True), ("other sources", False)):
        group = [s for s in sources if (s in motivated) == keep]
        cells = "   ".join(
            _cell(_sum([before[s, lv] for s in group]), _sum([after[s, lv] for s in group])) for lv in LEVELS
        )
        print(f" {name:33} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
