"""``doctor`` reports the live parts without an endpoint: the waiting notice, pause and kill."""

from __future__ import annotations

from pathlib import Path

from monitor.commands.doctor_live import check_pause, check_waiting
from monitor.config import build_config
from tests.doctorkit import run_doctor


def test_doctor_reports_the_waiting_notice_and_whether_a_process_can_be_proven(tmp_path: Path):
    result = run_doctor(tmp_path, "[sources]\nwaiting_notice_seconds = 90\n")
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
