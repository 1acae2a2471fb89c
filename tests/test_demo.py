"""The demo agents: real processes whose loops the engine catches and whose behaviour an inject changes."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from monitor.config import build_config
from monitor.demo import DEFAULT_SCENARIOS, SCENARIOS, agent_command, start_agents, stop_agents
from monitor.detect.engine import Engine
from monitor.events import Kind, Level
from monitor.formats.lines import LineDecoder
from monitor.scan import scan

DEADLINE = 60.0  # generous: the machine may be busy; nothing here waits this long when healthy


class LogFollower:
    """Feeds a growing native log through a real Engine, waking on the agent's stdout."""

    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc = proc
        self.log = log
        self.offset = 0
        self.partial = b""
        self.decoder = LineDecoder(str(log))
        self.engine = Engine()
        self.events = []
        self.detections = []
        self.lineno = 0
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)

    def _pull(self) -> None:
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        for raw in lines:
            self.lineno += 1
            events, problem = self.decoder.feed(raw, self.lineno)
            assert problem is None, str(problem)
            for event in events:
                self.events.append(event)
                self.detections.extend(self.engine.process(event).detections)

    def until(self, predicate, what: str) -> None:
        """Process the log as it grows until ``predicate(self)`` holds (or fail at the deadline).

        Waits on the agent's stdout (it echoes each record as it writes it), not on a timer."""
        deadline = time.monotonic() + DEADLINE
        while True:
            self._pull()
            if predicate(self):
                return
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out waiting for {what}"
            if self.selector.select(timeout=remaining):
                if not os.read(self.proc.stdout.fileno(), 65536):  # EOF: the agent exited
                    self._pull()
                    assert predicate(self), f"agent exited before {what}"
                    return


def inject(log: Path, text: str, session: str) -> None:
    """Append a control message to the agent's inbox, as the monitor's InboxChannel does."""
    with open(str(log) + ".inbox.jsonl", "ab") as inbox:
        inbox.write(
            orjson.dumps({"type": "inject", "session": session, "text": text, "ts": time.time()}) + b"\n"
        )


def control(log: Path, kind: str, session: str) -> None:
    with open(str(log) + ".inbox.jsonl", "ab") as inbox:
        inbox.write(orjson.dumps({"type": kind, "session": session, "ts": time.time()}) + b"\n")


def spawn(scenario: str, log: Path, *extra: str) -> subprocess.Popen:
    command = agent_command(scenario, log, interval=0.02, seed=5, echo=True) + ["--think", "0.05", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def generate(tmp_path: Path, scenarios: list[str], steps: int) -> None:
    """Run each agent with --instant for ``steps`` steps, all in one child process (fast)."""
    runs = [
        [
            "--scenario",
            s,
            "--log",
            str(tmp_path / f"{s}.jsonl"),
            "--seed",
            str(n),
            "--instant",
            "--steps",
            str(steps),
        ]
        for n, s in enumerate(scenarios)
    ]
    subprocess.run(
        [sys.executable, "-c", f"from monitor.demo.agent import main\nfor argv in {runs!r}: main(argv)"],
        check=True,
    )


@pytest.mark.parametrize("scenario", ["exact_repeat", "same_error", "stuck_tests"])
def test_looping_agent_is_caught_then_changes_course_on_inject(tmp_path, scenario):
    """A looping agent process reaches warn through the engine; an inject in its inbox makes it
    write the injected text as a user message and then do honest work that raises nothing."""
    log = tmp_path / f"{scenario}.jsonl"
    proc = spawn(scenario, log)
    try:
        follow = LogFollower(proc, log)
        follow.until(lambda f: any(d.level >= Level.WARN for d in f.detections), "a warning")
        first = follow.events[0]
        assert first.kind is Kind.SESSION_START and first.pid == proc.pid

        text = "loopwatch: you are looping. Read the docs and try a different approach."
        inject(log, text, scenario)
        follow.until(
            lambda f: any(
                e.kind is Kind.MESSAGE and e.role == "user" and e.content == text for e in f.events
            ),
            "the injected message in the log",
        )
        seen = len(follow.events)
        warned = len([d for d in follow.detections if d.level >= Level.WARN])
        follow.until(
            lambda f: sum(e.kind is Kind.TOOL_CALL for e in f.events[seen:]) >= 12,
            "twelve tool calls after the inject",
        )
        after = follow.events[seen:]
        calls = [(e.tool, json.dumps(e.args, sort_keys=True)) for e in after if e.kind is Kind.TOOL_CALL]
        assert len(set(calls)) == len(calls), "the agent still repeats calls after the inject"
        assert len([d for d in follow.detections if d.level >= Level.WARN]) == warned

        control(log, "kill", scenario)
        assert proc.wait(timeout=DEADLINE) == 0
        follow._pull()
        assert follow.events[-1].kind is Kind.SESSION_END and follow.events[-1].status == "killed"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_start_and_stop_agents(tmp_path):
    """start_agents launches one process per scenario writing <scenario>.jsonl with its pid;
    stop_agents ends them with SIGTERM and each session ends 'terminated'."""
    scenarios = ["poll_progress", "monologue"]
    procs = start_agents(tmp_path, scenarios, interval=0.02, seed=1, echo=True, stdout=subprocess.PIPE)
    try:
        for proc, scenario in zip(procs, scenarios):
            log = tmp_path / f"{scenario}.jsonl"
            proc_stdout_follow = LogFollower(proc, log)
            proc_stdout_follow.until(lambda f: len(f.events) >= 3, f"{scenario} to start")
            assert proc_stdout_follow.events[0].pid == proc.pid
            assert proc_stdout_follow.events[0].meta["scenario"] == scenario
    finally:
        codes = stop_agents(procs, timeout=DEADLINE)
    assert codes == [0, 0]
    for scenario in scenarios:
        last = orjson.loads((tmp_path / f"{scenario}.jsonl").read_bytes().splitlines()[-1])
        assert last == {**last, "type": "session_end", "status": "terminated"}


def test_stale_inbox_messages_are_ignored(tmp_path):
    """A kill left in the inbox by a previous run does not stop a new agent."""
    log = tmp_path / "paging.jsonl"
    control(log, "kill", "paging")
    proc = spawn("paging", log, "--steps", "6")
    follow = LogFollower(proc, log)
    follow.until(lambda f: f.events and f.events[-1].kind is Kind.SESSION_END, "the end of 6 steps")
    assert proc.wait(timeout=DEADLINE) == 0
    assert follow.events[-1].status == "done"


def test_agent_exits_when_its_parent_dies(tmp_path):
    """An agent whose launcher died (reparented) ends its session 'orphaned' and exits."""
    log = tmp_path / "exact_repeat.jsonl"
    command = agent_command("exact_repeat", log, interval=0.02, echo=True)
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, subprocess; subprocess.Popen({command!r} + ['--parent', str(os.getpid())])",
        ],
        stdout=subprocess.PIPE,
    )
    assert launcher.wait(timeout=DEADLINE) == 0
    # The agent inherited the launcher's stdout: EOF there means the agent has exited too.
    follow = LogFollower(launcher, log)
    try:
        follow.until(
            lambda f: f.events and f.events[-1].kind is Kind.SESSION_END, "the orphaned agent to stop"
        )
        assert follow.events[-1].status == "orphaned"
    finally:
        follow._pull()
        if follow.events:  # never leave the agent behind, whatever happened
            try:
                os.kill(follow.events[0].pid, 9)
            except ProcessLookupError:
                pass


def test_socket_mode_streams_events_and_obeys_control(tmp_path):
    """With --socket the agent streams its events to a monitor socket and obeys an inject
    and a kill sent back on the same connection."""
    path = str(tmp_path / "lw.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    received: list[dict] = []
    injected = threading.Event()
    killed = threading.Event()

    def send(conn: socket.socket, data: bytes) -> None:
        # The agent may be gone already (it exits once killed): what it sent
        # before that still has to be read, so a broken pipe ends nothing.
        try:
            conn.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def serve() -> None:
        conn, _ = server.accept()
        buffer = b""
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                *lines, buffer = (buffer + data).split(b"\n")
                for raw in lines:
                    if not raw.strip():
                        continue
                    message = orjson.loads(raw)
                    if message.get("type") == "hello":
                        send(conn, b'{"type":"welcome","server":"loopwatch","version":"test"}\n')
                        continue
                    received.append(message)
                    calls = sum(m.get("type") == "tool_call" for m in received)
                    if calls == 3 and not injected.is_set():
                        injected.set()
                        send(
                            conn,
                            orjson.dumps({"type": "inject", "session": "sock", "text": "over the socket"})
                            + b"\n",
                        )
                    if (
                        any(
                            m.get("role") == "user" and m.get("content") == "over the socket"
                            for m in received
                        )
                        and calls >= 6
                        and not killed.is_set()
                    ):
                        killed.set()
                        send(conn, b'{"type":"kill","session":"sock"}\n')

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    log = tmp_path / "sock.jsonl"
    proc = spawn("exact_repeat", log, "--socket", path)
    try:
        assert proc.wait(timeout=DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    thread.join(timeout=DEADLINE)
    server.close()
    kinds = [m["type"] for m in received]
    assert kinds[0] == "session_start" and received[0]["pid"] == proc.pid
    assert any(
        m["type"] == "message" and m["role"] == "user" and m["content"] == "over the socket" for m in received
    )
    assert received[-1]["type"] == "session_end" and received[-1]["status"] == "killed"
    # The log holds the same events as the socket received.
    logged = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    assert [r["type"] for r in logged] == kinds


def test_honest_scenarios_never_warn(tmp_path):
    """A thousand steps of each honest agent (generated instantly) raise nothing
    at warn, not even with the aggressive preset (which warned them ~150 times
    when it flagged a call's first repeat before its result was in, and
    compared status reports across the work between them)."""
    honest = sorted(n for n, s in SCENARIOS.items() if s.honest)
    generate(tmp_path, honest, 1000)
    aggressive = build_config({"preset": "aggressive"})
    for scenario in honest:
        report = scan([str(tmp_path / f"{scenario}.jsonl")])
        assert report.events > 1500
        assert report.worst < Level.WARN, [(d.detector, d.line, d.message) for d in report.detections]
        report = scan([str(tmp_path / f"{scenario}.jsonl")], aggressive)
        assert report.worst < Level.WARN, [(d.detector, d.line, d.message) for d in report.detections]


def test_all_agents_together_only_loops_warn(tmp_path):
    """Every scenario in one engine (as the demo runs them): each looping agent warns within its
    first 25 lines, honest agents never do — not even across sessions (swarm)."""
    generate(tmp_path, list(DEFAULT_SCENARIOS), 200)
    report = scan([str(tmp_path)])
    warned = {}
    for d in report.detections:
        if d.level >= Level.WARN:
            warned.setdefault(d.session, d.line)
    assert set(warned) == {n for n, s in SCENARIOS.items() if not s.honest}
    assert max(warned.values()) <= 25


def test_bundled_examples_are_reproducible_and_labelled(tmp_path):
    """monitor/examples/ holds what write_examples generates; honest examples scan clean (exit 0),
    each loop example reaches warn, and scanning the folder exits 1."""
    from monitor.demo import EXAMPLES, examples_dir, write_examples

    bundled = examples_dir()
    assert sorted(p.name for p in bundled.glob("*.jsonl")) == sorted(EXAMPLES)
    write_examples(tmp_path)
    for name in EXAMPLES:
        assert (tmp_path / name).read_bytes() == (bundled / name).read_bytes(), (
            f"{name} is stale: regenerate with write_examples(examples_dir())"
        )
    for name in EXAMPLES:
        report = scan([str(bundled / name)])
        assert report.problem_count == 0
        assert (report.worst >= Level.WARN) == name.startswith("loop-"), name
    env = {**os.environ, "LOOPWATCH_CONFIG_DIR": os.devnull + "-no-config"}
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "scan", str(bundled)], capture_output=True, text=True, env=env
    )
    assert result.returncode == 1 and "loop-exact-repeat" in result.stdout


async def test_a_demo_agent_that_is_killed_is_reaped_not_left_a_zombie(tmp_path):
    """The demo collects its agents' exit status while it runs (a zombie stayed until the demo exited)."""
    import asyncio
    import signal

    from monitor.commands.demo import DemoRun
    from monitor.config import Config

    run = DemoRun(Config(), db=str(tmp_path / "demo.db"))
    try:
        async with run.running():
            victim = run.processes[0]
            os.kill(victim.pid, signal.SIGKILL)
            async with asyncio.timeout(30):
                while Path(f"/proc/{victim.pid}").exists() and victim.returncode is None:
                    await asyncio.sleep(0.05)  # polling the process table, bounded
            assert victim.returncode == -signal.SIGKILL
            assert not Path(f"/proc/{victim.pid}").exists()
    finally:
        run.cleanup()


async def test_a_demo_recorded_again_into_the_same_database_keeps_its_runs_apart(tmp_path):
    """`demo --db` twice: the second run's sessions get their own ids instead of joining the first's."""
    import asyncio
    import sqlite3

    from monitor.commands.demo import DemoRun
    from monitor.config import Config
    from monitor.hub.reads import sessions_heard

    async def sessions_of(run: DemoRun) -> set[str]:
        async with run.running() as hub:
            async with asyncio.timeout(30):
                while len(sessions_heard(hub)) < len(run.processes):
                    await asyncio.sleep(0.05)  # polling for the agents' first records, bounded
            found = set(sessions_heard(hub))  # (the earlier run's are shown too, closed)
        run.cleanup()
        return found

    db = tmp_path / "demo.db"
    first = DemoRun(Config(), db=str(db))
    assert first.run_tag == ""
    ids = await sessions_of(first)
    second = DemoRun(Config(), db=str(db))
    assert second.run_tag
    again = await sessions_of(second)
    with sqlite3.connect(db) as connection:
        stored = {row[0] for row in connection.execute("SELECT id FROM sessions")}
    assert again and not again & ids and again <= stored
    assert all(name.endswith(f"-{second.run_tag}") for name in again)
