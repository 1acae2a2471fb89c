"""The test-fix cycle and failure cascade detectors, on loops and on honest near-misses."""

from __future__ import annotations

import random
import re

import pytest

from monitor.config import build_config
from monitor.detect.analysis.edits import manual_file_op
from monitor.detect.analysis.failures import exit_code, failed, run_outcome
from monitor.detect.analysis.testruns import is_test_run
from monitor.events import Event, Kind, Level
from tests.eventkit import Script, by, only


def pytest_output(failing: dict[str, str], passed: int = 10, secs: str = "0.12", line: int = 8) -> str:
    """A realistic pytest report with ``failing`` test -> assertion message."""
    blocks = []
    for name, message in failing.items():
        blocks.append(
            f"___ {name} ___\n\n    def {name}():\n>       assert thing()\nE       {message}\n\n"
            f"tests/test_calc.py:{line}: AssertionError"
        )
    summary = "\n".join(f"FAILED tests/test_calc.py::{n} - {m}" for n, m in failing.items())
    counts = f"{len(failing)} failed, {passed} passed" if failing else f"{passed} passed"
    return (
        "============================= test session starts ==============================\n"
        f"collected {len(failing) + passed} items\n\n"
        "=================================== FAILURES ===================================\n"
        + "\n".join(blocks)
        + "\n=========================== short test summary info ============================\n"
        + summary
        + f"\n========================= {counts} in {secs}s =========================\n"
    )


def edit(script: Script, n: int) -> None:
    script.call("edit_file", {"path": "calc.py", "old": f"v{n}", "new": f"v{n + 1}"}, "edited calc.py")


def run_tests(script: Script, output: str, code: int = 1, command: str = "pytest -q") -> None:
    script.bash(command, output, code=code)


# -- recognising test runs, failures and signatures ------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "pytest -q",
        "python -m pytest tests/",
        "cd repo && python3 -m pytest -x 2>&1 | tail -20",
        "npm test",
        "npm run test:unit",
        "yarn test",
        "pnpm test",
        "pnpm vitest run",
        "npx jest",
        "go test ./...",
        "cargo test",
        "make test",
        "python -m unittest discover",
        "bundle exec rspec",
        "uv run pytest",
        "timeout 60 pytest",
        "mix test test/foo_test.exs",
        "npx vitest run",
    ],
)
def test_test_runners_are_recognised(command):
    """Each common test runner, also behind wrappers (uv run, timeout, cd &&), is a test run."""
    assert is_test_run(Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": command}))


@pytest.mark.parametrize(
    "command",
    [
        "grep jest package.json",
        "cat tests/test_x.py",
        "ls tests",
        "echo pytest",
        "pip install pytest",
        "git commit -m 'fix test'",
        "python app.py",
        "make",
    ],
)
def test_commands_that_mention_tests_are_not_test_runs(command):
    """Mentioning a runner is not running it: only a runner in command position counts."""
    assert not is_test_run(Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": command}))


def test_codex_argv_and_test_tools():
    """Codex argv lists (["bash", "-lc", cmd]) and dedicated test tools are test runs."""
    argv = Event(Kind.TOOL_CALL, "s", 0.0, tool="shell", args={"command": ["bash", "-lc", "cargo test"]})
    tool = Event(Kind.TOOL_CALL, "s", 0.0, tool="run_tests", args={})
    assert is_test_run(argv) and is_test_run(tool)


@pytest.mark.parametrize(
    "text,code",
    [
        ("Exit code 1\nboom", 1),
        ("exit status 2", 2),
        ('{"output":"x","metadata":{"exit_code":1}}', 1),
        ("Process exited with code 0", 0),
        ("make: *** [Makefile:3: test] Error 2", 2),
        ("[The command completed with exit code 127.]", 127),
        ("HTTP status code 500", None),
        ("fine", None),
    ],
)
def test_exit_codes_in_output(text, code):
    """Exit codes are read from the common shapes agents print; HTTP status codes are not exit codes."""
    assert exit_code(text) == code


def test_grep_without_match_is_not_a_failure():
    """grep/rg/diff exit 1 means "no match"/"differs", not a failure; exit 2 is a failure."""
    call = Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": "grep -rn TODO src"})
    nomatch = Event(Kind.TOOL_RESULT, "s", 0.0, content="Exit code 1", is_error=True, call=call)
    broken = Event(Kind.TOOL_RESULT, "s", 0.0, content="Exit code 2\ngrep: src: No such file", call=call)
    assert not failed(nomatch) and failed(broken)


@pytest.mark.parametrize(
    "command,benign",
    [
        ("git grep -n retry_delay", True),
        ("cd repo && git grep -n RetryPolicy", True),
        ("git diff --exit-code", True),
        ("git --no-pager diff --quiet src/", True),
        ("command -v uv", True),
        ("type poetry", True),
        ("pip show requests", True),
        ("npm ls left-pad", True),
        ("pip install requests", False),
        ("git push origin main", False),
        ("git commit -m 'wip'", False),
        ("make build", False),
    ],
)
def test_exit_one_that_means_no(command: str, benign: bool):
    """`git grep` without a match, `git diff --exit-code` with a difference and
    "is it installed?" answer no with exit 1: searching six symbols with git
    grep used to be a failure cascade and hit the failure limit."""
    call = Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": command})
    result = Event(Kind.TOOL_RESULT, "s", 0.0, content="Exit code 1", is_error=True, call=call)
    assert failed(result) is not benign


@pytest.mark.parametrize(
    "runner,output,failures,tests",
    [
        (
            "jest",
            "FAIL src/sum.test.js\n  ● sum › adds 1 + 2\n\n    Expected: 3\n    Received: 4\n\n"
            "Tests:       1 failed, 3 passed, 4 total\nTime:        0.5 s\n",
            1,
            ("sum › adds 1 + 2",),
        ),
        (
            "go",
            "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got 3, want 4\nFAIL\n"
            "FAIL\texample.com/parse\t0.004s\n",
            1,
            ("TestParse",),
        ),
        (
            "cargo",
            "test tests::parses ... FAILED\n\nthread 'tests::parses' panicked at src/lib.rs:10:9\n"
            "test result: FAILED. 2 passed; 1 failed; 0 ignored\n",
            1,
            ("tests::parses",),
        ),
        (
            "unittest",
            "FAIL: test_upper (test_str.TestString.test_upper)\nAssertionError: 'FOO' != 'FOO2'\n"
            "Ran 3 tests in 0.001s\n\nFAILED (failures=1)\n",
            1,
            ("test_upper.test_str.TestString.test_upper",),
        ),
        (
            "rspec",
            "  1) Calc adds\n     Failure/Error: expect(add(1,1)).to eq(3)\n\n5 examples, 1 failure\n\n"
            "rspec ./spec/calc_spec.rb:4 # Calc adds\n",
            1,
            None,
        ),
    ],
)
def test_runner_summaries_are_parsed(runner, output, failures, tests):
    """The failure count and failing test names are read from each runner's report."""
    outcome = run_outcome(Event(Kind.TOOL_RESULT, "s", 0.0, content=output))
    assert outcome.failing and outcome.failures == failures
    if tests is not None:
        assert outcome.tests == tests


def test_signature_ignores_durations_and_moving_line_numbers():
    """The same failure after an edit that shifted line numbers and timings has the same signature."""
    a = run_outcome(
        Event(Kind.TOOL_RESULT, "s", 0.0, content=pytest_output({"test_add": "assert 5 == 4"}, line=8))
    )
    b = run_outcome(
        Event(
            Kind.TOOL_RESULT,
            "s",
            0.0,
            content=pytest_output({"test_add": "assert 5 == 4"}, secs="0.31", line=11),
        )
    )
    c = run_outcome(Event(Kind.TOOL_RESULT, "s", 0.0, content=pytest_output({"test_add": "assert 6 == 4"})))
    assert a.signature == b.signature != c.signature


# -- test_fix ------------------------------------------------------------------------------


def test_same_failure_despite_edits_warns_at_third_run():
    """Edit, test, edit, test, edit, test with the identical failure: warn at the 3rd run's result."""
    s = Script()
    failing = {"test_add": "assert 5 == 4", "test_sub": "assert 1 == 0"}
    for n in range(3):
        edit(s, n)
        run_tests(s, pytest_output(failing, line=8 + n))
    detections = s.run(only("test_fix"))
    warned = by(detections, "test_fix")
    assert len(warned) == 1
    d = warned[0]
    assert d.line == s.line and d.count == 3
    assert "despite 2 edits" in d.message and "2 failing" in d.message
    assert "rethink" in d.advice.lower() and "DIFFERENT fix strategy" in d.nudge
    # Was: "had 3 consecutive test failures with the same failure despite 2 edits in between".
    assert d.nudge.startswith(
        "[loopwatch] You've run the tests 3 times in a row, failing the same way each time, "
        "despite 2 edits in between."
    )


def test_the_nudge_without_edits_reads_once():
    """Was: "23 consecutive test failures with the same failure with no edit in between"."""
    s = Script()
    for _ in range(3):
        run_tests(s, pytest_output({"test_add": "assert 5 == 4"}))
    (d,) = by(s.run(only("test_fix")), "test_fix")
    assert (
        d.summary == "run the tests 3 times in a row, failing the same way each time, with no edit in between"
    )


def test_streak_keeps_emitting_and_climbs_the_ladder():
    """Each further identical failure emits again with a rising count; the ladder reaches critical."""
    s = Script()
    for n in range(6):
        edit(s, n)
        run_tests(s, pytest_output({"test_add": "assert 5 == 4"}))
    warned = by(s.run(only("test_fix")), "test_fix")
    assert [d.count for d in warned] == [3, 4, 5, 6]
    assert warned[-1].level >= Level.CRITICAL
    assert len({d.pattern for d in warned}) == 1


def test_converging_edit_test_cycle_is_progress():
    """Failure count falling 3 → 2 → 1 → 0 over four edit-test rounds never warns."""
    s = Script()
    names = ["test_a", "test_b", "test_c"]
    for n in range(4):
        edit(s, n)
        failing = {name: "assert False" for name in names[n:]}
        run_tests(s, pytest_output(failing, passed=7 + n), code=1 if failing else 0)
    assert not by(s.run(), "test_fix")


def test_changing_failing_tests_is_progress():
    """Same count, but a different failing test each time: the agent is moving through them."""
    s = Script()
    for n in range(5):
        edit(s, n)
        run_tests(s, pytest_output({f"test_case_{n}": "assert False"}))
    assert not by(s.run(), "test_fix")


def test_changing_error_is_progress():
    """Same test failing, but with a different error each time (the fix is doing something)."""
    s = Script()
    errors = [
        "NameError: name 'x' is not defined",
        "TypeError: unsupported operand",
        "assert 5 == 4",
        "assert 4 == 3",
    ]
    for n, message in enumerate(errors):
        edit(s, n)
        run_tests(s, pytest_output({"test_add": message}))
    assert not by(s.run(), "test_fix")


def test_rising_pass_count_is_progress():
    """The same test keeps failing while more and more tests pass: work is landing."""
    s = Script()
    for n in range(5):
        edit(s, n)
        run_tests(s, pytest_output({"test_legacy": "assert old_behaviour()"}, passed=10 + n))
    assert not by(s.run(only("test_fix")), "test_fix")


def test_passing_run_ends_the_streak():
    """fail, fail, pass, fail, fail: never three identical failures in a row."""
    s = Script()
    out = pytest_output({"test_add": "assert 5 == 4"})
    for code in (1, 1, 0, 1, 1):
        edit(s, code)
        run_tests(s, out if code else "12 passed in 0.1s", code=code)
    assert not by(s.run(only("test_fix")), "test_fix")


def test_user_turn_resets_the_streak():
    """A user message between runs (the user asked to try again) starts over."""
    s = Script()
    out = pytest_output({"test_add": "assert 5 == 4"})
    edit(s, 0)
    run_tests(s, out)
    edit(s, 1)
    run_tests(s, out)
    s.user("try once more, I changed the fixture")
    edit(s, 2)
    run_tests(s, out)
    assert not by(s.run(only("test_fix")), "test_fix")


def test_rerun_without_edits_says_so():
    """Identical failures with no edit between: still flagged, and the advice says rerunning won't help."""
    s = Script()
    for _ in range(3):
        run_tests(s, pytest_output({"test_add": "assert 5 == 4"}))
    (d,) = by(s.run(only("test_fix")), "test_fix")
    assert "no edit in between" in d.message and "without changing anything" in d.advice


@pytest.mark.parametrize(
    "command,output",
    [
        (
            "npx jest",
            "FAIL src/sum.test.js\n  ● sum › adds\n\n    Expected: 3\n    Received: 4\n\n"
            "Tests:       1 failed, 3 passed, 4 total\nTime:        0.5 s\n",
        ),
        (
            "go test ./...",
            "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got 3, want 4\nFAIL\nexit status 1\n",
        ),
        ("cargo test", "test tests::parses ... FAILED\ntest result: FAILED. 2 passed; 1 failed; 0 ignored\n"),
        ("make test", "cc -o t t.c\n./t\nassertion failed: x == 2\nmake: *** [Makefile:4: test] Error 1\n"),
        ("npm test", "> app@1.0.0 test\n> node test.js\n\nAssertionError [ERR_ASSERTION]: 1 == 2\n"),
    ],
)
def test_other_runners_loop(command, output):
    """The same failure three times through jest, go, cargo, make and npm is caught."""
    s = Script()
    for n in range(3):
        edit(s, n)
        run_tests(s, output, command=command)
    assert by(s.run(only("test_fix")), "test_fix")


def test_test_tool_with_is_error():
    """A dedicated run_tests tool whose result is an error counts as a failing run."""
    s = Script()
    for n in range(3):
        edit(s, n)
        s.call("run_tests", {}, "1 failed: test_login - KeyError: 'user'", is_error=True)
    assert by(s.run(only("test_fix")), "test_fix")


def test_exempt_tool_and_threshold_override():
    """[tools.bash] exempt silences it; threshold = 5 moves the warning to the 5th run."""

    def script() -> Script:
        s = Script()
        for n in range(5):
            edit(s, n)
            run_tests(s, pytest_output({"test_add": "assert 5 == 4"}))
        return s

    disabled = {n: {"enabled": False} for n in ("exact_repeat", "failure_cascade", "limits")}
    exempt = build_config({"tools": {"bash": {"exempt": True}}, "detectors": disabled})
    assert not by(script().run(exempt), "test_fix")
    raised = build_config({"tools": {"bash": {"threshold": 5}}, "detectors": disabled})
    warned = by(script().run(raised), "test_fix")
    assert [d.count for d in warned] == [5]


# -- failure_cascade -----------------------------------------------------------------------


def test_three_different_failures_are_adapting_a_notice_not_a_loop():
    """Three different commands failing three different ways is an agent changing
    approach after each failure (issue 13): a notice; failures going on to five in a
    row, every one different, propose a warning that the evidence does not bear out
    (issue 31: detect/corroboration.py): it stays a notice, and so does the failure
    limit (5) over those five different failures."""
    s = Script()
    s.bash("make deps", "make: *** No rule to make target 'deps'.  Stop.", code=2)
    s.bash("pip install flask", "ERROR: Could not find a version that satisfies the requirement", code=1)
    s.bash("python3 -m pip install --user flask", "error: externally-managed-environment", code=1)
    found = s.run(only("failure_cascade"))
    assert not by(found, "failure_cascade")
    (d,) = by(found, "failure_cascade", Level.NOTICE)
    assert d.count == 3 and d.line == s.line and "each differently" in d.message
    s.bash("uv pip install flask", "error: No virtual environment found", code=2)
    s.bash("conda install flask", "CondaHTTPError: HTTP 000 CONNECTION FAILED", code=1)
    found = s.run(only("failure_cascade"))
    assert not by(found, "failure_cascade")
    (d,) = [x for x in by(found, "failure_cascade", Level.NOTICE) if x.count == 5]
    assert d.proposed is Level.WARN and "5 consecutive shell commands failed" in d.message
    assert "did not end the same way" in d.message and "write_file" not in d.advice
    everything = s.run(build_config({}))
    assert not by(everything, "limits")  # the failure limit (5) over failures that all differ
    assert by(everything, "limits", Level.NOTICE)[-1].proposed is Level.WARN


def test_a_failure_that_dealt_with_the_one_before_starts_the_streak_again():
    """Installing the module the last error named and meeting the next missing one is progress
    (issue 31): "No module named 'asgiref'", then 'pytz', then 'sqlparse' is not "again the same
    way", and no count of such steps warns. The same module missing again after installing it is."""
    s = Script()
    s.bash("python repro.py", "ModuleNotFoundError: No module named 'asgiref'", code=1)
    for before, now in (
        ("asgiref", "pytz"),
        ("pytz", "sqlparse"),
        ("sqlparse", "tzdata"),
        ("tzdata", "yaml"),
    ):
        s.bash(
            f"pip install {before} && python repro.py",
            f"ModuleNotFoundError: No module named '{now}'",
            code=1,
        )
    assert not by(s.run(only("failure_cascade")), "failure_cascade", Level.NOTICE)
    s = Script()
    s.bash("python repro.py", "ModuleNotFoundError: No module named 'foo'", code=1)
    s.bash("pip install foo && python repro.py", "ModuleNotFoundError: No module named 'foo'", code=1)
    s.bash("pip install -U foo && python repro.py", "ModuleNotFoundError: No module named 'foo'", code=1)
    (d,) = by(s.run(only("failure_cascade")), "failure_cascade")
    assert d.count == 3 and "the same way as the one before" in d.message


def test_calls_one_reply_made_together_are_one_failure_of_the_cascade():
    """Three parallel `ls` of one reply, all "No such file", are one failed attempt, not a
    cascade failing the same way three times."""
    s = Script()
    for n in range(3):
        s.call("bash", {"command": f"ls /repo/pkg{n}/"}, answer=False)
    for n, call in enumerate(s.records[-3:]):
        text = f"Exit code 2\nls: cannot access '/repo/pkg{n}/': No such file or directory"
        s.add({"type": "tool_result", "id": call["id"], "content": text, "is_error": True})
    assert not by(s.run(only("failure_cascade")), "failure_cascade", Level.NOTICE)


def test_the_same_failure_again_makes_the_cascade_a_loop():
    """brew, then conda: "command not found" twice in a row -- another program, the
    same failure -- warns at the third failure as before."""
    s = Script()
    s.bash(
        "apt-get install -y libssl-dev",
        "E: Could not open lock file - open (13: Permission denied)",
        code=100,
    )
    s.bash("brew install openssl", "bash: brew: command not found", code=127)
    s.bash("conda install -y openssl", "bash: conda: command not found", code=127)
    (d,) = by(s.run(only("failure_cascade")), "failure_cascade")
    assert d.count == 3 and "the same way as the one before" in d.message


def test_file_operations_by_hand_get_file_tool_advice():
    """Failing cat / sed -i / echo > / printf > point the agent at read_file, write_file, edit_file."""
    s = Script()
    s.bash("cat src/config.yml", "cat: src/config.yml: No such file or directory", code=1)
    s.bash(
        "sed -i 's/debug: false/debug: true/' src/config.yaml",
        "sed: can't read src/config.yaml: No such file or directory",
        code=2,
    )
    s.bash("echo 'debug: true' > /etc/app/config.yml", "bash: /etc/app/config.yml: Permission denied", code=1)
    s.bash("printf 'x' > conf/out.txt", "bash: conf/out.txt: No such file or directory", code=1)
    warned = by(s.run(only("failure_cascade")), "failure_cascade")
    assert [d.count for d in warned] == [3, 4]
    assert all(d.pattern == "shell_failures:file_ops" for d in warned)
    for tool in ("read_file", "write_file", "edit_file"):
        assert tool in warned[-1].advice and tool in warned[-1].nudge
    assert "file operations done by hand" in warned[-1].message


def test_failing_command_then_fix_is_honest():
    """A command fails, the agent fixes the cause, it succeeds: no warning, ever."""
    s = Script()
    for n in range(4):
        s.bash(f"python step{n}.py", "Traceback ...\nKeyError: 'x'", code=1)
        s.call("edit_file", {"path": f"step{n}.py"}, "ok")
        s.bash(f"python step{n}.py", "done")
    assert not by(s.run(), "failure_cascade")


def test_grep_misses_do_not_cascade():
    """Searching and finding nothing (grep/rg exit 1) is not a failing command."""
    s = Script()
    for word in ("fooBar", "foo_bar", "FOO_BAR", "foobar"):
        s.call("bash", {"command": f"rg -n {word} src"}, "Exit code 1", is_error=True)
    assert not by(s.run(only("failure_cascade")), "failure_cascade")


def test_non_shell_results_reset_or_are_neutral():
    """A successful read_file ends a cascade; a failing web_fetch neither counts nor ends it."""
    s = Script()
    s.bash("make build", "make: *** [Makefile:2: build] Error 1", code=2)
    s.bash("make all", "make: *** [Makefile:5: all] Error 1", code=2)
    s.call("read_file", {"path": "Makefile"}, "build:\n\tcc main.c")
    s.bash("make -j4", "make: *** [Makefile:2: build] Error 1", code=2)
    assert not by(s.run(only("failure_cascade")), "failure_cascade")

    s = Script()
    s.bash("make build", "make: *** [Makefile:2: build] Error 1", code=2)
    s.bash("make all", "make: *** [Makefile:5: all] Error 1", code=2)
    s.call("web_fetch", {"url": "https://example.com/docs"}, "timeout", is_error=True)
    s.bash("make -j4", "make: *** [Makefile:2: build] Error 1", code=2)
    (d,) = by(s.run(only("failure_cascade")), "failure_cascade", Level.NOTICE)
    assert d.count == 3


def test_codex_style_results():
    """Codex argv commands with "exit_code" metadata in the output and no is_error flag fail too."""
    s = Script()
    for n in range(3):
        s.call(
            "shell",
            {"command": ["bash", "-lc", f"./configure --opt{n}"]},
            '{"output":"configure: error: no acceptable C compiler","metadata":{"exit_code":77}}',
        )
    assert by(s.run(only("failure_cascade")), "failure_cascade")


def test_manual_file_op_classification():
    """cat/head reads, echo/printf redirects, heredocs and sed -i are by hand; python x.py and echo alone are not."""
    assert all(
        manual_file_op(c)
        for c in (
            "cat foo.py",
            "echo hi > a.txt",
            "sed -i 's/a/b/' f",
            "printf 'x' >> f",
            "cat > f <<EOF\nx\nEOF",
            "head -n 5 a.py",
        )
    )
    assert not any(manual_file_op(c) for c in ("python x.py", "echo hi", "ls > /dev/null", "make", None))


# -- the runner hint's shortcut gives what the plain regex gives ------------------------------

_PLAIN_RUNNER_HINT = re.compile(
    r"test|spec|check|jest|mocha|ava|karma|tap|tox|nox|green|ward|pest|busted|prove|cypress|nextest"
)


def test_runner_hint_on_long_commands_matches_the_regex():
    from monitor.detect.analysis.testruns import _runner_hint

    rng = random.Random(8)
    words = ["echo", "x" * 300, "pytest", "npm", " ", "tes", "t", "ch", "eck", "\n", "é" * 50, "tap"]
    for _ in range(5000):
        command = "".join(rng.choice(words) for _ in range(rng.randrange(1, 30)))
        assert _runner_hint(command) == bool(_PLAIN_RUNNER_HINT.search(command, 0, 4000)), command


def test_shell_calls_cancelled_with_a_failing_sibling_do_not_extend_a_cascade():
    """One failing command in a parallel batch and its cancelled siblings are one
    failure: the cancelled ones neither extend nor end the cascade."""
    s = Script()
    s.bash("python app.py", "ModuleNotFoundError: No module named 'flask'", code=1)
    for n in range(3):
        s.call(
            "Bash",
            {"command": f"ls dir{n}"},
            "<tool_use_error>Sibling tool call errored</tool_use_error>",
            is_error=True,
        )
    assert not by(s.run(only("failure_cascade")), "failure_cascade")
    # Two more failures, each of another kind, neither dealing with what the one before
    # named (a fix that did would start the streak again: failing forward).
    s.bash("node server.js", "Error: Cannot find module 'express'", code=1)
    s.bash("ruby app.rb", "cannot load such file -- sinatra (LoadError)", code=1)
    (d,) = by(s.run(only("failure_cascade")), "failure_cascade", Level.NOTICE)
    assert d.count == 3


# -- test runs that report failing tests ----------------------------------------------------


def _triage(script: Script, cases: list[str]) -> None:
    """Run each parametrized case on its own; each fails its own way."""
    for n, case in enumerate(cases):
        run_tests(
            script,
            pytest_output({f"test_parse[{case}]": f"AssertionError: assert {n} == {n + 1}"}),
            command=f"pytest -q 'tests/test_calc.py::test_parse[{case}]'",
        )


def test_failing_cases_run_one_by_one_are_triage_not_a_cascade():
    """Six failing test cases run one at a time: the runner worked each time
    and reported a different failing test. No cascade, no failure limit
    (which used to terminate the session at the fifth), no repeated result
    (whose error signature drops digits, so the cases looked alike)."""
    s = Script()
    s.user("Find out which parser cases fail.")
    _triage(s, [f"case{n}" for n in range(1, 7)])
    found = s.run(build_config({}))
    assert not [(d.detector, d.line, d.message) for d in found if d.level >= Level.WARN]
    assert not [d for d in found if d.detector in ("failure_cascade", "limits", "repeated_result")]


def test_a_reported_test_failure_neither_extends_nor_ends_a_cascade():
    """Shell failures around a test run that reported failing tests still add up."""
    s = Script()
    s.bash("cat src/config.yml", "cat: src/config.yml: No such file or directory", code=1)
    _triage(s, ["case1"])
    s.bash("cat config.yml", "cat: config.yml: No such file or directory", code=1)
    s.bash("cat conf/config.yml", "cat: conf/config.yml: No such file or directory", code=1)
    (d,) = by(s.run(only("failure_cascade")), "failure_cascade")
    assert d.count == 3 and d.line == s.line


def test_a_test_run_that_could_not_run_is_a_failed_command():
    """`pytest: command not found` is the command failing, not the tests: it counts."""
    s = Script()
    for command in ("pytest -q", "py.test -q", "python -m pytest -q"):
        s.bash(command, f"bash: {command.split()[0]}: command not found", code=127)
    assert by(s.run(only("failure_cascade")), "failure_cascade")


def test_the_same_failing_test_from_different_commands_is_a_repeated_result():
    """Four ways of running the suite, the same test failing the same way:
    still one repeated failure, quoted by its test name."""
    s = Script()
    output = pytest_output({"test_parse[case7]": "AssertionError: assert 7 == 8"})
    for command in ("pytest -q", "python -m pytest -q", "pytest -q tests/", "pytest -x -q"):
        run_tests(s, output, command=command)
    hits = by(s.run(only("repeated_result")), "repeated_result")
    assert hits and hits[0].count == 4
    assert "test_parse[case7]" in hits[0].message and "test failure" in hits[0].message


def test_test_runs_one_reply_made_together_are_one_run_of_the_cycle():
    """Two test runs made in parallel by one reply, failing the same way, are one run: with one
    earlier failing run that is two runs of the cycle, not three (issue 31)."""
    s = Script()
    missing = "Exit code 1\n/usr/local/bin/python: No module named pytest"
    s.bash("python -m pytest tests/test_blockmatrix.py -v", missing, code=1)
    s.call(
        "edit_file", {"path": "matexpr.py", "old": "a", "new": "b"}, "Successfully edited file: matexpr.py"
    )
    for target in ("tests/test_blockmatrix.py", "tests/"):
        s.call("bash", {"command": f"python -m pytest {target} -v 2>&1 | tail -30"}, answer=False)
    for call in s.records[-2:]:
        s.add({"type": "tool_result", "id": call["id"], "content": missing, "is_error": True})
    assert not by(s.run(only("test_fix")), "test_fix")
    s.bash("python -m pytest tests/ -x", missing, code=1)
    assert by(s.run(only("test_fix")), "test_fix")


# -- a rerun after an edit that printed something new (outcomes.printed_lines) ---------------


def unittest_output(source: str, line: int, printed: str = "") -> str:
    """A Django/unittest report of one error whose traceback quotes ``source`` at ``line``."""
    return (
        "Creating test database for alias 'default'...\n"
        f"{printed}"
        ".............................s...........E\n"
        "======================================================================\n"
        "ERROR: test_signals (delete.tests.DeletionTests)\n"
        "----------------------------------------------------------------------\n"
        "Traceback (most recent call last):\n"
        '  File "/testbed/tests/delete/tests.py", line 256, in test_signals\n'
        "    r.delete()\n"
        f'  File "/testbed/django/db/models/deletion.py", line {line}, in related_objects\n'
        f"    {source}\n"
        "delete.models.R.DoesNotExist: R matching query does not exist.\n\n"
        "----------------------------------------------------------------------\n"
        "Ran 42 tests in 0.521s\n\nFAILED (errors=1, skipped=1)\n"
    )


def test_printed_lines_leave_out_quoted_source():
    from monitor.detect.analysis.outcomes import body_lines, printed_lines

    a = unittest_output("return qs.only('pk')", 231)
    b = unittest_output("return qs.only('pk', 'r_id') if fast else qs", 244)
    assert body_lines(a) != body_lines(b)  # the traceback quotes the edited code
    assert printed_lines(a) == printed_lines(b)
    # pytest's traceback: the test's source, its > and E lines and its location are quotes.
    one = pytest_output({"test_add": "assert 5 == 4"}, line=8)
    two = one.replace(
        "    def test_add():\n>       assert thing()", "    def test_add():\n>       assert thing(2)"
    )
    assert printed_lines(one) == printed_lines(two.replace("test_calc.py:8:", "test_calc.py:9:"))
    # Node's stack frames and a code frame are quotes; parallel runs shuffle the progress line.
    js = (
        "TypeError: x is undefined\n    at parse (src/a.js:10:5)\n> 10 | return x.y\n     |        ^\n..F.s\n"
    )
    moved = "TypeError: x is undefined\n    at parse (src/a.js:12:5)\n> 12 | return x.y.z\n     |          ^\n.F..s\n"
    assert printed_lines(js) == printed_lines(moved)
    # What the program printed is kept.
    debug = unittest_output("return qs.only('pk')", 231, printed="Checking model S, has_post: True\n")
    assert printed_lines(debug) > printed_lines(a)
    # A label over nothing (stderr printed, and empty) is no output of its own.
    labelled = unittest_output("return qs.only('pk')", 231, printed="STDERR output:\n\n")
    assert printed_lines(labelled) == printed_lines(a)


def test_a_rerun_after_an_edit_that_printed_something_new_is_no_repeat():
    """The same error twice; a debug print added, and the third run prints its line: the edit
    took effect (django-11087); the next run with nothing new printed counts again."""
    s = Script()
    edit(s, 0)
    run_tests(s, unittest_output("return qs.only('pk')", 231))
    edit(s, 1)
    run_tests(s, unittest_output("return qs.only('pk', 'r_id')", 233))
    edit(s, 2)
    run_tests(s, unittest_output("print(related)", 231, printed="Checking model S, has_post: True\n"))
    assert not by(s.run(only("test_fix")), "test_fix")
    edit(s, 3)  # (a fix that changes nothing printed: the streak goes on, 3 runs)
    run_tests(
        s, unittest_output("print(related); return qs", 232, printed="Checking model S, has_post: True\n")
    )
    (d,) = by(s.run(only("test_fix")), "test_fix")
    assert d.count == 3


def test_edits_that_only_change_the_quoted_source_still_repeat():
    """After each edit the traceback quotes the new code and its line numbers, nothing printed
    differs: the same failure three times."""
    s = Script()
    for n, source in enumerate(("return qs.only('pk')", "return qs.only('pk', 'r_id')", "return qs")):
        edit(s, n)
        run_tests(s, unittest_output(source, 231 + 2 * n))
    (d,) = by(s.run(only("test_fix")), "test_fix")
    assert d.count == 3
