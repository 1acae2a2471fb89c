"""Golden outputs: `loopwatch scan --json --detections` over everything in tests/, for behaviour-identical refactors.

    python benchmarks/golden.py write DIR     # record the outputs of this checkout in DIR
    python benchmarks/golden.py check DIR     # compare this checkout's outputs with DIR; exit 1 on a change

The outputs cover every scenario (tests/scenarios/*.jsonl), every real file in tests/fixtures and every
example under the three presets, each file scanned on its own, plus a 100,000-event synthetic trace
scanned with `--jobs 1` and `--jobs 2` under the default preset.  A refactor of detect/ that claims to
change nothing must leave every one of them byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRESETS = ("conservative", "balanced", "aggressive")


def _inputs() -> list[Path]:
    files = sorted((ROOT / "tests" / "scenarios").glob("*.jsonl"))
    files += sorted((ROOT / "monitor" / "examples").glob("*.jsonl"))
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*")):
        if path.is_file() and path.suffix in {".jsonl", ".json", ".traj", ".gz", ".zst"}:
            files.append(path)
    return files


def _scan(args: list[str], trace_dir: Path) -> bytes:
    # Every detection, not the episodes: a change in any repeat's detection shows.
    cmd = [sys.executable, "-m", "monitor", "scan", "--json", "--detections", "-q", *args]
    done = subprocess.run(cmd, capture_output=True, cwd=ROOT, check=False)
    # the trace lives in a fresh temporary directory: name it the same way every time
    out = done.stdout.replace(str(trace_dir).encode(), b"<trace-dir>")
    return b"exit %d\n" % done.returncode + out


def _jobs(trace: Path) -> list[tuple[str, list[str]]]:
    jobs = []
    for path in _inputs():
        rel = path.relative_to(ROOT)
        for preset in PRESETS:
            name = f"{rel}.{preset}".replace(os.sep, "__")
            jobs.append((name, ["--preset", preset, "--jobs", "1", str(rel)]))
    # the real runs of tests/corpus, all in one scan per preset (303 files: one process each would be slow)
    corpus = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests" / "corpus").rglob("*.gz"))]
    for preset in PRESETS:
        jobs.append((f"corpus.{preset}", ["--preset", preset, "--jobs", "1", *corpus]))
    for n in ("1", "2"):
        jobs.append((f"trace100k.jobs{n}", ["--jobs", n, str(trace)]))
    return jobs


def _outputs(trace_dir: Path) -> dict[str, bytes]:
    sys.path.insert(0, str(ROOT))
    from monitor.demo.synthetic import write_trace

    trace = trace_dir / "trace.jsonl"
    write_trace(str(trace), 100_000, 100, seed=7)
    jobs = _jobs(trace)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda job: _scan(job[1], trace_dir), jobs))
    return {name: out for (name, _), out in zip(jobs, results)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("write", "check"))
    parser.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loopwatch-golden-") as tmp:
        outputs = _outputs(Path(tmp))
    if args.mode == "write":
        args.dir.mkdir(parents=True, exist_ok=True)
        for name, out in outputs.items():
            (args.dir / name).write_bytes(out)
        print(f"{len(outputs)} outputs written to {args.dir}")
        return 0
    changed = []
    for name, out in outputs.items():
        old = args.dir / name
        if not old.exists() or old.read_bytes() != out:
            changed.append(name)
    digest = hashlib.sha256(b"".join(outputs[k] for k in sorted(outputs))).hexdigest()[:16]
    print(f"{len(outputs)} outputs, {len(changed)} changed (sha256 {digest})")
    for name in changed:
        print(f"  changed: {name}")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
