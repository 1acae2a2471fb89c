"""A warning must show the outcome it says has stopped being new (monitor/detect/corroboration.py)."""

from __future__ import annotations

import json
from pathlib import Path

from monitor.config import build_config
from monitor.detect.analysis.failures import closer_look, command_words
from monitor.detect.corroboration import OutcomeLedger, ceiling, repeats
from monitor.events import Event, EventRef, Kind, Level
from monitor.scan import scan

SCENARIOS = Path(__file__).resolve().parent / "scenarios"

#: Five setbacks over five different commands, each failing its own way: nothing repeats.
SETBACKS = [
    ("make build", "Exit code 2\nMakefile:12: *** missing separator.  Stop."),
    ("npm run build", "Exit code 1\nError: Cannot find module 'webpack'"),
    (
        "docker compose up -d db",
        "Exit code 1\npermission denied while trying to connect to the Docker daemon socket",
    ),
    (
        "python manage.py migrate",
        "Exit code 1\nOperationalError: could not connect to server: Connection refused",
    ),
    ("cargo build --release", "Exit code 101\nerror: linker `cc` not found"),
]


def _log(tmp_path: Path, steps: list[tuple[str, str]]) -> Path:
    records: list[dict] = [{"ts": 1750200000, "type": "session_start", "agent": "test-agent", "pid": 4242}]
    ts = 1750200003
    for number, (command, output) in enumerate(steps, 1):
        records.append(
            {"ts": ts, "type": "tool_call", "id": f"c{number}", "name": "Bash", "args": {"command": command}}
        )
        records.append(
            {"ts": ts + 3, "type": "tool_result", "id": f"c{number}", "content": output, "is_error": True}
        )
        ts += 6
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def _warned(path: Path, detector: str, **detectors: dict) -> list[int | None]:
    config = build_config({"detectors": detectors})
    report = scan([str(path)], config)
    return [d.line for d in report.detections if d.detector == detector and d.level >= Level.WARN]


def test_five_different_failures_are_no_cascade_loop(tmp_path):
    """failure_cascade's long streak (5 failures, however different) cites five
    rounds that all ended differently: a notice that says so, not a warning."""
    path = _log(tmp_path, SETBACKS)
    assert _warned(path, "failure_cascade", limits={"enabled": False}) == []
    report = scan([str(path)], build_config({"detectors": {"limits": {"enabled": False}}}))
    quieted = [d for d in report.detections if d.proposed >= Level.WARN and d.level is Level.NOTICE]
    assert [d.detector for d in quieted] == ["failure_cascade"]
    assert "did not end the same way" in quieted[0].message


def test_a_limit_over_changing_failures_stays_a_notice(tmp_path):
    """Fifteen failures in a row, every one different (a long, honest setup
    fight): the failure limit proposes warn, critical and terminate, and each is
    held at notice (issue 31, item 6: failures that keep changing are no loop)."""
    steps = [
        (f"setup-step-{n} --flag", f"Exit code 1\nerror: step {chr(97 + n)}{chr(98 + n)} broke")
        for n in range(15)
    ]
    report = scan([str(_log(tmp_path, steps))])
    limits = [d for d in report.detections if d.detector == "limits" and d.proposed >= Level.WARN]
    assert limits and max(d.level for d in limits) is Level.NOTICE
    assert max(d.proposed for d in limits) >= Level.CRITICAL


def test_the_same_kind_of_failure_still_warns(tmp_path):
    """The stuck neighbour: one package manager after another, two of them
    "command not found" -- a failure of the same kind, names aside."""
    assert _warned(SCENARIOS / "c_loop_cascade_installs.jsonl", "failure_cascade", limits={"enabled": False})
    steps = [*SETBACKS[:3], ("brew install cc", "bash: brew: command not found"), *SETBACKS[3:]]
    steps.insert(4, ("conda install cc", "bash: conda: command not found"))
    assert _warned(_log(tmp_path, steps), "failure_cascade", limits={"enabled": False})


def test_the_failure_limit_over_failures_that_all_differ_is_a_notice(tmp_path):
    """Five different failures reach the limit, but a count of failures that keep changing
    is no evidence of a loop (c_honest_limits_failures_all_differ): held at notice."""
    assert _warned(_log(tmp_path, SETBACKS), "limits") == []


def test_reading_one_file_again_shows_nothing_new():
    """Outputs that differ but show only lines shown before (cat, then head) repeat."""
    ledger = OutcomeLedger()
    whole = "HOST = 'a'\nPORT = 1\nDEBUG = False\nWORKERS = 4"
    refs = []
    for seq, text in ((2, whole), (4, "HOST = 'a'\nPORT = 1"), (6, "DEBUG = False\nWORKERS = 4")):
        result = Event(Kind.TOOL_RESULT, "s", 0.0, content=text)
        result.seq = seq
        ledger.observe(result)
        refs.append(EventRef(seq, "tool_result", "f", seq, None))
    assert repeats(ledger.outcomes(refs))
    assert ceiling("fingerprint", Level.WARN, refs, ledger) is Level.TERMINATE


def test_outputs_that_keep_moving_contradict_a_warning():
    ledger = OutcomeLedger()
    refs = []
    for seq, text in ((2, "status: 10% done"), (4, "status: building step two"), (6, "status: uploading")):
        result = Event(Kind.TOOL_RESULT, "s", 0.0, content=text)
        result.seq = seq
        ledger.observe(result)
        refs.append(EventRef(seq, "tool_result", "f", seq, None))
    assert ceiling("exact_repeat", Level.WARN, refs, ledger) is Level.NOTICE
    # Below warn, and for text-only detectors, nothing is judged.
    assert ceiling("exact_repeat", Level.NOTICE, refs, ledger) is Level.TERMINATE
    assert ceiling("chanting", Level.WARN, refs, ledger) is Level.TERMINATE
    # Turns that repeat their words while their calls' results move: judged as the same call.
    assert ceiling("turn_similarity", Level.WARN, refs, ledger) is Level.NOTICE
    # A limit over failures that all differ is no evidence of a loop either (issue 31, item 6).
    assert ceiling("limits", Level.WARN, refs, ledger) is Level.NOTICE
    assert ceiling("limits", Level.TERMINATE, refs, ledger) is Level.NOTICE
    # Fewer than two known results: nothing contradicts the detector.
    assert ceiling("exact_repeat", Level.WARN, refs[:1], ledger) is Level.TERMINATE
    message = [EventRef(99, "message", "f", 99, None)]
    assert ceiling("stale_outcome", Level.WARN, message, ledger) is Level.TERMINATE


def _ledger(texts: list[str]) -> tuple[OutcomeLedger, list[EventRef]]:
    ledger = OutcomeLedger()
    refs = []
    for seq, text in enumerate(texts, 1):
        result = Event(Kind.TOOL_RESULT, "s", 0.0, content=text)
        result.seq = 2 * seq
        ledger.observe(result)
        refs.append(EventRef(2 * seq, "tool_result", "f", 2 * seq, None))
    return ledger, refs


def test_the_same_call_must_show_its_latest_outcome_repeating():
    """The same call again (exact_repeat, similar_args, cycle, fingerprint) whose latest
    result is new -- two runs alike, then a third that moved -- is a notice; an outcome
    detector needs only some two of its results to agree."""
    ledger, refs = _ledger(["FAILED test_a - assert 1 == 2", "FAILED test_a - assert 1 == 2", "3 passed"])
    for detector in ("exact_repeat", "similar_args", "cycle", "fingerprint"):
        assert ceiling(detector, Level.WARN, refs, ledger) is Level.NOTICE
    # An outcome detector needs only two of its results to agree to warn, but its latest
    # result moved: it warns and climbs no further.
    assert ceiling("stale_outcome", Level.WARN, refs, ledger) is Level.WARN
    ledger, refs = _ledger(["3 passed", "FAILED test_a - assert 1 == 2", "FAILED test_a - assert 1 == 2"])
    assert ceiling("exact_repeat", Level.WARN, refs, ledger) is Level.TERMINATE
    assert ceiling("stale_outcome", Level.WARN, refs, ledger) is Level.TERMINATE


def test_a_loop_that_met_a_new_failure_climbs_no_further_than_warn(tmp_path):
    """Two failures alike, then a failure after failure each new (an honest setup fight
    that met one obstacle twice): the cascade warns, but a loop whose latest result is
    new has not shown it again, so it never reaches critical or terminate."""
    twice = ("bash: brew: command not found", "bash: conda: command not found")
    steps = [("brew install cc", twice[0]), ("conda install cc", twice[1])]
    steps += [
        (f"setup-step-{n}", f"Exit code 1\nerror: step {chr(97 + n)}{chr(98 + n)} broke") for n in range(8)
    ]
    report = scan([str(_log(tmp_path, steps))], build_config({"detectors": {"limits": {"enabled": False}}}))
    cascade = [d for d in report.detections if d.detector == "failure_cascade"]
    assert max(d.level for d in cascade) is Level.WARN
    assert max(d.proposed for d in cascade) is Level.WARN  # proposed warn: the ladder would have climbed
    assert sum(d.level is Level.WARN for d in cascade) >= 3  # the third would have been critical


def test_the_next_missing_module_is_a_new_failure(tmp_path):
    """One import after another failing on a different missing module is the next
    setback each time, not the same failure again (issue 31, item 6); the same module
    missing again is."""
    modules = ["asgiref", "pytz", "sqlparse", "zoneinfo", "distutils.cmd", "typing_extensions"]
    steps = [
        (
            f"python3 repro_{n}.py",
            f"Traceback (most recent call last):\nModuleNotFoundError: No module named '{m}'",
        )
        for n, m in enumerate(modules)
    ]
    assert _warned(_log(tmp_path, steps), "failure_cascade", limits={"enabled": False}) == []
    again = [(f"python3 repro_{n}.py", steps[0][1]) for n in range(6)]
    assert _warned(_log(tmp_path, again), "failure_cascade", limits={"enabled": False})


def test_an_acknowledgement_says_nothing_either_way():
    """ "Applied edit to app.py" twice is no outcome repeating: with one telling result
    left, nothing is known either way and the detector stands."""
    ledger, refs = _ledger(["Applied edit to app.py", "Applied edit to app.py", "Traceback: boom"])
    assert ledger.outcomes(refs)[0][0] == 6
    assert len(ledger.outcomes(refs)) == 1
    assert ceiling("exact_repeat", Level.WARN, refs, ledger) is Level.TERMINATE


def test_the_ledger_is_bounded():
    ledger = OutcomeLedger()
    for seq in range(1, 500):
        result = Event(Kind.TOOL_RESULT, "s", 0.0, content=f"line {seq}")
        result.seq = seq
        ledger.observe(result)
    assert len(ledger.kept) <= 24 and len(ledger.by_seq()) <= 24


def _aider_runs(tmp_path: Path, command: str, times: int) -> Path:
    """An Aider history where the model suggests ``command`` ``times`` times in a row
    and Aider runs it: the output of a suggested command is not in the file."""
    lines = [
        "",
        "# aider chat started at 2025-07-02 15:27:10",
        "",
        "> Main model: gpt-4o",
        "",
        "#### start it",
        "",
    ]
    for _ in range(times):
        lines += [
            "Let me start the development server to check the page.",
            "",
            "```bash",
            command,
            "```",
            "",
            "> Tokens: 2.1k sent, 40 received.  ",
            f"> {command}  ",
            "> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: y  ",
            f"> Running {command}  ",
            "",
        ]
    path = tmp_path / "proj" / ".aider.chat.history.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_repeat_whose_results_the_log_does_not_hold_is_never_flagged_blind(tmp_path):
    """Aider runs the command the model suggested; its output is not in the file
    (``meta["unrecorded"]``): the same call again is a notice, never "with the same result"."""
    report = scan([str(_aider_runs(tmp_path, "npm run dev", 4))])
    repeats = [d for d in report.detections if d.detector in ("exact_repeat", "fingerprint", "cycle")]
    assert repeats, "the same call again is still noticed"
    assert all(d.level is Level.NOTICE for d in repeats)
    assert max(d.proposed for d in repeats) >= Level.WARN


#: An environment set up through different setbacks (pydata__xarray-6744): one of them, an
#: install failing to build, is run again narrower to read why (a closer look).
_BUILD_FAILED = (
    "note: This error originates from a subprocess, and is likely not a problem with pip.\n"
    "error: subprocess-exited-with-error\n"
    "Getting requirements to build wheel did not run successfully.\n"
    "exit code: 1\n"
    "note: This error originates from a subprocess, and is likely not a problem with pip.\n"
    "Exit code 1"
)
_BUILD_FAILED_WHY = (
    "Collecting numpy==1.23.0\n"
    "  Installing build dependencies: started\n"
    '  File "/tmp/pip-build-env/setuptools/__init__.py", line 10, in <module>\n'
    "    import distutils.core\n"
    "  ModuleNotFoundError: No module named 'distutils'\n" + _BUILD_FAILED
)
SETUP = [
    ("ls /usr/local/bin/python*; which python3.10", "/usr/local/bin/python\nExit code 127"),
    (
        "pip install numpy==1.23.0 pandas==1.5.3 scipy==1.11.1 2>&1 | tail -10",
        "error: externally-managed-environment\nhint: See PEP 668 for the detailed specification.\nExit code 1",
    ),
    (
        "pip install --break-system-packages numpy==1.23.0 pandas==1.5.3 scipy==1.11.1 2>&1 | tail -10",
        _BUILD_FAILED,
    ),
    ("pip install --break-system-packages numpy==1.23.0 2>&1 | tail -30", _BUILD_FAILED_WHY),
    (
        "sudo apt-get install -y -qq python3.10 python3.10-venv",
        "E: Unable to locate package python3.10-venv\nExit code 100",
    ),
    (
        "python3 -m venv /tmp/env",
        "The virtual environment was not created successfully because ensurepip is not\navailable.\nExit code 1",
    ),
]


def test_a_closer_look_at_the_failure_before_is_no_repeat(tmp_path):
    """Six setbacks in a row, each different but one: the install that failed to build, run
    again narrower (numpy alone, a longer tail) to read the traceback that names the cause. A look,
    not a retry: the long streak and the failure limit stay a notice (xarray-6744)."""
    path = _log(tmp_path, SETUP)
    assert _warned(path, "failure_cascade") == []
    assert _warned(path, "limits") == []
    report = scan([str(path)])
    assert max(d.proposed for d in report.detections if d.detector == "failure_cascade") >= Level.WARN


def test_the_same_install_again_is_still_a_repeat(tmp_path):
    """The stuck neighbour: the failed install run again as it was (or with another package
    list, not a part of the first) fails the same way: the streak warns."""
    again = [*SETUP[:3], SETUP[2], *SETUP[4:]]
    assert _warned(_log(tmp_path, again), "failure_cascade")
    other = [
        *SETUP[:2],
        (SETUP[2][0], _BUILD_FAILED_WHY),  # (pip's wrapper lines alone would say nothing of why)
        ("pip install --break-system-packages numpy==1.23.0 dask 2>&1 | tail -30", _BUILD_FAILED_WHY),
        *SETUP[4:],
    ]
    assert _warned(_log(tmp_path, other), "failure_cascade")


def test_a_closer_look_is_a_narrower_or_filtered_command_showing_more():
    """closer_look: narrowed (a part of the words, digits aside) or filtered (the same command
    piped into tail, head or grep), and showing two lines the failure before did not."""
    more, less = frozenset({1, 2, 3, 4}), frozenset({1})
    install = "pip install A B C 2>&1 | tail -10"
    assert closer_look(install, "pip install A 2>&1 | tail -30", less, more)
    assert closer_look("pip install A B C", "pip install A 2>&1 | grep -i error", less, more)
    assert closer_look("make build", "make build 2>&1 | tail -50", less, more)
    assert command_words("tail -10") == command_words("tail -30")
    # One filter swapped for another: the failure's end, then its error lines (a grep pattern
    # holding `\|` is one command of the pipeline: scikit-learn-14983, read honest).
    assert closer_look("make build | tail -20", "make build 2>&1 | grep -i error | head -20", less, more)
    assert closer_look(
        "pip install -e . 2>&1 | tail -20",
        'pip install -e . 2>&1 | grep -i "error\\|Error" | head -20',
        less,
        more,
    )
    # Left alone: the same command, other words, nothing new shown but the error.
    assert not closer_look(install, install, less, more)
    assert not closer_look(install, "pip install A D 2>&1 | tail -30", less, more)
    assert not closer_look(install, "pip install A 2>&1 | tail -30", less, frozenset({1, 2}))
    assert not closer_look(None, "pip install A", less, more)
