"""The built-in demo: simulated agents run as real subprocesses.

``loopwatch demo`` calls :func:`start_agents` to launch one process per
scenario (some honest, some looping; see :mod:`monitor.demo.scenarios`), each
writing ``<directory>/<scenario>.jsonl`` and following its inbox
``<scenario>.jsonl.inbox.jsonl``; :func:`stop_agents` ends them.  Nothing here
imports Textual.

    procs = start_agents(tmpdir)            # all scenarios, a few events a second
    ...                                     # watch tmpdir (or pass socket=...)
    stop_agents(procs)

The bundled example logs (``monitor/examples/*.jsonl``, see :data:`EXAMPLES`)
come from the same scenarios: ``python -c "from monitor.demo import write_examples,
examples_dir; write_examples(examples_dir())"`` regenerates them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from monitor.demo.scenarios import SCENARIOS

#: Every scenario, honest ones first (what ``loopwatch demo`` runs by default).
DEFAULT_SCENARIOS: tuple[str, ...] = tuple(sorted(SCENARIOS, key=lambda n: (not SCENARIOS[n].honest, n)))


def agent_command(
    scenario: str,
    log: str | Path,
    *,
    socket: str | Path | None = None,
    interval: float | None = None,
    seed: int | None = None,
    echo: bool = False,
    parent: int | None = None,
    python: str | None = None,
    session: str | None = None,
) -> list[str]:
    """The command line that runs one simulated agent (``session``: its id; default the log's stem)."""
    if scenario not in SCENARIOS:
        raise ValueError(
            f"unknown demo scenario {scenario!r} (expected one of: {', '.join(sorted(SCENARIOS))})"
        )
    command = [
        python or sys.executable,
        "-m",
        "monitor.demo.agent",
        "--scenario",
        scenario,
        "--log",
        str(log),
    ]
    if socket is not None:
        command += ["--socket", str(socket)]
    if interval is not None:
        command += ["--interval", str(interval)]
    if seed is not None:
        command += ["--seed", str(seed)]
    if echo:
        command.append("--echo")
    if parent is not None:
        command += ["--parent", str(parent)]
    if session is not None:
        command += ["--session", session]
    return command


def start_agents(
    directory: str | Path,
    scenarios: Iterable[str] | None = None,
    *,
    socket: str | Path | None = None,
    interval: float | None = None,
    seed: int | None = None,
    echo: bool = False,
    stdout: int | IO | None = subprocess.DEVNULL,
    stderr: int | IO | None = subprocess.DEVNULL,
    run_tag: str = "",
) -> list[subprocess.Popen]:
    """Start one agent process per scenario, logging to ``<directory>/<scenario>.jsonl``.

    With ``socket`` the agents also stream their events to a monitor listening
    there; with ``echo`` they print each record to ``stdout``.  Each process is its own process group (a Ctrl-C in the monitor's
    terminal does not reach them) and exits by itself if this process dies.  ``run_tag``: appended to
    each session id (``exact_repeat-142502``), so that runs recorded in one database stay apart."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    procs = []
    for n, scenario in enumerate(scenarios or DEFAULT_SCENARIOS):
        log = directory / f"{scenario}.jsonl"
        command = agent_command(
            scenario,
            log,
            socket=socket,
            interval=interval,
            seed=None if seed is None else seed + n,
            echo=echo,
            parent=os.getpid(),
            session=f"{scenario}-{run_tag}" if run_tag else None,
        )
        procs.append(
            subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                cwd=str(directory),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        )
    return procs


def stop_agents(procs: Sequence[subprocess.Popen], timeout: float = 5.0) -> list[int | None]:
    """SIGTERM every agent still running (they end their sessions), SIGKILL any that
    has not exited within ``timeout`` seconds; return their exit codes."""
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    codes: list[int | None] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
    return codes


#: The bundled example logs in ``monitor/examples/``: file name -> (scenario, steps, inject before step).
EXAMPLES: dict[str, tuple[str, int, int]] = {
    "honest-edit-test.jsonl": ("edit_test", 40, 0),
    "honest-polling.jsonl": ("poll_progress", 40, 0),
    "loop-exact-repeat.jsonl": ("exact_repeat", 12, 0),
    "loop-ab-cycle.jsonl": ("ab_cycle", 12, 0),
    "loop-same-error.jsonl": ("same_error", 12, 0),
    "loop-test-fix-then-inject.jsonl": ("stuck_tests", 30, 10),
}


def examples_dir() -> Path:
    """Where the bundled example logs are (``loopwatch scan`` them)."""
    return Path(__file__).resolve().parent.parent / "examples"


def write_examples(directory: str | Path) -> list[Path]:
    """(Re)generate the example logs deterministically into ``directory``."""
    from monitor.demo.agent import main

    directory = Path(directory)
    written = []
    for n, (name, (scenario, steps, inject_at)) in enumerate(EXAMPLES.items()):
        path = directory / name
        argv = [
            "--scenario",
            scenario,
            "--log",
            str(path),
            "--instant",
            "--steps",
            str(steps),
            "--seed",
            str(100 + n),
            "--start",
            str(1_750_000_000 + 3600 * n),
        ]
        if inject_at:
            argv += ["--inject-at", str(inject_at)]
        main(argv)
        written.append(path)
    return written


__all__ = [
    "DEFAULT_SCENARIOS",
    "EXAMPLES",
    "SCENARIOS",
    "agent_command",
    "examples_dir",
    "start_agents",
    "stop_agents",
    "write_examples",
]
