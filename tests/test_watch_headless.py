"""``loopwatch watch --headless`` end to end: a real subprocess, a real log being written, real SQLite.

The watcher's output is read with deadlines (never a sleep); it is stopped
with SIGTERM / SIGINT and must exit 0 with everything flushed to the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

DEADLINE = 20.0
ROOT = Path(__file__).resolve().parent.parent


def loop_lines(session: str, n: int, start: int = 0) -> str:
    out = []
    for i in range(start, start + n):
        out.append(
            json.dumps(
                {
                    "type": "tool_call",
                    "session": session,
                    "id": f"c{i}",
                    "name": "bash",
                    "args": {"cmd": "ls /nonexistent"},
                }
            )
        )
        out.append(
            json.dumps(
                {
                    "type": "tool_result",
                    "session": session,
                    "id": f"c{i}",
                    "content": "ls: cannot access '/nonexistent'",
                    "is_error": True,
                }
            )
        )
    return "\n".join(out) + "\n"


def env_for(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOPWATCH_CONFIG_DIR"] = str(tmp_path / "config")  # no user config file
    env["LOOPWATCH_DATA_DIR"] = str(tmp_path / "data")
    env.pop("LOOPWATCH_TOKEN", None)
    return env


class Watcher:
    """A running ``loopwatch watch --headless`` subprocess."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.stderr: list[str] = []
        self.stdout: list[str] = []

    @classmethod
    async def start(cls, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Watcher:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "monitor",
            "watch",
            "--headless",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env={**env_for(tmp_path), **(env or {})},
        )
        watcher = cls(proc)
        await watcher.err_until(lambda line: "Ctrl-C to stop" in line)
        return watcher

    async def err_until(self, predicate) -> str:
        async with asyncio.timeout(DEADLINE):
            while True:
                raw = await self.proc.stderr.readline()
                if not raw:
                    raise AssertionError(f"watcher exited early; stderr: {''.join(self.stderr)}")
                line = raw.decode()
                self.stderr.append(line)
                if predicate(line):
                    return line

    async def json_until(self, predicate) -> dict:
        async with asyncio.timeout(DEADLINE):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    raise AssertionError(f"watcher closed stdout; stderr: {''.join(self.stderr)}")
                self.stdout.append(raw.decode())
                record = json.loads(raw)
                if predicate(record):
                    return record

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        async with asyncio.timeout(DEADLINE):
            out, err = await self.proc.communicate()
        self.stdout.extend(out.decode().splitlines(keepends=True))
        self.stderr.extend(err.decode().splitlines(keepends=True))
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


@pytest.fixture
async def watchers():
    started: list[Watcher] = []

    async def start(tmp_path, *args, env=None) -> Watcher:
        watcher = await Watcher.start(tmp_path, *args, env=env)
        started.append(watcher)
        return watcher

    yield start
    for watcher in started:
        watcher.kill()
        await watcher.proc.wait()


async def test_headless_watcher_reports_a_live_loop_and_flushes_on_sigterm(tmp_path, watchers):
    """A log written while the watcher runs yields scan-identical JSON detections (plus ts) as they
    happen; SIGTERM exits 0 with every event, detection and the session row in the database."""
    logs = tmp_path / "logs"
    logs.mkdir()
    db = tmp_path / "lw.db"
    watcher = await watchers(tmp_path, "--json", "--detections", "--no-socket", "--db", str(db), str(logs))
    log = logs / "agent.jsonl"
    with open(log, "a") as f:
        f.write(json.dumps({"type": "session_start", "session": "live-1", "agent": "demo"}) + "\n")
        f.flush()
        f.write(loop_lines("live-1", 2))
        f.flush()
        f.write(loop_lines("live-1", 1, start=2))
        f.flush()
    first = await watcher.json_until(lambda r: r["detector"] == "exact_repeat")
    assert first["session"] == "live-1" and first["level"] == "warn" and first["count"] == 3
    assert first["file"] == str(log) and first["line"] == 6 and isinstance(first["ts"], float)
    with open(log, "a") as f:  # the loop goes on
        f.write(loop_lines("live-1", 2, start=3))
    await watcher.json_until(lambda r: r["detector"] == "exact_repeat" and r["count"] == 5)

    assert await watcher.stop(signal.SIGTERM) == 0
    assert "database flushed" in "".join(watcher.stderr)

    live = [json.loads(x) for x in watcher.stdout]
    for record in live:
        assert isinstance(record.pop("ts"), float)
    scan = subprocess.run(
        [sys.executable, "-m", "monitor", "scan", "--json", "--detections", str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
    )
    assert live == [json.loads(x) for x in scan.stdout.splitlines()]

    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM events WHERE session = 'live-1'").fetchone()[0] == 11
        # One loop: one episode row, a rung row and its first detection per rung (not a row per repeat).
        assert conn.execute("SELECT COUNT(*) FROM episodes WHERE session = 'live-1'").fetchone()[0] == 1
        rungs = conn.execute("SELECT COUNT(*) FROM episode_rungs WHERE session = 'live-1'").fetchone()[0]
        assert conn.execute("SELECT COUNT(*) FROM detections WHERE session = 'live-1'").fetchone()[0] == rungs
        assert 1 <= rungs < len(live)
        agent, level = conn.execute("SELECT agent, level FROM sessions WHERE id = 'live-1'").fetchone()
    assert agent == "demo" and level in ("warn", "critical", "terminate")


async def test_ctrl_c_replays_with_from_start_and_exits_cleanly(tmp_path, watchers):
    """--from-start replays an existing log (months old) and Ctrl-C (SIGINT) exits 0 with human output."""
    log = tmp_path / "old.jsonl"
    log.write_text(loop_lines("old-1", 3))
    months_ago = 1_600_000_000
    os.utime(log, (months_ago, months_ago))
    watcher = await watchers(tmp_path, "--from-start", "--no-socket", "--no-db", str(log))
    async with asyncio.timeout(DEADLINE):
        line = (await watcher.proc.stdout.readline()).decode()
    assert "WARN" in line and "exact_repeat" in line and f"{log}:5" in line
    assert await watcher.stop(signal.SIGINT) == 0
    assert "nothing recorded" in "".join(watcher.stderr)


async def test_agents_can_connect_to_the_watchers_socket(tmp_path, watchers):
    """The socket server runs inside watch: events sent by an agent over the Unix socket are detected."""
    sock = tmp_path / "lw.sock"
    watcher = await watchers(tmp_path, "--json", "--socket", str(sock), "--no-db")
    reader, writer = await asyncio.open_unix_connection(str(sock))
    writer.write(loop_lines("sock-1", 3).encode())
    await writer.drain()
    record = await watcher.json_until(lambda r: r["detector"] == "exact_repeat")
    assert record["session"] == "sock-1" and record["file"].startswith("socket:")
    writer.close()
    assert await watcher.stop() == 0
    assert not sock.exists(), "the socket file is removed on exit"


async def test_claude_and_codex_folders_are_watched_even_before_they_exist(tmp_path, watchers):
    """--claude / --codex follow the agents' transcript folders (from CLAUDE_CONFIG_DIR / CODEX_HOME),
    picking them up when they are created."""
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    watcher = await watchers(
        tmp_path,
        "--json",
        "--no-socket",
        "--no-db",
        "--claude",
        "--codex",
        env={"CLAUDE_CONFIG_DIR": str(claude), "CODEX_HOME": str(codex)},
    )
    for folder, session in (
        (claude / "projects" / "proj", "from-claude"),
        (codex / "sessions" / "2025" / "01", "from-codex"),
    ):
        folder.mkdir(parents=True)
        (folder / f"{session}.jsonl").write_text(loop_lines(session, 3))
    seen: set[str] = set()
    await watcher.json_until(lambda r: seen.add(r["session"]) or {"from-claude", "from-codex"} <= seen)
    assert await watcher.stop() == 0


def test_watch_rejects_bad_options(tmp_path):
    """Unknown formats and --listen without a token are usage errors (exit 2) with a message."""
    base = [sys.executable, "-m", "monitor", "watch", "--headless", "--no-db", "--no-socket"]
    bad = subprocess.run(
        base + ["--format", "nope", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
    )
    assert bad.returncode == 2 and "unknown format" in bad.stderr
    tcp = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "watch",
            "--headless",
            "--no-db",
            "--listen",
            "127.0.0.1:0",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
    )
    assert tcp.returncode == 2 and "token" in tcp.stderr


async def test_headless_json_prints_episodes_opened_escalated_closed(tmp_path, watchers):
    """watch --headless --json prints a loop as one episode: opened, escalated, closed (the session
    ended) -- not a line per repeat (docs/episodes.md)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    watcher = await watchers(tmp_path, "--json", "--no-socket", "--no-db", str(logs))
    log = logs / "agent.jsonl"
    with open(log, "a") as f:
        f.write(json.dumps({"type": "session_start", "session": "live-2", "agent": "demo"}) + "\n")
        f.write(loop_lines("live-2", 8))
        f.write(json.dumps({"type": "session_end", "session": "live-2", "status": "done"}) + "\n")
    await watcher.json_until(lambda r: r.get("change") == "closed")
    assert await watcher.stop(signal.SIGTERM) == 0
    records = [json.loads(x) for x in watcher.stdout]
    assert [r["change"] for r in records][0] == "opened" and records[-1]["change"] == "closed"
    assert {r["episode"] for r in records} == {1} and records[-1]["closed"] == "session ended"
    assert all(r["change"] in ("opened", "escalated", "closed") for r in records)
    assert len(records) < 8 and records[-1]["count"] >= 8
