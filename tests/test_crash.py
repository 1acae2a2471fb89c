"""SIGKILL the monitor at random points while agents write (issue 14).

A real ``loopwatch watch --headless --json`` subprocess with ``auto_inject``
on, real agents on the bundled client (threads of this process, real Unix
sockets) looping so that detections and automatic nudges keep coming.  The
monitor is killed with SIGKILL after a random number of printed detections,
restarted on the same database, killed again...  After each kill:

* the database passes ``PRAGMA integrity_check``;
* every detection the monitor printed is in the database (it prints only
  after the commit);

and at the end, after a last start:

* every nudge that reached an agent has its ``inject`` action row (actions are
  recorded before they are carried out);
* no action is left ``pending`` (a start reconciles the interrupted ones).

The random points come from a seeded generator; the seed is in the failure
message.  Waiting is polling with deadlines, never a sleep.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from monitor.client import LoopwatchClient
from monitor.store import Store
from tests.socketkit import short_socket_path

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 60.0
ROUNDS = 4


def wait_until(predicate, what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # polling a condition with a deadline


class Monitor:
    """One ``watch --headless --json`` run; its output is read by threads."""

    def __init__(self, tmp_path: Path, db: Path, sock: Path):
        env = {
            **os.environ,
            "LOOPWATCH_CONFIG_DIR": str(tmp_path / "config"),
            "LOOPWATCH_DATA_DIR": str(tmp_path / "data"),
        }
        env.pop("LOOPWATCH_TOKEN", None)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "monitor",
                "watch",
                "--headless",
                "--json",
                "--db",
                str(db),
                "--socket",
                str(sock),
                "--min-level",
                "notice",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.printed: list[dict] = []
        self.stderr: list[str] = []
        self.ready = threading.Event()
        self.readers = [
            threading.Thread(target=self._out, daemon=True),
            threading.Thread(target=self._err, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _out(self) -> None:
        for raw in self.proc.stdout:
            try:
                self.printed.append(json.loads(raw))
            except ValueError:  # a line cut by the SIGKILL
                pass

    def _err(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.stderr.append(line)
            if "Ctrl-C to stop" in line:
                self.ready.set()

    def kill(self) -> list[dict]:
        self.proc.kill()
        self.proc.wait(DEADLINE)
        for reader in self.readers:  # everything it wrote before dying
            reader.join(DEADLINE)
        return list(self.printed)


class Agent:
    """A looping agent on the bundled client: the same failing call over and over,
    a new session now and then; it keeps every control message it receives."""

    def __init__(self, name: str, sock: Path):
        self.name = name
        self.received: list[dict] = []
        self.client = LoopwatchClient(
            agent=name,
            session=f"{name}-0",
            socket_path=sock,
            backoff_max=0.2,
            on_control=self.received.append,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        episode = 0
        while not self.stop.is_set():
            session = f"{self.name}-{episode}"
            self.client.session_start(session=session)
            for _ in range(12):
                if self.stop.is_set():
                    break
                call = self.client.tool_call("bash", {"cmd": "ls /missing"}, session=session)
                self.client.tool_result(call, "ls: cannot access '/missing'", is_error=True, session=session)
                self.stop.wait(0.01)  # an agent's pace, not a wait for work
            self.client.session_end(session=session)
            episode += 1


def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text("[control]\nauto_inject = true\n")
    db = tmp_path / "monitor.db"
    sock = short_socket_path(tmp_path)
    agents: list[Agent] = []
    printed_total = 0
    try:
        for round_ in range(ROUNDS):
            monitor = Monitor(tmp_path, db, sock)
            assert monitor.ready.wait(DEADLINE), "".join(monitor.stderr)
            if not agents:
                agents = [Agent(f"agent{i}", sock) for i in range(4)]
            target = rng.randint(1, 12)
            # The first round also waits for a nudge to reach an agent (what the end
            # checks): detections print at once on an idle store, and a loaded
            # machine could otherwise end every round before the first inject.
            wait_until(
                lambda: (
                    len(monitor.printed) >= target
                    and (round_ > 0 or any(m.get("type") == "inject" for a in agents for m in a.received))
                ),
                f"{target} episode changes (seed {seed}, round {round_}); stderr: {monitor.stderr[-5:]}",
            )
            printed = monitor.kill()
            printed_total += len(printed)
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"seed {seed}"
                # What a script read (an episode opened, escalated or closed) is in the database:
                # its rung row, or its episode's row closed.
                rungs = Counter(conn.execute("SELECT session, ts, level FROM episode_rungs"))
                closed = Counter(conn.execute("SELECT session, closed FROM episodes WHERE state = 'closed'"))
            for record in printed:
                if record["change"] == "closed":
                    key = (record["session"], record["closed"])
                    assert closed[key] > 0, f"printed but not stored (seed {seed}, round {round_}): {key}"
                    continue
                key = (record["session"], record["ts"], record["peak"])
                assert rungs[key] > 0, f"printed but not stored (seed {seed}, round {round_}): {key}"
    finally:
        for agent in agents:
            agent.stop.set()
        for agent in agents:
            agent.thread.join(DEADLINE)
            agent.client.close(0.5)
    assert printed_total >= ROUNDS
    with Store(db) as store:  # a last start reconciles what the last kill interrupted
        injects = Counter()
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            for session, text in conn.execute("SELECT session, text FROM actions WHERE kind = 'inject'"):
                injects[(session, text)] += 1
            pending = conn.execute("SELECT count(*) FROM actions WHERE outcome = 'pending'").fetchone()[0]
    received = Counter(
        (m["session"], m["text"]) for agent in agents for m in agent.received if m.get("type") == "inject"
    )
    assert received, f"no nudge reached an agent (seed {seed})"
    for key, count in received.items():
        assert injects[key] >= count, f"a nudge reached the agent without its action row: {key} (seed {seed})"
    assert pending == 0, f"seed {seed}"
    assert store.reconciled is not None
