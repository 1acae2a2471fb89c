"""retry_rounds: starting over with the same steps or to the same failure, round after round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.eventkit import Script
from tests.streams import Stream, by, run

BACKUP = "cp app.py.orig app.py"


def _round(s: Stream, edit: str, outcome: str, error: bool = True) -> None:
    s.call("bash", "", command=BACKUP)
    s.call("bash", "", command=edit)
    s.call("bash", outcome, error=error, command="python check.py")


def test_different_attempts_failing_differently_are_honest_below_max_rounds():
    """Restoring the original between different edits that fail differently: five rounds, no warning."""
    s = Stream()
    for n in range(5):
        _round(
            s,
            f"sed -i 's/limit = {n}/limit = {n + 1}/' app.py",
            f"Traceback\nValueError: case {'abcde'[n]} broke",
        )
    _, found = run(s)
    assert not by(found, "retry_rounds")


def test_the_same_failure_after_each_round_warns_at_the_fourth_restore():
    """Different edits, the same failure after each: three alike rounds, flagged when the fourth starts."""
    s = Stream()
    for n in range(5):
        _round(s, f"sed -i 's/limit = {n}/limit = {n + 1}/' app.py", "Traceback\nKeyError: 'user_id'")
    _, found = run(s)
    hits = by(found, "retry_rounds")
    assert hits and hits[0].count == 4 and "same failure" in hits[0].message


def test_the_same_steps_again_warn_at_the_third_start():
    """The same edits redone after each restore (whatever the output): flagged when the third round starts."""
    s = Stream()
    for n in range(3):
        _round(s, "sed -i 's/limit = 1/limit = 2/' app.py", f"limit now {n}", error=False)
    _, found = run(s)
    hits = by(found, "retry_rounds")
    assert hits and hits[0].count == 3 and "same steps" in hits[0].message


def test_many_rounds_warn_whatever_changes():
    """A revert-and-retry cycle is a loop after several rounds: the seventh restore warns."""
    s = Stream()
    for n in range(7):
        _round(s, f"sed -i 's/v{n}/v{n + 1}/' app.py", f"Traceback\nValueError: variant {'abcdefg'[n]}")
    _, found = run(s)
    hits = by(found, "retry_rounds")
    assert hits and hits[0].count == 7


def test_appends_and_in_place_edits_are_not_restores():
    """``>>`` and ``sed -i`` edit a file; only a whole-file write or a checkout starts a round."""
    s = Stream()
    for _ in range(4):
        s.call("bash", "", command="echo 'x = 1' >> notes.txt")
        s.call("bash", "", command="sed -i 's/a/b/' app.py")
        s.call("bash", "Traceback\nKeyError: 'user_id'", error=True, command="python check.py")
    _, found = run(s)
    assert not by(found, "retry_rounds")


def test_the_pattern_is_the_same_in_every_process(tmp_path: Path):
    """The pattern keys acknowledgements and false positives: two processes with
    different hash seeds (a restart, a ``scan --jobs`` worker) name a loop alike."""
    s = Script()
    for _ in range(3):
        s.bash(BACKUP)
        s.bash("sed -i 's/limit = 1/limit = 2/' app.py")
        s.bash("python check.py", "limit now 2")
    log = s.write(tmp_path / "rounds.jsonl")
    patterns = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "LOOPWATCH_CONFIG_DIR": str(tmp_path / "no-config")}
        out = subprocess.run(
            [sys.executable, "-m", "monitor", "scan", "--json", "--detections", "-q", str(log)],
            capture_output=True,
            text=True,
            env=env,
        )
        found = [json.loads(line) for line in out.stdout.splitlines()]
        patterns.append([d["pattern"] for d in found if d["detector"] == "retry_rounds"])
    assert patterns[0] and patterns[0][0].startswith("rounds:")
    assert patterns[0] == patterns[1]
