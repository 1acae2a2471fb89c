"""``loopwatch doctor`` run as a real subprocess, the way a user runs it: a config
file in ``tmp_path``, a socket path where nothing listens, a bare environment
(``HOME`` and the state directory in ``tmp_path``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_doctor(
    tmp_path: Path, config_text: str, *, path: str = "/usr/bin:/bin", timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``python -m monitor doctor`` with ``config_text`` as its config file; ``path`` is its ``PATH``."""
    config = tmp_path / "config.toml"
    config.write_text(config_text)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "doctor",
            "--config",
            str(config),
            "--socket",
            str(tmp_path / "no"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={"PATH": path, "HOME": str(tmp_path), "LOOPWATCH_STATE_DIR": str(tmp_path / "st")},
    )
