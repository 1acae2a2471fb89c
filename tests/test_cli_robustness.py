"""The commands as a user runs them, in real subprocesses: without a terminal,
on a read-only database, with a bad theme or keymap, killed by SIGHUP/SIGTERM,
and with a mistyped command (issue 15, items 8-12)."""

from __future__ import annotations

import glob
import os
import pty
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.test_history_cli import record, write_log

ROOT = Path(__file__).resolve().parent.parent
#: Every command that opens the TUI, with what it needs besides the options.
TUI_COMMANDS = {
    "watch": ["watch", "--no-socket", "--no-db", "{logs}"],
    "demo": ["demo"],
    "history --tui": ["history", "--tui", "--db", "{db}"],
    "open": ["open", "loop-1", "--db", "{db}"],
}


def loopwatch(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """The real CLI with no terminal at all (stdin /dev/null, output to pipes)."""
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("robust")
    logs = tmp / "logs"
    logs.mkdir()
    log = write_log(logs / "loop.jsonl", "loop-1", "claude-code", time.time() - 60, repeats=6)
    db = tmp / "loopwatch.db"
    record(db, [log]).close()
    return {"logs": str(logs), "db": str(db), "dir": tmp}


def command(name: str, stored: dict, *extra: str) -> list[str]:
    return [part.format(**stored) for part in TUI_COMMANDS[name]] + list(extra)


@pytest.mark.parametrize("name", list(TUI_COMMANDS))
def test_tui_commands_refuse_to_run_without_a_terminal(name, stored, tmp_path):
    """With no terminal Textual would spin a CPU at 100 % forever (`watch logs/
    </dev/null`): every command that opens the TUI says so and exits 2, naming
    what to run instead, and the demo leaves nothing behind."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = loopwatch(*command(name, stored), env=env)
    assert out.returncode == 2, out.stderr
    assert "needs a terminal" in out.stderr and "standard input" in out.stderr
    assert "Traceback" not in out.stderr
    hint = {
        "watch": "--headless",
        "demo": "demo --headless",
        "history --tui": "loopwatch history",
        "open": "loopwatch show",
    }[name]
    assert hint in out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", list(TUI_COMMANDS))
def test_tui_commands_share_theme_and_config_and_fail_cleanly(name, stored, tmp_path):
    """`watch --theme` is documented: every TUI command takes --theme and --config,
    and a bad theme (option or config) or keymap id is a clean exit 2 naming the
    key, never a traceback.  A good theme gets as far as the terminal check."""
    helped = loopwatch(*command(name, stored)[: 2 if name == "history --tui" else 1], "--help")
    assert "--theme" in helped.stdout and "--config" in helped.stdout

    bad_theme = loopwatch(*command(name, stored, "--theme", "nope"))
    assert bad_theme.returncode == 2 and "ui.theme: unknown theme 'nope'" in bad_theme.stderr
    assert "Traceback" not in bad_theme.stderr

    config = tmp_path / "config.toml"
    config.write_text('[ui]\ntheme = "loopwatch-dark"\nkeymap = { explode = "ctrl+x" }\n')
    bad_keymap = loopwatch(*command(name, stored, "--config", str(config)))
    assert bad_keymap.returncode == 2 and "ui.keymap.explode: unknown action" in bad_keymap.stderr
    assert "Traceback" not in bad_keymap.stderr

    config.write_text('[ui]\ntheme = "no-such-theme"\n')
    bad_config_theme = loopwatch(*command(name, stored, "--config", str(config)))
    assert bad_config_theme.returncode == 2 and "ui.theme" in bad_config_theme.stderr
    assert "Traceback" not in bad_config_theme.stderr

    good = loopwatch(
        *command(name, stored, "--theme", "loopwatch-light"), env=dict(os.environ, TMPDIR=str(tmp_path))
    )
    assert good.returncode == 2 and "needs a terminal" in good.stderr


# -- read-only databases ---------------------------------------------------------------------------


@pytest.fixture
def read_only_db(stored):
    """A copy of the database, file 0444 in a 0555 directory, that another user
    can reach (pytest's tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="loopwatch-ro-"))
    try:
        top.chmod(0o755)
        home = top / "home"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        ro = top / "ro"
        ro.mkdir()
        shutil.copy(stored["db"], ro / "x.db")
        (ro / "x.db").chmod(0o444)
        ro.chmod(0o555)
        yield {"db": str(ro / "x.db"), "dir": ro, "home": str(home)}
    finally:
        ro.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def as_unprivileged(args: list[str], home: str) -> subprocess.CompletedProcess:
    """Run the CLI as a user for whom permissions hold: ourselves, or `nobody`
    when we are root (root ignores file modes, which would hide the bug)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip(
                "running as root without setpriv: cannot drop privileges to test file permissions faithfully"
            )
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=home, XDG_DATA_HOME=home)
    return subprocess.run(
        prefix + [sys.executable, "-m", "monitor", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args", [["history"], ["show", "loop-1"], ["scan"]], ids=["history", "show", "scan --db"]
)
def test_read_only_commands_read_a_read_only_database(args, read_only_db):
    """`history --db ro/x.db` (file 444 in a 555 directory) said "attempt to write
    a readonly database": the commands that only read open it read-only, and
    nothing is created beside it."""
    out = as_unprivileged([*args, "--db", read_only_db["db"]], read_only_db["home"])
    assert out.returncode in (0, 1), out.stderr
    assert "readonly" not in out.stderr and "loop-1" in out.stdout + out.stderr
    assert sorted(p.name for p in read_only_db["dir"].iterdir()) == ["x.db"]


# -- demo cleanup on signals -----------------------------------------------------------------------


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def demo_files(tmp: Path) -> list[str]:
    return glob.glob(str(tmp / "loopwatch-demo-*" / "agents" / "*.jsonl"))


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_demo_in_the_tui_cleans_up_when_its_terminal_closes(sig, tmp_path):
    """`demo` removed its temporary logs and database on `q` only: when its
    terminal closes (SIGHUP) or it is terminated it quits the same way, stopping
    the agents and removing the directory."""
    master, slave = pty.openpty()
    env = dict(os.environ, TMPDIR=str(tmp_path), TERM="xterm-256color")
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "demo"],
        cwd=ROOT,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)

    def drain() -> None:  # the TUI must never block on a full terminal
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(demo_files(tmp_path)) >= 3, "the demo agents' logs")
        if sig == signal.SIGHUP:
            os.close(master)  # the terminal goes away, as when its window is closed
            master = -1
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if master >= 0:
            os.close(master)
        reader.join(timeout=5)
    assert list(tmp_path.iterdir()) == []


def log_lines(tmp: Path) -> int:
    return sum(Path(name).read_bytes().count(b"\n") for name in demo_files(tmp))


@pytest.mark.parametrize("then_signal", [True, False], ids=["then SIGTERM", "no signal"])
def test_demo_quits_after_its_terminal_died_unsignalled(then_signal, tmp_path):
    """A terminal that closed while nothing signalled the demo (under `make demo`,
    make takes the SIGHUP and waits) killed Textual's output thread; the app then
    blocked for good writing the screen, ignored SIGTERM and spun at 50 % CPU with
    its agents and files left behind. Now it notices the dead terminal by itself,
    and SIGTERM still ends it: agents stopped, files removed."""
    import psutil

    master, slave = pty.openpty()
    env = dict(os.environ, TMPDIR=str(tmp_path), TERM="xterm-256color")
    # Like make: the terminal's session leader keeps the SIGHUP to itself and waits.
    command = f"trap '' HUP; {shlex.quote(sys.executable)} -m monitor demo; :"
    shell = subprocess.Popen(
        ["sh", "-c", command],
        cwd=ROOT,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    reader = threading.Thread(target=lambda: _drain(master), daemon=True)
    reader.start()
    agents: list = []
    proc = None
    try:
        wait_for(lambda: len(demo_files(tmp_path)) >= 3, "the demo agents' logs")
        demo = psutil.Process(shell.pid).children()[0]
        proc = demo
        agents = demo.children()
        before = log_lines(tmp_path)
        os.close(master)  # the window closes; nobody signals the demo itself
        master = -1
        if then_signal:
            # The agents keep writing: once they have written more, the app has had
            # many screen refreshes to fail on the dead terminal.
            wait_for(
                lambda: log_lines(tmp_path) >= before + 40 or not proc.is_running(),
                "the agents to go on writing",
            )
            if proc.is_running():
                proc.send_signal(signal.SIGTERM)
        assert shell.wait(timeout=60) == 0
    finally:
        if shell.poll() is None:
            for process in [proc, *agents]:
                if process is not None and process.is_running():
                    process.kill()
            shell.kill()
            shell.wait()
        if master >= 0:
            os.close(master)
        reader.join(timeout=5)
    wait_for(
        lambda: not any(agent.is_running() and agent.status() != psutil.STATUS_ZOMBIE for agent in agents),
        "the agents to stop",
        timeout=30,
    )
    assert list(tmp_path.iterdir()) == []


def _drain(master: int) -> None:
    try:
        while os.read(master, 65536):
            pass
    except OSError:
        pass


def test_headless_demo_cleans_up_on_sigterm(tmp_path):
    """The headless demo ends early on SIGTERM like after --duration: agents
    stopped, summary printed, temporary directory removed."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "demo", "--headless", "--duration", "600"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stderr.readline()
        assert "agents in" in first, first
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) in (0, 1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "agent processes had exited" in rest
    assert list(tmp_path.iterdir()) == []


# -- paths and mistyped commands -------------------------------------------------------------------


def test_a_mistyped_command_is_an_error_naming_the_commands(tmp_path):
    """`loopwatch doctr` opened the monitor on a path 'doctr': a first argument
    that is neither a command nor an existing path is an error listing the
    commands (and how to watch a file that does not exist yet)."""
    out = loopwatch("histroy", "--db", str(tmp_path / "x.db"))
    assert out.returncode == 2
    assert "'histroy' is neither a command nor an existing path" in out.stderr
    assert "did you mean `loopwatch history`" in out.stderr
    assert "scan, watch, demo, history, show, open" in out.stderr
    assert "loopwatch watch histroy" in out.stderr
    assert not (tmp_path / "x.db").exists()
    assert "neither a command" in loopwatch("doctr").stderr


def test_an_existing_path_still_opens_the_monitor(stored):
    """`loopwatch DIR` stays `loopwatch watch DIR` (here it stops at the terminal check)."""
    out = loopwatch(stored["logs"], "--no-socket", "--no-db")
    assert out.returncode == 2 and "needs a terminal" in out.stderr


def stderr_until(proc: subprocess.Popen, marker: str) -> list[str]:
    """The lines ``proc`` writes to stderr up to the first one containing ``marker``."""
    lines: list[str] = []
    while not any(marker in line for line in lines):
        line = proc.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
    return lines


def test_headless_watch_warns_about_a_path_that_does_not_exist(tmp_path):
    """`watch --headless /nonexistent` keeps waiting (documented: a file may
    appear later) but says so on stderr."""
    missing = tmp_path / "nope" / "agent.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor",
            "watch",
            "--headless",
            "--no-socket",
            "--db",
            str(tmp_path / "x.db"),
            str(missing),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = stderr_until(proc, "does not exist")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert any(f"{missing}: does not exist yet; it will be read when it appears" in line for line in lines)


def test_headless_watch_of_a_missing_path_leaves_no_default_database(tmp_path):
    """`watch --headless /nonexistent` (no --db) warns and, having recorded
    nothing, does not leave the default database behind."""
    data = tmp_path / "data"
    env = {**os.environ, "LOOPWATCH_DATA_DIR": str(data), "LOOPWATCH_CONFIG_DIR": str(tmp_path / "config")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor",
            "watch",
            "--headless",
            "--no-socket",
            str(tmp_path / "nonexistent"),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = stderr_until(proc, "Ctrl-C to stop")
        assert (data / "loopwatch.db").exists(), "the database is open while the watcher runs"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        lines.extend(proc.stderr.readlines())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert any("does not exist yet" in line for line in lines), "".join(lines)
    assert not list(data.glob("loopwatch.db*")), sorted(p.name for p in data.iterdir())
