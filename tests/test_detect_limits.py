"""The limits detector: iterations, runtime, cost and consecutive failures (design note 000)."""

from __future__ import annotations

import subprocess
import sys

from monitor.detect.engine import Engine
from monitor.events import Level
from tests.eventkit import Script, by, only


def labels(detections):
    return [(d.pattern, d.level.label, d.count) for d in detections if d.detector == "limits"]


def test_iteration_runtime_and_cost_limits_are_off_by_default():
    """300 tool calls over 10 hours costing $50 raise nothing by default: honest sessions can be long."""
    s = Script(step=60.0)
    for n in range(300):
        s.call("read_file", {"path": f"src/file{n}.py"}, f"contents {n}")
        if n % 10 == 0:
            s.usage(1.7)
    assert not labels(s.run(only("limits")))


def test_iteration_limit_notice_then_terminate_then_reminders():
    """max_iterations = 20: notice at 16 (80 %), terminate at 20, reminded every further 2 (10 %)."""
    s = Script()
    for n in range(24):
        s.call("read_file", {"path": f"f{n}.py"}, "x")
    found = labels(s.run(only("limits", max_iterations=20)))
    assert found == [
        ("limit:iterations", "notice", 16),
        ("limit:iterations", "terminate", 20),
        ("limit:iterations", "terminate", 22),
        ("limit:iterations", "terminate", 24),
    ]


def test_iterations_count_assistant_turns_in_a_chat_session():
    """A session with no tool calls counts its assistant turns as iterations."""
    s = Script()
    for n in range(10):
        s.user(f"question {n}")
        s.say(f"answer {n}")
    found = labels(s.run(only("limits", max_iterations=10)))
    assert ("limit:iterations", "terminate", 10) in found


def test_runtime_limit_uses_event_time():
    """max_runtime_seconds = 3600 with events a minute apart: notice at 48 min, terminate at 60 min."""
    s = Script(step=60.0)
    for n in range(62):
        s.call("check_status", {"job": n}, f"step {n}")
    found = labels(s.run(only("limits", max_runtime_seconds=3600.0)))
    assert found[0][:2] == ("limit:runtime", "notice") and 2880 <= found[0][2] < 3600
    assert found[1][:2] == ("limit:runtime", "terminate") and 3600 <= found[1][2] < 3700


def test_cost_limit_sums_usage_events():
    """max_cost_usd = 1: $0.30 a turn notices at $0.90 and terminates at $1.20."""
    s = Script()
    for _ in range(4):
        s.say("working")
        s.usage(0.30)
    found = labels(s.run(only("limits", max_cost_usd=1.0)))
    assert found == [("limit:cost", "notice", 0), ("limit:cost", "terminate", 1)]
    detections = s.run(only("limits", max_cost_usd=1.0))
    assert "$1.20" in detections[-1].message


def test_five_consecutive_failures_terminate_by_default():
    """Five failing tool calls in a row: notice at 4, terminate at 5, reminded after 5 more."""
    s = Script()
    for n in range(11):
        s.call("web_fetch", {"url": f"https://example.com/{n}"}, f"HTTP error {500 + n}", is_error=True)
    engine = Engine(only("limits"))
    found = labels(s.run(engine=engine))
    assert found == [
        ("limit:failures", "notice", 4),
        ("limit:failures", "terminate", 5),
        ("limit:failures", "terminate", 10),
    ]
    assert engine.level("s1") == Level.TERMINATE


def test_a_success_or_a_user_turn_breaks_the_failure_streak():
    """Four failures, a success, four failures; then four, a user turn, four: no limit reached."""
    for interruption in ("success", "user"):
        s = Script()
        for n in range(8):
            if n == 4:
                if interruption == "success":
                    s.call("web_fetch", {"url": "https://example.com/ok"}, "200 OK")
                else:
                    s.user("try the mirror instead")
            s.call("web_fetch", {"url": f"https://example.com/{n}"}, "HTTP error 503", is_error=True)
        assert not by(s.run(only("limits")), "limits"), interruption


def test_user_turn_does_not_reset_the_totals():
    """The iteration count is whole-session: user turns in between do not restart it."""
    s = Script()
    for n in range(12):
        s.user(f"next item {n}")
        s.call("read_file", {"path": f"f{n}.py"}, "x")
    found = labels(s.run(only("limits", max_iterations=12)))
    assert ("limit:iterations", "terminate", 12) in found


def test_limits_from_a_config_file_through_scan(tmp_path):
    """A TOML config enabling max_iterations makes `loopwatch scan` exit 1 on a long session."""
    s = Script()
    for n in range(30):
        s.call("read_file", {"path": f"src/file{n}.py"}, f"contents {n}")
    log = s.write(tmp_path / "long.jsonl")
    config = tmp_path / "limits.toml"
    config.write_text("[detectors.limits]\nmax_iterations = 25\n")
    honest = subprocess.run(
        [sys.executable, "-m", "monitor", "scan", str(log)], capture_output=True, text=True
    )
    limited = subprocess.run(
        [sys.executable, "-m", "monitor", "scan", "--config", str(config), str(log)],
        capture_output=True,
        text=True,
    )
    assert honest.returncode == 0, honest.stdout + honest.stderr
    assert limited.returncode == 1, limited.stdout + limited.stderr
    assert "iterations limit reached" in limited.stdout


def test_calls_cancelled_with_a_failing_sibling_are_not_failures_of_their_own():
    """Claude Code cancels the rest of a parallel batch when one call fails:
    one failure and four "Sibling tool call errored", twice, never reach even a
    limit of 4; the cancelled calls neither count nor break a real streak."""
    s = Script()
    for batch in range(2):
        s.call(
            "Read",
            {"file_path": f"/repo/dir{batch}"},
            "EISDIR: illegal operation on a directory, read",
            is_error=True,
        )
        for n in range(4):
            s.call(
                "Read",
                {"file_path": f"/repo/dir{batch}/{n}.py"},
                "<tool_use_error>Sibling tool call errored</tool_use_error>",
                is_error=True,
            )
    assert not labels(s.run(only("limits", max_consecutive_failures=4)))
    # Four real failures with cancelled siblings among them still reach the limit.
    s = Script()
    for n in range(4):
        s.call("web_fetch", {"url": f"https://example.com/{n}"}, "HTTP error 503", is_error=True)
        s.call(
            "Read",
            {"file_path": f"/x/{n}"},
            "<tool_use_error>Sibling tool call errored</tool_use_error>",
            is_error=True,
        )
    assert labels(s.run(only("limits", max_consecutive_failures=4)))[-1] == ("limit:failures", "terminate", 4)
