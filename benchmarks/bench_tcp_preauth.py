"""TCP clients that never authenticate: the monitor's memory, and whether a local agent still gets in.

Starts ``loopwatch watch --headless --no-db --listen 127.0.0.1:0`` (token from
``LOOPWATCH_TOKEN``), opens ``--silent`` TCP connections that send nothing
and ``--partial`` connections that each send 1 MiB without a newline (no
hello), waits until the monitor's RSS settles, then connects one agent over
the Unix socket and reports whether it was welcomed.  Issue 14, item 14.

    python benchmarks/bench_tcp_preauth.py [--silent 300] [--partial 256] [--tree OTHER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silent", type=int, default=300)
    parser.add_argument("--partial", type=int, default=256)
    parser.add_argument(
        "--tree", default=str(ROOT), help="source tree to run (to compare with another checkout)"
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lw-bench-"))
    env = dict(
        os.environ,
        LOOPWATCH_CONFIG_DIR=str(tmp / "c"),
        LOOPWATCH_DATA_DIR=str(tmp / "d"),
        LOOPWATCH_TOKEN="bench",
    )
    unix_path = tmp / "lw.sock"
    err_path = tmp / "stderr"
    with open(err_path, "w") as err:  # a file, not a pipe: hundreds of refusals are logged
        monitor = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "monitor",
                "watch",
                "--headless",
                "--no-db",
                "--socket",
                str(unix_path),
                "--listen",
                "127.0.0.1:0",
            ],
            stderr=err,
            cwd=args.tree,
            env=env,
        )
    clients: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        banner = ""
        while "Ctrl-C" not in banner:
            if time.monotonic() > deadline or monitor.poll() is not None:
                print(err_path.read_text(), file=sys.stderr)
                return 1
            time.sleep(0.05)
            banner = err_path.read_text()
        host, port = re.search(r"tcp ([\d.]+):(\d+)", banner).groups()
        idle = rss_mb(monitor.pid)
        for _ in range(args.silent):
            clients.append(socket.create_connection((host, int(port))))
        for _ in range(args.partial):
            sock = socket.create_connection((host, int(port)))
            sock.setblocking(False)
            try:
                sock.send(b"x" * (1 << 20))
            except (BlockingIOError, OSError):
                pass
            clients.append(sock)
        settle = time.monotonic() + 15
        before = -1.0
        while time.monotonic() < settle:  # until RSS stops moving
            now = rss_mb(monitor.pid)
            if abs(now - before) < 0.1:
                break
            before = now
            time.sleep(0.5)
        loaded = rss_mb(monitor.pid)
        agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        agent.settimeout(10)
        started = time.perf_counter()
        welcomed = False
        try:
            agent.connect(str(unix_path))
            agent.sendall(b'{"type":"hello","agent":"bench"}\n')
            welcomed = b"welcome" in agent.recv(4096)
        except OSError:
            pass
        elapsed = time.perf_counter() - started
        agent.close()
        print("| silent TCP | partial 1 MiB lines | RSS idle | RSS after | local agent welcomed |")
        print("|---|---|---|---|---|")
        print(
            f"| {args.silent} | {args.partial} | {idle:.1f} MB | {loaded:.1f} MB | "
            f"{'yes' if welcomed else 'NO'} ({elapsed * 1000:.1f} ms) |"
        )
        return 0
    finally:
        for sock in clients:
            sock.close()
        monitor.terminate()
        monitor.wait(timeout=30)


if __name__ == "__main__":
    raise SystemExit(main())
