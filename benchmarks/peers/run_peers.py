"""Run the peers' loop detectors, unmodified, on the same runs as `loopwatch eval`.

    bash benchmarks/peers/setup.sh                     # once: their own Python and Node packages
    python benchmarks/peers/run_peers.py LABELS.toml [--split validation] [--out DIR]

Each run of the label file is read by loopwatch's readers (the same events `loopwatch scan` sees) and
written as a neutral event stream; OpenHands' StuckDetector (openhands-sdk, `openhands_stuck.py`) and Gemini
CLI's LoopDetectionService (@google/gemini-cli-core, `gemini_loop.mjs`) read that stream and report where
they would have stopped the agent.  Their reports are written in `loopwatch scan --json --detections`'s shape (one
detection a line, level `warn`), which `loopwatch eval --detections FILE` scores like loopwatch's own.
The peers are installed outside loopwatch's dependencies, in benchmarks/peers/.env (see setup.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from monitor.events import Event, Kind  # noqa: E402
from monitor.scan import scan  # noqa: E402

ENV = HERE / ".env"
PEERS = {
    "openhands-stuck": [str(ENV / "venv" / "bin" / "python"), str(HERE / "openhands_stuck.py")],
    "gemini-loop": ["node", str(ENV / "node" / "gemini_loop.mjs")],
}
#: Keep the peers' libraries off the network (LiteLLM fetches a price list at import) and quiet.
PEER_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1", "NO_COLOR": "1"}


class Recorder:
    """Stands where scan's engine stands: keeps the events instead of detecting."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def process_many(self, events: list[Event]) -> list[Any]:
        self.events.extend(events)
        return []


def neutral(event: Event) -> dict[str, Any] | None:
    """The event as the peers' adapters read it (None: nothing a peer looks at)."""
    base = {"session": event.session, "line": event.line}
    if event.kind == Kind.TOOL_CALL:
        return base | {"kind": "tool_call", "id": event.call_id, "tool": event.tool, "args": event.args or {}}
    if event.kind == Kind.TOOL_RESULT:
        return base | {
            "kind": "tool_result",
            "id": event.call_id,
            "text": event.content,
            "is_error": event.is_error,
        }
    if event.kind == Kind.MESSAGE and event.role in ("user", "assistant"):
        return base | {
            "kind": "message",
            "role": event.role,
            "text": event.content,
            "prompt": event.role == "user",
        }
    return None


def export(path: Path) -> list[dict[str, Any]]:
    recorder = Recorder()
    scan([str(path)], engine=recorder)  # type: ignore[arg-type]
    return [n for n in map(neutral, recorder.events) if n is not None and n["line"] is not None]


def run_peer(name: str, stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = "".join(json.dumps(record) + "\n" for record in stream)
    env = os.environ | PEER_ENV
    done = subprocess.run(PEERS[name], input=text, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def load_runs(labels: Path, split: str, base: Path | None) -> list[Path]:
    import tomllib

    data = tomllib.loads(labels.read_text())
    runs = [r for r in data.get("run", []) if split == "all" or r.get("split", "dev") == split]
    return [(base or labels.parent) / r["path"] for r in runs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labels", type=Path)
    parser.add_argument("--split", default="all", choices=("dev", "validation", "all"))
    parser.add_argument("--out", type=Path, default=Path("peers-out"))
    parser.add_argument(
        "--base", type=Path, help="the runs' paths are relative to this (default: the label file's folder)"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # One stream for all runs, each session named after its run, so each peer starts once.
    stream: list[dict[str, Any]] = []
    runs: dict[str, tuple[Path, str]] = {}
    for index, path in enumerate(load_runs(args.labels, args.split, args.base)):
        for record in export(path):
            key = f"{index}:{record['session']}"
            runs[key] = (path, record["session"])
            stream.append(record | {"session": key})
    for name in PEERS:
        with (args.out / f"{name}.jsonl").open("w") as out:
            for hit in run_peer(name, stream):
                path, session = runs[hit["session"]]
                row = {"file": str(path), "line": hit["line"], "session": session, "detector": name}
                out.write(json.dumps(row | {"level": "warn"}) + "\n")
    print(f"detections written to {args.out}/: " + ", ".join(f"{n}.jsonl" for n in PEERS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
