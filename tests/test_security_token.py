"""The TCP token never has to be on a command line (issue 14, item 15).

A command line is readable by every local user (``ps``): ``loopwatch watch``
reads the token from ``--token-file`` (a private file) or ``LOOPWATCH_TOKEN``;
``--token`` still works but warns.  Real ``watch --headless`` subprocesses
and real TCP connections.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

from tests.socketkit import short_socket_path
from tests.test_watch_headless import DEADLINE, ROOT, env_for, watchers  # noqa: F401  (fixture)


async def tcp_welcomes(line: str, token: str) -> bool:
    """Connect to the address the watcher announced and say hello with ``token``."""
    host, port = re.search(r"tcp ([\d.]+):(\d+)", line).groups()
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b'{"type":"hello","token":"%s"}\n' % token.encode())
        await writer.drain()
        async with asyncio.timeout(DEADLINE):
            answer = await reader.readline()
        return b'"welcome"' in answer
    finally:
        writer.close()


def cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


async def test_token_file_keeps_the_token_out_of_ps(tmp_path, watchers):
    """--token-file: the token works over TCP and appears nowhere in the process's command line."""
    secret = tmp_path / "token"
    secret.write_text("s3cr3t-from-file\n")
    secret.chmod(0o600)
    watcher = await watchers(
        tmp_path,
        "--no-db",
        "--socket",
        str(short_socket_path(tmp_path)),
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        str(secret),
    )
    line = next(x for x in watcher.stderr if "Ctrl-C to stop" in x)
    assert "s3cr3t" not in cmdline(watcher.proc.pid)
    assert await tcp_welcomes(line, "s3cr3t-from-file")
    assert not await tcp_welcomes(line, "wrong")
    assert not any("warning" in x for x in watcher.stderr)


async def test_token_from_the_environment(tmp_path, watchers):
    """LOOPWATCH_TOKEN works without any token option."""
    watcher = await watchers(
        tmp_path,
        "--no-db",
        "--socket",
        str(short_socket_path(tmp_path)),
        "--listen",
        "127.0.0.1:0",
        env={"LOOPWATCH_TOKEN": "from-env"},
    )
    line = next(x for x in watcher.stderr if "Ctrl-C to stop" in x)
    assert await tcp_welcomes(line, "from-env")


async def test_token_on_the_command_line_still_works_but_warns(tmp_path, watchers):
    """--token keeps working for old scripts, with a warning that ps shows it."""
    watcher = await watchers(
        tmp_path,
        "--no-db",
        "--socket",
        str(short_socket_path(tmp_path)),
        "--listen",
        "127.0.0.1:0",
        "--token",
        "visible",
    )
    line = next(x for x in watcher.stderr if "Ctrl-C to stop" in x)
    assert any("--token is visible to every local user in ps" in x for x in watcher.stderr)
    assert await tcp_welcomes(line, "visible")


def test_a_token_file_others_can_read_is_refused(tmp_path):
    """A group/world-readable token file, an empty one, or both options: a clear usage error."""
    loose = tmp_path / "loose"
    loose.write_text("t\n")
    loose.chmod(0o644)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    cases = [
        (["--token-file", str(loose)], "readable by others"),
        (["--token-file", str(empty)], "is empty"),
        (["--token-file", str(empty), "--token", "x"], "not both"),
        (["--token-file", str(tmp_path / "missing")], "cannot read the token file"),
    ]
    for args, message in cases:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "monitor",
                "watch",
                "--headless",
                "--no-db",
                "--socket",
                str(short_socket_path(tmp_path)),
                "--listen",
                "127.0.0.1:0",
                *args,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env_for(tmp_path),
            timeout=DEADLINE,
        )
        assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
        assert "Ctrl-C to stop" not in result.stderr
    assert os.path.exists(loose)
