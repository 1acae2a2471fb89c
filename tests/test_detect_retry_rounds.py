"""retry_rounds: starting over with the same steps or to the same failure, round after round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from monitor.events import Kind
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
            [sys.executable, "-m", "monitor", "scan", "--json", "-q", str(log)],
            capture_output=True,
            text=True,
            env=env,
        )
        found = [json.loads(line) for line in out.stdout.splitlines()]
        patterns.append([d["pattern"] for d in found if d["detector"] == "retry_rounds"])
    assert patterns[0] and patterns[0][0].startswith("rounds:")
    assert patterns[0] == patterns[1]


def _listens_to_results(engine, session: str = "s1") -> bool:
    state = engine.sessions[session]
    rounds = next(d for d in state.detectors if d.name == "retry_rounds")
    return rounds.observe in state.observers[Kind.TOOL_RESULT]


def test_results_are_observed_only_from_the_first_restore_on():
    """No round starts before a restore, so the failures before the first one
    are never read: the engine does not call the detector for those results."""
    s = Stream()
    s.call("bash", "Traceback\nKeyError: 'user_id'", error=True, command="python check.py")
    s.call("bash", "Traceback\nKeyError: 'user_id'", error=True, command="python check.py")
    engine, _ = run(s)
    assert not _listens_to_results(engine)
    s.events.clear()
    s.call("bash", "", command=BACKUP)
    run(s, engine=engine)
    assert _listens_to_results(engine)


def test_skipping_results_before_the_first_restore_changes_no_detection(monkeypatch):
    """The rounds, with and without the routing's skips, over streams that
    fail before, between and after restores (and the labelled corpus)."""
    from monitor.config import build_config
    from monitor.detect.detectors.retry_rounds import RetryRounds
    from monitor.detect.engine import Engine
    from monitor.formats.lines import LineDecoder
    from tests.conftest import SCENARIOS

    streams = []
    for n in range(4):
        s = Stream(session=f"s{n}")
        for k in range(n + 2):
            s.call("bash", "Traceback\nKeyError: 'user_id'", error=True, command="python check.py")
            _round(s, f"sed -i 's/v{k % (n + 1)}/w/' app.py", "Traceback\nKeyError: 'user_id'")
        streams.append(s)

    def detections(preset: str):
        engine = Engine(build_config({}, preset=preset))
        _, found = run(*streams, engine=engine)
        for path in sorted(SCENARIOS.glob("*.jsonl")):
            decoder = LineDecoder(path.name)
            for line, raw in enumerate(path.read_bytes().splitlines(), 1):
                for event in decoder.feed(raw, line, now=0.0)[0]:
                    found += engine.process(event)
        return [(d.detector, d.session, d.seq, d.message) for d in found if d.detector == "retry_rounds"]

    for preset in ("balanced", "aggressive"):
        skipping = detections(preset)
        with monkeypatch.context() as patched:
            patched.setattr(RetryRounds, "listening", None)
            patched.setattr("monitor.detect.base.SessionView.listen", lambda self, detector, kinds: None)
            assert detections(preset) == skipping
        assert skipping
