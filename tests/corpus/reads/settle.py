"""Settle the blind reads in this folder into tests/corpus/labels.toml: `python tests/corpus/reads/settle.py`.

Consensus (docs/real-runs.md, "How labels are settled"):
- one read: its label;
- two reads that agree: that label; stuck episodes are the union of the overlapping episodes;
- two that disagree: a third read decides by majority; all three different, or no third read yet: borderline,
  the note saying so.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "corpus" / "labels.toml"
LABELS = Path(__file__).resolve().parent
MANIFEST = json.loads((LABELS / "batch-manifest.json").read_text())
BY_NAME = {key.split("/", 1)[1]: path for key, path in MANIFEST.items()}


def fixture_path(name: str) -> str:
    hits = [p for p in (ROOT / "tests" / "fixtures").rglob(name) if p.is_file()]
    assert len(hits) == 1, (name, hits)
    return "../" + hits[0].relative_to(ROOT / "tests").as_posix()


def reads() -> dict[str, list[tuple[str, dict]]]:
    out: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for path in sorted(LABELS.glob("*.toml")):
        batch, reader = path.stem.rsplit("-", 1)
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            print(f"!! {path}: {exc}", file=sys.stderr)
            continue
        for run in data.get("run", []):
            key = f"{batch}/{run['file']}"
            corpus = MANIFEST.get(key) or BY_NAME.get(run["file"])
            target = corpus if corpus is not None else fixture_path(run["file"])
            out[target].append((reader, run))
    return out


def union(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    spans = sorted([list(x) for x in a] + [list(x) for x in b])
    merged: list[list[int]] = []
    for first, last in spans:
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return merged


def md_line_map(path: str) -> list[int] | None:
    """For an Aider history read with the first renderer (str.splitlines numbering): the file line
    (newline numbering) of each renderer line; None when the two agree."""
    import gzip

    full = ROOT / "tests" / "corpus" / path
    if not path.endswith(".md.gz") or not full.exists():
        return None
    text = gzip.decompress(full.read_bytes()).decode("utf-8", "replace")
    if len(text.splitlines()) == text.count("\n") + (not text.endswith("\n")):
        return None
    out, line = [], 1
    for piece in text.splitlines(keepends=True):
        out.append(line)
        line += piece.count("\n")
    return out


def renumber(path: str, runs: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    mapping = md_line_map(path)
    if mapping is None:
        return runs
    fixed = []
    for reader, run in runs:
        if run.get("episodes"):
            eps = [
                [mapping[min(a, len(mapping)) - 1], mapping[min(b, len(mapping)) - 1]]
                for a, b in run["episodes"]
            ]
            run = dict(
                run, episodes=eps, note=run.get("note", "") + " (lines renumbered from the first renderer's)"
            )
        fixed.append((reader, run))
    return fixed


def settle(runs: list[tuple[str, dict]]) -> dict:
    by_reader = {reader: run for reader, run in sorted(runs)}
    labels = [run["label"] for run in by_reader.values()]
    notes = " | ".join(
        f"{reader}: {run['label']}: {run.get('note', '')}" for reader, run in by_reader.items()
    )
    if len(labels) == 1:
        run = next(iter(by_reader.values()))
        return {"label": run["label"], "episodes": run.get("episodes", []), "reads": 1, "note": notes}
    counts = {label: labels.count(label) for label in labels}
    winner = max(counts, key=lambda label: counts[label])
    if counts[winner] < 2:
        return {
            "label": "borderline",
            "episodes": [],
            "reads": len(labels),
            "note": "readers disagree: " + notes,
        }
    episodes: list[list[int]] = []
    for run in by_reader.values():
        if run["label"] == winner == "stuck":
            episodes = union(episodes, run.get("episodes", []))
    return {"label": winner, "episodes": episodes, "reads": counts[winner], "note": notes}


def toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


#: Harness failures that many runs of one source repeat, as readers describe them: counted once (guide).
PATTERNS = {"No tool calls found": "harness rejects every reply: 'No tool calls found in the response'"}


def label_lines(settled: dict) -> str:
    lines = [f"label = {toml_str(settled['label'])}"]
    for words, pattern in PATTERNS.items():
        if settled["label"] == "stuck" and words in settled["note"]:
            lines.append(f"pattern = {toml_str(pattern)}")
    if settled["label"] == "stuck":
        lines.append("episodes = " + json.dumps(settled["episodes"]))
    lines.append(f"reads = {settled['reads']}")
    lines.append(f"note = {toml_str(settled['note'])}")
    return "\n".join(lines)


def main() -> int:
    settled = {path: settle(renumber(path, runs)) for path, runs in reads().items()}
    text = CORPUS.read_text()
    head, *blocks = text.split("\n[[run]]\n")
    seen = set()
    new_blocks = []
    for block in blocks:
        if re.search(r"^tuned = true$", block, re.M):
            continue  # written by an earlier merge: made again below
        # undo an earlier merge's label lines, so that later reads are settled again
        block = re.sub(r"^(label|episodes|reads|note|pattern) = .*\n?", "", block, flags=re.M).rstrip("\n")
        block = block + '\nlabel = "unlabelled"\n'
        path = re.search(r'^path = "(.*)"$', block, re.M).group(1)
        seen.add(path)
        if path in settled:
            block = re.sub(r'^label = "unlabelled"$', lambda _: label_lines(settled[path]), block, flags=re.M)
        new_blocks.append(block)
    for path, value in sorted(settled.items()):
        if path in seen or not path.startswith("../fixtures/"):
            continue  # a run dropped from the corpus after it was read
        source = path.split("/")[2]
        block = f'path = "{path}"\nsource = "{source}"\nsplit = "dev"\ntuned = true\npicked = "random"\n'
        new_blocks.append(block + label_lines(value) + "\n")
    CORPUS.write_text("\n[[run]]\n".join([head, *new_blocks]).rstrip("\n") + "\n")
    tally: dict[str, int] = defaultdict(int)
    for value in settled.values():
        tally[value["label"]] += 1
    print(f"{len(settled)} runs settled: {dict(tally)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
