"""The README's and docs/real-runs.md's detection tables, from `loopwatch eval` on the corpus.

    python benchmarks/real_runs_table.py [--labels tests/corpus/labels.toml] [--peers DIR]

Prints, for the development and the validation part, a Markdown table per agent: stuck episodes caught
at `warn` inside the episode, honest runs reaching `warn`, and runs not yet readable — for loopwatch
(`balanced` and `conservative`) and, with `--peers DIR` (the output of benchmarks/peers/run_peers.py),
for OpenHands' StuckDetector and Gemini CLI's LoopDetectionService on the same runs — and a table per
detector: which one gave each first warning, inside a stuck episode or on an honest run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = {"openhands-stuck": "OpenHands StuckDetector", "gemini-loop": "Gemini CLI LoopDetectionService"}


def evaluate(labels: Path, split: str, *extra: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "monitor", "eval", str(labels), "--split", split, "--json", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    return json.loads(done.stdout)


def cell(caught: int, of: int) -> str:
    return f"{caught} of {of} ({caught / of:.0%})" if of else "–"


def rows(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    warn = result["levels"]["warn"]
    out = {}
    for agent, tally in [*sorted(warn["agents"].items()), ("total", warn["total"])]:
        out[agent] = (cell(tally["caught"], tally["episodes"]), cell(tally["false_alarms"], tally["honest"]))
    return out


def table(labels: Path, split: str, peers: Path | None) -> str:
    columns = {
        "loopwatch `balanced`": evaluate(labels, split),
        "loopwatch `conservative`": evaluate(labels, split, "--preset", "conservative"),
    }
    for name, title in PEERS.items():
        if peers is not None and (peers / f"{name}.jsonl").is_file():
            columns[title] = evaluate(labels, split, "--detections", str(peers / f"{name}.jsonl"))
    cells = {title: rows(result) for title, result in columns.items()}
    agents = list(cells["loopwatch `balanced`"])
    head = "| agent | " + " | ".join(f"{t}: stuck caught · honest warned" for t in cells) + " |"
    lines = [head, "|---" * (len(cells) + 1) + "|"]
    for agent in agents:
        values = [" · ".join(cells[t].get(agent, ("–", "–"))) for t in cells]
        lines.append(f"| {agent} | " + " | ".join(values) + " |")
    first = columns["loopwatch `balanced`"]
    lines.append("")
    lines.append(
        f"{first['runs']} labelled runs read; {len(first['unreadable'])} not readable by loopwatch yet."
    )
    lines += ["", by_detector(first)]
    return "\n".join(lines)


def by_detector(result: dict[str, Any]) -> str:
    """Which detector gave each first warning (`balanced`): the first inside each stuck episode caught
    (every episode, before runs that repeat one harness failure count once), and each honest run's first."""
    found = result["levels"]["warn"]["detectors"]
    inside, honest = found.get("true", {}), found.get("false", {})
    lines = [
        "| detector (`balanced`) | stuck episodes it warned first | honest runs it warned first |",
        "|---|---|---|",
    ]
    for name in sorted(set(inside) | set(honest)):
        lines.append(f"| `{name}` | {inside.get(name, 0)} | {honest.get(name, 0)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=ROOT / "tests" / "corpus" / "labels.toml")
    parser.add_argument("--peers", type=Path, help="the output folder of benchmarks/peers/run_peers.py")
    args = parser.parse_args(argv)
    for split in ("dev", "validation"):
        print(f"### {split}\n")
        print(table(args.labels, split, args.peers))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
