"""Issue 13, "honest struggle is flagged as a loop": agents working through
setbacks (different failures, searches that find nothing, re-runs after
edits, waiting for CI) are not loops; the outcome repeating is."""

from __future__ import annotations

from monitor.detect.analysis.failures import comparable_failure, failed
from monitor.events import Level
from tests.streams import Stream, run

MINI_EMPTY_ONE = "<returncode>1</returncode>\n<output>\n</output>"


def _results(stream: Stream):
    engine, _ = run(stream)
    return [e for e in stream.events if e.kind.name == "TOOL_RESULT"]


def test_exit_one_of_a_search_behind_a_prefix_or_a_pipeline_is_no():
    """``cd … && grep``, ``grep … | head`` and mini-swe-agent's ``<returncode>1</returncode>``
    with an empty ``<output>`` are "no match", not a failure, and no failure signature."""
    s = Stream()
    s.call("bash", MINI_EMPTY_ONE, error=True, command="cd /testbed && grep -n retry_delay f.py")
    s.call("bash", MINI_EMPTY_ONE, error=True, command="grep -rn backoff src/ | head -20")
    s.call("bash", "Exit code 1", error=True, command="grep -rn MAX_ATTEMPTS src/ | head")
    s.call(
        "bash",
        "<returncode>1</returncode>\n<output>\nTraceback\nValueError: bad\n</output>",
        error=True,
        command="python repro.py | head",
    )
    results = _results(s)
    assert [failed(r) for r in results] == [False, False, False, True]
    assert [comparable_failure(r) is None for r in results[:3]] == [True] * 3


def test_greps_for_different_patterns_that_find_nothing_are_not_the_same_error():
    """Four greps for different names, each exiting 1 with nothing printed: no repeated_result, no cascade."""
    s = Stream()
    for pattern in ("retry_delay", "backoff", "max_attempts", "sleep_for"):
        s.call(
            "bash", MINI_EMPTY_ONE, error=True, command=f"cd /testbed && grep -rn {pattern} src/ | head -5"
        )
    _, found = run(s)
    assert not [d for d in found if d.level >= Level.WARN]


def _warned(found, detector=None):
    return [d for d in found if d.level >= Level.WARN and (detector is None or d.detector == detector)]


def test_a_script_rewritten_between_runs_is_a_new_call():
    """``python fix.py`` three times, each after ``cat > fix.py << 'EOF'`` wrote a different script."""
    s = Stream()
    for n in range(4):
        s.call("bash", "", command=f"cat > fix.py << 'EOF'\nimport re\nprint({n})\nEOF")
        s.call(
            "bash",
            "Traceback (most recent call last):\nValueError: no match",
            error=True,
            command="python fix.py",
        )
    _, found = run(s)
    assert not _warned(found, "exact_repeat")


def test_reads_and_runs_after_shell_edits_are_new_calls():
    """``cat models.py | sed -n '319,340p'`` after each ``sed -i`` on models.py; a test
    script re-run after ``sed -i`` edits; ``git diff > patch.txt`` regenerated after edits."""
    s = Stream()
    for n in range(4):
        s.call("bash", "", command=f"sed -i 's/old{n}/new{n}/' django/db/models.py")
        s.call(
            "bash", "    def save(self):\n        pass", command="cat django/db/models.py | sed -n '319,340p'"
        )
        s.call("bash", "FAIL: help text misformatted", command="python3 test_help_formatting.py")
        s.call("bash", "", command="git diff django/ > patch.txt")
    _, found = run(s)
    assert not _warned(found, "exact_repeat")


def test_the_same_read_with_nothing_rewritten_still_repeats():
    """Without a write in between, the same read three times is still a repeat."""
    s = Stream()
    for _ in range(3):
        s.call(
            "bash", "    def save(self):\n        pass", command="cat django/db/models.py | sed -n '319,340p'"
        )
        s.call("bash", "README.md\nsetup.py", command="ls")
    _, found = run(s)
    assert _warned(found, "exact_repeat")


def test_the_identical_patch_written_again_and_again_stays_caught():
    """The identical 974-character fix.patch written four times while the agent says it
    is fixing it; and the same after a ``git apply`` that failed (running the patch does
    not rewrite it, so writing it again is a repeat)."""
    patch = (
        "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a = 1\n+a = 2\n" + "# context line\n" * 61 + "# end\n\n"
    )
    assert len(patch) == 974
    s = Stream()
    for _ in range(4):
        s.say("The patch is wrong, I will fix it.")
        s.call("bash", "", command=f"cat > fix.patch << 'EOF'\n{patch}EOF")
    _, found = run(s)
    assert _warned(found, "exact_repeat")
    s = Stream()
    for _ in range(4):
        s.call("bash", "", command=f"cat > fix.patch << 'EOF'\n{patch}EOF")
        s.call("bash", "error: corrupt patch at line 12", error=True, command="git apply fix.patch")
    _, found = run(s)
    assert _warned(found)


def test_untimed_native_messages_are_each_a_turn(tmp_path):
    """A native log without ``ts``: three empty assistant replies in a row are flagged
    (each record is its own turn); ``"continues": true`` keeps chunks in one turn."""
    import json

    from monitor.scan import scan

    def log(records):
        path = tmp_path / "s.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return scan([str(path)])

    empty = (
        [{"type": "message", "role": "user", "content": "go"}]
        + [{"type": "message", "role": "assistant", "content": ""} for _ in range(4)]
        + [{"type": "tool_call", "id": "c1", "name": "ls", "args": {}}]
    )  # (joins the 4th: a turn is judged when the next starts)
    report = log(empty)
    assert [d for d in report.detections if d.detector == "monologue" and d.level >= Level.WARN]
    chunks = [{"type": "message", "role": "user", "content": "go"}] + [
        {"type": "message", "role": "assistant", "content": f"part {n} of the answer", "continues": n > 0}
        for n in range(4)
    ]
    assert not [d for d in log(chunks).detections if d.level >= Level.WARN]


def _ci_polls(stream: Stream, rounds: int, sleep: str | None = "sleep 60", answer=lambda n: "in_progress"):
    for n in range(rounds):
        if sleep:
            stream.call("bash", "", command=sleep)
        stream.call("bash", f"build  {answer(n)}  2m ago", command="gh run view 123456")


def test_waiting_for_ci_is_not_a_loop_but_has_a_budget():
    """``sleep 60`` → ``gh run view`` "in_progress", six times: waiting, not looping (no
    warn). Past half of the 30-minute budget on the same answer: notice; all of it: warn."""
    s = Stream()
    _ci_polls(s, 6)
    _, found = run(s)
    assert not _warned(found)
    s = Stream()
    _ci_polls(s, 16, sleep="sleep 120")
    _, found = run(s)
    waiting = [d for d in found if d.detector == "waiting"]
    assert [d.level for d in waiting] == [Level.NOTICE, Level.WARN]
    assert waiting[0].count == 9 and waiting[1].count == 16  # 8 and 15 waits of 2 minutes after the first


def test_a_real_gap_between_identical_polls_is_waiting():
    """No sleep in the log, but the polls are a minute apart (the agent waited): waiting."""
    s = Stream(step=30.0)
    _ci_polls(s, 6, sleep=None)
    _, found = run(s)
    assert not _warned(found)


def test_identical_polls_back_to_back_stay_a_loop():
    """The same poll with the same answer and no wait between: a loop, as before."""
    s = Stream()
    _ci_polls(s, 4, sleep=None)
    _, found = run(s)
    assert _warned(found)


def test_the_waiting_budget_is_configurable_per_tool():
    from monitor.config import build_config
    from monitor.detect.engine import Engine

    s = Stream()
    _ci_polls(s, 6, sleep="sleep 60")
    config = build_config({"tools": {"bash": {"wait_budget_seconds": 300}}})
    _, found = run(s, engine=Engine(config))
    assert [d.level for d in found if d.detector == "waiting"] == [Level.NOTICE, Level.WARN]


def test_reading_different_ranges_of_one_file_is_not_a_loop():
    """``sed -n`` over different ranges of one file, two of them past its end (empty),
    then ``tail -20``: reading, not a loop -- an empty range shows nothing, which is
    no evidence of showing nothing new."""
    body = "\n".join(f"    line {n} of the printer" for n in range(270, 286))
    for mini in (True, False):
        wrap = (
            (lambda out: f"<returncode>0</returncode>\n<output>\n{out}\n</output>")
            if mini
            else (lambda out: out)
        )
        s = Stream()
        s.call("bash", wrap(body), command="sed -n '270,285p' sympy/printing/mathml.py")
        s.call("bash", wrap(""), command="sed -n '340,355p' sympy/printing/mathml.py")
        s.call("bash", wrap(""), command="sed -n '335,355p' sympy/printing/mathml.py")
        s.call("bash", wrap(body.split("\n", 8)[-1]), command="tail -20 sympy/printing/mathml.py")
        s.call("bash", wrap(""), command="sed -n '330,345p' sympy/printing/mathml.py")
        _, found = run(s)
        assert not _warned(found), mini


def test_a_wait_argument_is_waiting_but_a_shell_timeout_is_not():
    """``wait_for_job(timeout=600)`` polled six times is waiting; Claude Code's Bash
    ``timeout`` caps a command and does not make its repeats waiting."""
    s = Stream()
    for _ in range(6):
        s.call("wait_for_job", "job 41: running", job=41, timeout=600)
    _, found = run(s)
    assert not _warned(found)
    s = Stream()
    for _ in range(4):
        s.call("Bash", "Exit code 1\nmake: *** [all] Error 2", error=True, command="make all", timeout=120000)
    _, found = run(s)
    assert _warned(found, "exact_repeat")


def test_a_gap_between_different_calls_is_working_not_waiting():
    """Calls 30 s apart (a slow model) that cycle A, B, A, B are not waiting: only the
    same call again after the gap, with nothing between, is a poll that waited."""
    s = Stream(step=15.0)
    for _ in range(4):
        s.call("bash", "Error: connection refused", error=True, command="curl -s localhost:8080/health")
        s.call("bash", "api  Exited (1) 2 minutes ago", command="docker ps -a --filter name=api")
    _, found = run(s)
    assert _warned(found)


def test_a_linter_reporting_findings_is_not_failing():
    """pylint exits 28 (messages of several kinds found), flake8 and mypy 1: the report is
    the output, as grep's 1 is "no match". Three differently-argued pylint runs are not
    a cascade nor a retry failing the same way; pylint's usage error (32) still fails."""
    report = (
        "************* Module repro\nrepro.py:1:0: C0114: Missing module docstring (missing-module-docstring)"
    )
    s = Stream()
    for args in ("--recursive=y .", "--recursive=y --ignore=.a .", "--recursive=y --ignore-paths=.a ."):
        s.call("bash", f"Exit code 28\n{report}", error=True, command=f"cd reproduction && pylint {args}")
    s.call(
        "bash", "Exit code 1\nsrc/a.py:3:1: F401 'os' imported but unused", error=True, command="flake8 src"
    )
    s.call("bash", "Exit code 32\nusage: pylint [options]", error=True, command="pylint --bogus")
    results = _results(s)
    assert [failed(r) for r in results] == [False, False, False, False, True]
    _, found = run(s)
    assert not _warned(found)
