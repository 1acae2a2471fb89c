"""What an agent pays to load loopwatch: the embedded client's import and one hook call.

Each case runs in a fresh interpreter, ``--runs`` times; the table gives the
median CPU time of the child (user + system, from ``getrusage``), the same
less a bare ``python -c pass`` (what loopwatch itself adds), and how many
modules were loaded (all, and ``monitor.*``).  The hook runs with no monitor
listening, the case an agent meets most when nobody is watching.

    python benchmarks/bench_imports.py [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

from common import ROOT, table

#: A PreToolUse event as Claude Code sends it.
HOOK_INPUT = json.dumps(
    {
        "hook_event_name": "PreToolUse",
        "session_id": "bench",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "t1",
        "cwd": "/",
    }
).encode()

#: Printed by each case after its work, to count what it loaded.
COUNT = (
    "import sys; print(len(sys.modules), sum(m.startswith('monitor') for m in sys.modules), file=sys.stderr)"
)

CASES = {
    "python -c pass": ("pass", b""),
    "import monitor.client": ("import monitor.client", b""),
    "hook, no monitor": (
        "import sys; sys.argv = ['loopwatch', 'hook', 'claude']\n"
        "from monitor.cli import main\n"
        "try:\n    main(sys.argv[1:])\nfinally:\n    " + COUNT.replace("; ", "\n    "),
        HOOK_INPUT,
    ),
}


def cpu_seconds(code: str, stdin: bytes, env: dict[str, str]) -> tuple[float, str]:
    """The child's CPU time running ``code`` (``python -c``), and what it wrote on stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, env=env, cwd=ROOT, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result.stderr.decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per case (default 30)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "LOOPWATCH_SOCKET": os.path.join(tmp, "none.sock"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.pop("LOOPWATCH_ADDRESS", None)
        rows, base = [], None
        for name, (code, stdin) in CASES.items():
            counted = code if "print(len(sys.modules)" in code else f"{code}\n{COUNT}"
            cpu_seconds(counted, stdin, env)  # warm the page cache and the .pyc files
            times, modules = [], ""
            for _ in range(args.runs):
                seconds, err = cpu_seconds(counted, stdin, env)
                times.append(seconds)
                modules = err.strip().splitlines()[-1] if err.strip() else "?"
            median = statistics.median(times) * 1000
            base = median if base is None else base
            total, ours = (modules.split() + ["?", "?"])[:2]
            rows.append((name, median, median - base, total, ours))
    print(
        table(
            f"CPU time per process, median of {args.runs} (ms)",
            ("case", "cpu ms", "over bare python", "modules", "monitor.*"),
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
