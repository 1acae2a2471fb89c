"""``doctor`` reports the live parts without an endpoint: the waiting notice, pause and kill."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from monitor.commands.doctor_live import check_pause, check_waiting
from monitor.config import build_config

ROOT = Path(__file__).resolve().parent.parent


def test_doctor_reports_the_waiting_notice_and_whether_a_process_can_be_proven(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text("[sources]\nwaiting_notice_seconds = 90\n")
    result = subprocess.run(
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
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LOOPWATCH_STATE_DIR": str(tmp_path / "st")},
    )
    lines = result.stdout.splitlines()
    assert any(
        line.startswith("OK  waiting for input: ") and "notice after 90 s" in line for line in lines
    ), result.stdout
    # This machine has /proc (the tests' platform): the proof is available.
    assert any(line.startswith("OK  pause and kill: ") and "pid and start time" in line for line in lines)


def test_no_waiting_notice_is_said():
    [(status, what, detail)] = check_waiting(build_config({"sources": {"waiting_notice_seconds": 0}}))
    assert (status, what) == ("--", "waiting for input") and "= 0" in detail


def test_pause_without_a_way_to_prove_a_process_is_a_fix(monkeypatch):
    monkeypatch.setattr("monitor.control.ProcessIdentity.capture", classmethod(lambda cls, pid: None))
    [(status, _, detail)] = check_pause()
    assert status == "FIX" and "refuses every pause and kill" in detail
