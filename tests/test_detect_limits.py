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


def test_iteration_limit_climbs_notice_warn_critical_terminate():
    """max_iterations = 20: notice at 16 (80 %), warn at 20, then one rung a further 2 (10 %):
    critical at 22, terminate at 24 and reminded after that -- an operator sees it coming."""
    s = Script()
    for n in range(28):
        s.call("read_file", {"path": f"f{n}.py"}, "x")
    found = labels(s.run(only("limits", max_iterations=20)))
    assert found == [
        ("limit:iterations", "notice", 16),
        ("limit:iterations", "warn", 20),
        ("limit:iterations", "critical", 22),
        ("limit:iterations", "terminate", 24),
        ("limit:iterations", "terminate", 26),
        ("limit:iterations", "terminate", 28),
    ]


def test_iterations_count_assistant_turns_in_a_chat_session():
    """A session with no tool calls counts its assistant turns as iterations."""
    s = Script()
    for n in range(10):
        s.user(f"question {n}")
        s.say(f"answer {n}")
    found = labels(s.run(only("limits", max_iterations=10)))
    assert ("limit:iterations", "warn", 10) in found


def test_runtime_limit_uses_event_time():
    """max_runtime_seconds = 3600 with events a minute apart: notice at 48 min, warn at 60 min."""
    s = Script(step=60.0)
    for n in range(62):
        s.call("check_status", {"job": n}, f"step {n}")
    found = labels(s.run(only("limits", max_runtime_seconds=3600.0)))
    assert found[0][:2] == ("limit:runtime", "notice") and 2880 <= found[0][2] < 3600
    assert found[1][:2] == ("limit:runtime", "warn") and 3600 <= found[1][2] < 3700


def test_cost_limit_sums_usage_events():
    """max_cost_usd = 1: $0.30 a turn notices at $0.90 and warns at $1.20."""
    s = Script()
    for _ in range(4):
        s.say("working")
        s.usage(0.30)
    found = labels(s.run(only("limits", max_cost_usd=1.0)))
    assert found == [("limit:cost", "notice", 0), ("limit:cost", "warn", 1)]
    detections = s.run(only("limits", max_cost_usd=1.0))
    assert "$1.20" in detections[-1].message


def test_consecutive_failures_climb_the_ladder_by_default():
    """Failing tool calls in a row: notice at 4, warn at 5, critical at 10, terminate at 15 --
    never a jump from nothing to terminate."""
    s = Script()
    for n in range(16):
        s.call("web_fetch", {"url": f"https://example.com/{n}"}, f"HTTP error {500 + n}", is_error=True)
    engine = Engine(only("limits"))
    found = labels(s.run(engine=engine))
    assert found == [
        ("limit:failures", "notice", 4),
        ("limit:failures", "warn", 5),
        ("limit:failures", "critical", 10),
        ("limit:failures", "terminate", 15),
    ]
    assert engine.level("s1") == Level.TERMINATE
    s = Script()
    for n in range(9):
        s.call("web_fetch", {"url": f"https://example.com/{n}"}, f"HTTP error {500 + n}", is_error=True)
    engine = Engine(only("limits"))
    s.run(engine=engine)
    assert engine.level("s1") < Level.TERMINATE


def test_installing_one_missing_module_at_a_time_is_no_failure_streak():
    """Each failed call installs what the failure before named and meets a new error: it moved
    on, so the streak starts again at it. Meeting the same error again after acting on it does not."""
    s = Script()
    missing = ["asgiref", "pytz", "sqlparse", "tzdata", "jinja2", "yaml", "attrs"]
    s.call(
        "bash",
        {"command": "python repro.py"},
        f"ModuleNotFoundError: No module named '{missing[0]}'",
        is_error=True,
    )
    for before, now in zip(missing, missing[1:]):
        s.call(
            "bash",
            {"command": f"pip install {before} && python repro.py"},
            f"Exit code 1\nTraceback (most recent call last):\nModuleNotFoundError: No module named '{now}'",
            is_error=True,
        )
    assert not labels(s.run(only("limits")))
    s = Script()
    s.call(
        "bash", {"command": "python repro.py"}, "ModuleNotFoundError: No module named 'foo'", is_error=True
    )
    for n in range(5):
        s.call(
            "bash",
            {"command": f"pip install foo{'=' * n} && python repro.py"},
            "ModuleNotFoundError: No module named 'foo'",
            is_error=True,
        )
    assert ("limit:failures", "warn", 5) in labels(s.run(only("limits")))


def test_calls_one_reply_made_together_fail_as_one():
    """Three parallel calls of one reply (made before any result was back), all failing, are one
    failed round; a fifth failed round reaches the limit."""
    s = Script()
    for batch in range(4):
        for n in range(3):
            s.call("bash", {"command": f"ls /repo/missing{batch}/{n}"}, answer=False)
        for n, call in enumerate(s.records[-3:]):
            message = f"ls: cannot access '/repo/missing{batch}/{n}': No such file"
            s.add({"type": "tool_result", "id": call["id"], "content": message, "is_error": True})
    assert labels(s.run(only("limits"))) == [("limit:failures", "notice", 4)]  # 12 failures, 4 rounds
    for n in range(2):
        s.call(
            "bash", {"command": f"cat /repo/other{n}"}, "cat: /repo/other: Permission denied", is_error=True
        )
    assert labels(s.run(only("limits")))[-1][:2] == ("limit:failures", "warn")


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
    assert ("limit:iterations", "warn", 12) in found


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
    assert labels(s.run(only("limits", max_consecutive_failures=4)))[-1] == ("limit:failures", "warn", 4)


def test_a_failure_that_names_only_part_of_the_one_before_moved_on():
    """A bulk ``sed -i`` over a quoted ``$FILES`` fails naming the whole list as one file, twice;
    listing the files fails for just the two that are missing: the rest was dealt with, so the
    streak starts again there (a real run: tests/corpus, pshung/personal_git b8de8317)."""
    from monitor.detect.detectors.failure_cascade import FailureCascade  # noqa: F401 (registered)

    files = [f"docs/part{n}.md" for n in range(18)] + ["TODO.md"]
    listed = " ".join(files)
    s = Script()
    for _ in range(2):
        s.call(
            "bash",
            {"command": f'FILES="{listed}" && sed -i "s|a|b|g" "$FILES"'},
            f"Exit code 2\nsed: can't read {listed}: No such file or directory",
            is_error=True,
        )
    s.call(
        "bash",
        {"command": f'sed -i "s|a|b|g" {listed}'},
        "Exit code 2\nsed: can't read docs/part17.md: No such file or directory\n"
        "sed: can't read TODO.md: No such file or directory",
        is_error=True,
    )
    warned = [d for d in s.run(only("failure_cascade")) if d.level >= Level.WARN]
    assert not warned, [(d.detector, d.message) for d in warned]


def _held_lock(pid: int) -> str:
    """apt-get's answer while another process holds the dpkg lock."""
    return (
        f"E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process {pid} "
        "(unattended-upgr)\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend)"
    )


def test_a_command_retried_after_waiting_for_a_lock_is_a_poll():
    """apt-get refused twice by "Could not get lock … held by process 6683", the second time after
    ``sleep 30 &&`` (tests/corpus, vorflux scikit-learn-12585): waiting for the lock to clear is
    a poll that has not moved yet, not "again the same way"; retried at once, it is."""
    lock = _held_lock(6683)

    def run(retry: str) -> list:
        s = Script()
        s.bash("git gc --prune=now", "fatal: unable to read 63ab5735\nfatal: failed to run repack", code=128)
        s.bash(
            "apt-get install -y build-essential",
            "E: Could not open lock file /var/lib/apt/lists/lock",
            code=100,
        )
        s.bash("sudo apt-get install -y build-essential", lock, code=100)
        s.bash(f"{retry}sudo apt-get install -y build-essential", lock, code=100)
        return [d for d in s.run(only("failure_cascade")) if d.level >= Level.WARN]

    assert not run("sleep 30 && ")
    assert run("")


def test_waiting_out_a_lock_is_one_failure_however_often_it_is_retried():
    """sympy-15345 (read honest): apt-get refused for permissions, then by a lock, retried after
    ``sleep 10`` and ``sleep 30`` (the same lock), the holder killed, then a new error: one try
    plus two waits is one failure, and four different failures are the agent adapting. Neither
    ``failure_cascade`` nor the failure limit warns; the same lock retried at once still counts."""
    lock = _held_lock(4439)

    def run(wait: str) -> list:
        s = Script()
        s.bash("apt-get install -y mpmath", "E: Could not open lock file /var/lib/apt/lists/lock", code=100)
        s.bash("sudo apt-get install -y mpmath", lock, code=100)
        s.bash(f"{wait.format(10)}sudo apt-get install -y mpmath", lock, code=100)
        s.bash(f"{wait.format(30)}sudo apt-get install -y mpmath", lock, code=100)
        s.bash(
            "sudo kill -9 4439; sudo apt-get install -y mpmath",
            "E: Unable to locate package mpmath",
            code=100,
        )
        return _warned(s, "failure_cascade", "limits")

    assert run("sleep {} && ") == []
    assert run("") != []


def test_a_path_that_ends_a_sentence_is_named_without_its_full_stop():
    """sympy-13877: "Could not get lock /var/lib/dpkg/lock. It is held by process 31257 (dpkg)";
    the next command removes ``/var/lib/dpkg/lock`` and meets a new error: it acted on what the
    failure named and moved on (the streak starts again), so six setbacks, two of them alike,
    are no cascade."""
    s = Script()
    s.bash("apt-get install -y mpmath", "E: Could not open lock file /var/lib/apt/lists/lock", code=100)
    s.bash("sudo apt-get install -y mpmath", "E: Unable to acquire the dpkg frontend lock", code=100)
    s.bash(
        "sudo apt-get install -y python3-mpmath", "E: Temporary failure resolving 'deb.debian.org'", code=100
    )
    s.bash(
        "sudo kill -9 4031; sudo apt-get install -y python3-mpmath",
        "E: Could not get lock /var/lib/dpkg/lock. It is held by process 31257 (dpkg)",
        code=100,
    )
    s.bash(
        "sudo kill -9 31257; sudo rm -f /var/lib/dpkg/lock; sudo apt-get install -y python3-mpmath",
        "E: dpkg was interrupted, you must manually run 'sudo dpkg --configure -a' to correct the problem.",
        code=100,
    )
    s.bash(
        "sudo dpkg --configure -a && sudo apt-get install -y python3-mpmath",
        "E: Temporary failure resolving 'deb.debian.org'",
        code=100,
    )
    assert _warned(s, "failure_cascade", "limits") == []


def _warned(script: Script, *detectors: str) -> list[tuple[str, int | None]]:
    """Each detector run on its own over the script: its warnings, by line."""
    return [
        (d.detector, d.line) for name in detectors for d in script.run(only(name)) if d.level >= Level.WARN
    ]


def test_other_versions_failing_alike_are_a_search_over_versions():
    """scikit-learn-13439 (read honest): `numpy==1.23.5`, `numpy==1.24.0`, then `setuptools<60
    numpy<1.24` each fail to build the same way, and the agent turns to wheels: trying one
    version after another is a search, not "again the same way". The same version installed
    again, failing the same way, is a repeat."""
    built = "× Getting requirements to build wheel did not run successfully.\n│ exit code: 1"

    def run(*specs: str) -> list:
        s = Script()
        for spec in specs:
            s.bash(f"pip install --break-system-packages {spec} 2>&1 | tail -5", built, code=1)
        return [d for d in s.run(only("failure_cascade")) if d.level >= Level.WARN]

    assert not run("'numpy==1.23.5'", "'numpy==1.24.0'", "'setuptools<60' 'numpy<1.24'")
    assert run("'numpy==1.23.5'", "'numpy==1.23.5'", "'numpy==1.23.5'")
