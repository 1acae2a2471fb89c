"""``loopwatch doctor``: real sockets, settings files, transcripts, databases.

A real monitor (hub + socket server, and an OTLP receiver) runs on this test's
loop while ``diagnose`` runs in a thread; the no-monitor case runs the real
command as a subprocess and checks its exit status.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.commands import doctor
from monitor.commands.install_hook import install, write_atomically
from monitor.hooks import state_dir
from monitor.sources.otlp import OtlpReceiver
from monitor.store import Store
from tests.socketkit import running_monitor, short_socket_path
from tests.test_hooks import PRE_TOOL, run_hook_async

ROOT = Path(__file__).resolve().parent.parent
HOOK = f"{sys.executable} -m monitor hook"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Claude's and Codex's homes, the state dir and a project, all under tmp_path."""
    places = {name: tmp_path / name for name in ("claude", "codex", "state", "project")}
    for path in places.values():
        path.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(places["claude"]))
    monkeypatch.setenv("CODEX_HOME", str(places["codex"]))
    monkeypatch.setenv("LOOPWATCH_STATE_DIR", str(places["state"]))
    return places


def _install(agent: str, home: Path) -> None:
    path = home / ("settings.json" if agent == "claude" else "hooks.json")
    settings: dict = {}
    install(settings, agent, f"{HOOK} {agent}")
    write_atomically(path, settings)


def _statuses(checks: list[doctor.Check]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for check in checks:
        found.setdefault(check.what, []).append(f"{check.status} {check.detail}")
    return found


async def test_all_well_with_a_running_monitor(tmp_path: Path, homes: dict[str, Path]):
    """Monitor answering on a private socket, both hooks installed and heard from, a Claude
    transcript in a watched directory, a database, an OTLP endpoint: every line OK, exit 0."""
    _install("claude", homes["claude"])
    _install("codex", homes["codex"])
    logs = tmp_path / "logs"
    (logs / "-w").mkdir(parents=True)
    (logs / "-w" / "s1.jsonl").write_text(
        json.dumps(
            {
                "type": "user",
                "sessionId": "s1",
                "uuid": "u",
                "timestamp": "2026-11-25T01:00:00Z",
                "message": {"role": "user", "content": "hi"},
            }
        )
        + "\n"
    )
    (logs / "native.jsonl").write_text('{"type":"session_start","session":"n","agent":"a"}\n')
    db = tmp_path / "lw.db"
    with Store(db):
        pass
    async with running_monitor(tmp_path) as (hub, server):
        otlp = OtlpReceiver(hub, ("127.0.0.1", 0), token="doctor-token")
        await otlp.start()
        try:
            doctor.write_monitor_state(socket=str(server.unix_path), otlp=otlp.endpoint, db=str(db))
            for agent in ("claude", "codex"):
                await run_hook_async(agent, PRE_TOOL, server.unix_path)
            checks = await asyncio.to_thread(
                doctor.diagnose,
                socket_path=server.unix_path,
                db_path=db,
                paths=[str(logs)],
                project=homes["project"],
            )
        finally:
            await otlp.stop()
    seen = _statuses(checks)
    assert [c for c in checks if c.status == "FIX"] == []
    assert seen["monitor"][0].startswith("OK loopwatch") and "mode 0600" in seen["socket"][0]
    assert "installed in" in seen["Claude Code hook"][0] and "16 events: " in seen["Claude Code hook"][0]
    assert (
        "waiting for input" in seen["Claude Code hook"][0] and "assistant text" in seen["Claude Code hook"][0]
    )
    assert "reached the monitor" in seen["Codex hook contact"][0]
    assert "claude (1)" in seen["watched path"][0] and "native (1)" in seen["watched path"][0]
    assert "sessions" in seen["database"][0] and seen["OTLP"][0].startswith("OK")
    assert doctor.report(checks, open(os.devnull, "w")) == 0


def test_nothing_running_says_what_to_do(tmp_path: Path, homes: dict[str, Path]):
    """The real command with no monitor, a Codex hook installed but never fired, an entry
    missing events, a watched path that does not exist: FIX lines, exit 1."""
    _install("codex", homes["codex"])
    settings = {
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": f"{HOOK} claude"}]}]
        }
    }
    write_atomically(homes["project"] / ".claude" / "settings.json", settings)
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOOPWATCH_DATA_DIR=str(tmp_path / "data"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "doctor",
            str(tmp_path / "nowhere"),
            "--socket",
            str(short_socket_path(tmp_path)),
            "--project",
            str(homes["project"]),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "FIX monitor: no socket at" in out and "loopwatch watch" in out
    assert "open /hooks in codex and trust" in out
    assert "PostToolUseFailure" in out and "missing" in out  # the old project entry
    assert "nowhere does not exist" in out
    assert "will be created" in out  # the database
    assert out.rstrip().endswith("to fix")


def test_an_unsafe_or_dead_socket_is_flagged(tmp_path: Path):
    """A socket others may connect to is a FIX; so is a socket nobody answers on."""
    import socket

    path = short_socket_path(tmp_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    try:
        os.chmod(path, 0o666)
        seen = _statuses(doctor.check_socket(path))  # bound, never listening: nobody answers
        assert seen["monitor"][0].startswith("FIX") and "stale" in seen["monitor"][0]
        assert seen["socket"][0].startswith("FIX") and "0666" in seen["socket"][0]
    finally:
        listener.close()
    plain = tmp_path / "plain"
    plain.write_text("")
    assert doctor.check_socket(plain)[0].status == "FIX"


def test_hook_that_fired_without_a_monitor(tmp_path: Path, homes: dict[str, Path]):
    """The contact record tells 'fired, but no monitor to reach' from 'never fired'."""
    _install("claude", homes["claude"])
    (state_dir() / "hook-claude-code.json").write_text(json.dumps({"fired": 1000.0, "event": "Stop"}))
    seen = _statuses(doctor.check_hooks(homes["project"], now=1060.0))
    assert seen["Claude Code hook contact"] == [
        "FIX last fired 60 s ago but never reached a monitor: start `loopwatch watch` (same user, same socket)"
    ]
    assert seen["Codex hook"][0].startswith("--")  # optional, not installed


def test_database_checks(tmp_path: Path):
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not sqlite" * 100)
    assert doctor.check_db(broken)[0].status == "FIX"
    good = tmp_path / "good.db"
    with Store(good):
        pass
    check = doctor.check_db(good)[0]
    assert check.status == "OK" and "0 sessions" in check.detail
    os.chmod(good, 0o444)
    try:
        if not os.access(good, os.W_OK):  # root may write anyway
            assert doctor.check_db(good)[0].status == "FIX"
    finally:
        os.chmod(good, 0o644)


def test_codex_hooks_turned_off_in_its_config(homes: dict[str, Path]):
    _install("codex", homes["codex"])
    config = homes["codex"] / "config.toml"
    config.write_text("[features]\nhooks = false\n")
    seen = _statuses(doctor.check_hooks(homes["project"], now=0.0))
    assert any(line.startswith("FIX") and "turns hooks off" in line for line in seen["Codex hook"])
    config.write_text("[features]\ncodex_hooks = true\n")
    seen = _statuses(doctor.check_hooks(homes["project"], now=0.0))
    assert any(line.startswith("--") and "deprecated alias" in line for line in seen["Codex hook"])


def test_a_ui_typo_is_found_by_doctor_and_refused_by_headless_watch(tmp_path: Path, homes: dict[str, Path]):
    """`[ui]` is checked where no TUI opens too: doctor says what to fix, `watch --headless` refuses to start."""
    config = tmp_path / "config.toml"
    config.write_text('[ui]\ntheme = "loopwatch-drak"\nkeymap = { kill = "ctrl+kk" }\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOOPWATCH_DATA_DIR=str(tmp_path / "data"))
    base = [sys.executable, "-m", "monitor"]
    found = subprocess.run(
        [*base, "doctor", "--config", str(config), "--socket", str(short_socket_path(tmp_path))],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert found.returncode == 1 and "FIX [ui]: ui.theme: unknown theme 'loopwatch-drak'" in found.stdout
    log = tmp_path / "agent.jsonl"
    log.write_text("")
    refused = subprocess.run(
        [*base, "watch", "--headless", "--no-socket", "--config", str(config), str(log)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode == 2 and "ui.theme: unknown theme" in refused.stderr
    config.write_text('[ui]\nkeymap = { kill = "ctrl+kk" }\n')
    found = subprocess.run(
        [*base, "doctor", "--config", str(config), "--socket", str(short_socket_path(tmp_path))],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "FIX [ui]: ui.keymap.kill: 'ctrl+kk'" in found.stdout
