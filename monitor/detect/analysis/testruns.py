"""Test runs: whether a call runs a test suite, and what its output reports.

* :func:`is_test_run` — a test tool, or a shell command starting a test
  runner (pytest, npm test, jest, vitest, go test, cargo test, make test,
  unittest, rspec, …);
* :func:`read_run` — what a test run's output reports: failing and passed
  counts, the failing tests' names and a signature of the failure (its
  names and error lines, noise aside), for telling "the same failure again"
  from progress; a run whose last line gives a failing verdict in words
  ("FAIL: …", "Failure: …") failed whatever its exit status.
  :func:`monitor.detect.analysis.failures.run_outcome` asks it for a result,
  with whether the result failed.

Outputs are only searched in their head and tail (runners print failures and
the summary last); names and error lines are bounded per run.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from monitor.detect.analysis.memo import TextMemo
from monitor.detect.analysis.shell import output_ends, segments, shell_command, tool_kind, unwrapped
from monitor.detect.analysis.signatures import LinePattern
from monitor.events import Event
from monitor.text import FAILURE_TEXT, LINE_REF, normalize

#: How much of a test output the summary parser looks at, at each end (runners
#: print failures and the summary last; the head catches jest-style reports).
TEST_OUTPUT_SPAN = 2000
#: Failing test names and error lines kept per run (bounded signatures).
MAX_FAILING_TESTS = 50
MAX_ERROR_LINES = 12

_RUNNERS = re.compile(
    r"""(?x)^(?:
        py\.?test | unittest | nose2? | nosetests | tox | nox | green | ward |
        jest | vitest | mocha | ava | karma | tap | playwright\s+test | cypress\s+run |
        rspec | phpunit | pest | ctest | busted | prove |
        (?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test(?::\S*)? | npm\s+t | bun\s+test | deno\s+test |
        go\s+test | cargo\s+(?:test|nextest) | make\s+(?:-\S+\s+)*(?:test|check)\S* |
        rake\s+(?:test|spec) | (?:\./)?mvnw?\s+(?:\S+\s+)*test | (?:\./)?gradlew?\s+(?:\S+\s+)*test |
        dotnet\s+test | mix\s+test | swift\s+test | (?:stack|cabal)\s+test | bazel\s+test | zig\s+build\s+test |
        \S*manage\.py\s+test | python[\d.]*\s+(?:\S*/)?test\S*\.py |
        \S*(?:run_tests|run-tests|runtests)\S* | (?:\./)?(?:tests?|scripts)/\S*test\S*
    )(?=$|[\s;&|)])"""
)
#: Every runner in _RUNNERS contains one of these.
_RUNNER_WORDS = (
    "test",
    "spec",
    "check",
    "jest",
    "mocha",
    "ava",
    "karma",
    "tap",
    "tox",
    "nox",
    "green",
    "ward",
    "pest",
    "busted",
    "prove",
    "cypress",
    "nextest",
)
_RUNNER_HINT = re.compile("|".join(_RUNNER_WORDS))
#: Commands longer than this are searched for a runner word with ``in``, not
#: the regex, which tries every alternative at every position.
_HINT_REGEX_CHARS = 200

# Test summaries: "2 failed, 3 passed", "Tests: 2 failed", "FAILED (failures=2, errors=1)",
# "5 examples, 2 failures", "3 failing", "test result: FAILED. 3 passed; 2 failed".
_COUNT = re.compile(
    r"(?i)\b(\d+)\s+(failed|failing|failures?|errors?|passed|passing|examples?|tests?\s+passed)\b"
    r"|\b(failures|errors)=(\d+)"
)
#: :data:`_COUNT` for text without "failures=" or "errors=" (most), where its
#: second half cannot match: starting with a digit (the lookbehind stands for
#: ``\b``) lets the regex engine skip to the digits instead of trying both
#: halves everywhere.
_COUNT_NUMBER = re.compile(
    r"(\d(?<!\w\d)\d*+)\s++(?i:(failed|failing|failures?|errors?|passed|passing|examples?|tests?\s+passed))\b"
)
#: Text that can name a failing test when no summary line says how many failed.
_FAILED_HINT = re.compile(r"FAIL|ERROR|●|×|✕|✗|rspec \./")
#: A last line giving a failing verdict in words: an agent's own test script that
#: prints "FAIL: …" or "Failure: did not accept …" and exits 0 failed all the same.
_VERDICT = re.compile(r"(?i)(?:fail(?:ed|ure|s)?|tests?\s+failed)\b")
#: (hint, pattern): a pattern only runs on text containing its hint.
#: ``WORD(?<!.WORD)`` is ``^WORD`` with the literal first, so the regex engine
#: skips ahead to it (other ``^`` patterns are tried at line starts only:
#: :class:`LinePattern`); ``\S*`` (not ``\S*?``) since a pytest name is a whole run of non-space.
_FAILING_NAMES = (
    ("FAILED", re.compile(r"FAILED(?<!.FAILED)\s+([^\s(]\S*)(?:\s+-\s.*)?$", re.M)),  # pytest short summary
    ("ERROR", re.compile(r"ERROR(?<!.ERROR)\s+([^\s(]\S*)(?:\s+-\s.*)?$", re.M)),  # pytest collection errors
    ("::", LinePattern(r"(\S+::\S+)\s+(?:FAILED|ERROR)\b")),  # pytest -v
    (": ", re.compile(r"(?:FAIL(?<!.FAIL)|ERROR(?<!.ERROR)):\s+(\S+)\s+\(([^)]+)\)", re.M)),  # unittest
    ("--- FAIL", LinePattern(r"\s*--- FAIL:\s+(\S+)")),  # go test
    ("... FAILED", re.compile(r"test(?<!.test)\s+(\S+)\s+\.\.\.\s+FAILED", re.M)),  # cargo test
    ("●", LinePattern(r"\s*●\s+(.+?)\s*$")),  # jest
    ("×", LinePattern(r"\s*×\s+(.+?)(?:\s+\d+\s*m?s)?\s*$")),  # vitest
    ("✕", LinePattern(r"\s*✕\s+(.+?)(?:\s+\d+\s*m?s)?\s*$")),  # jest --verbose
    ("✗", LinePattern(r"\s*✗\s+(.+?)(?:\s+\d+\s*m?s)?\s*$")),  # node:test, bats
    (" > ", LinePattern(r"\s*FAIL\s+(\S+\s+>\s+.+?)\s*$")),  # vitest "FAIL file > suite > test"
    ("rspec ", re.compile(r"rspec(?<!.rspec)\s+(\./\S+)", re.M)),  # rspec
    (") ", LinePattern(r"\s+\d+\)\s+(\S.*?)\s*$")),  # mocha / ExUnit numbered failures
)
_ERROR_WORDS = (
    r"error|exception|assert|fail|panic|expected|received|traceback|cannot|can't|"
    r"not found|undefined|mismatch|refused|denied|timeout|timed out|no such"
)
_ERROR_LINE = re.compile("(?i)" + _ERROR_WORDS)
#: :data:`_ERROR_LINE` for lower-cased ASCII text, where the two agree: a case-sensitive
#: alternation skips to the letters that can start a word; ``(?i)`` tries every position.
_ERROR_LINE_LOWER = re.compile(_ERROR_WORDS)


class RunOutcome(NamedTuple):
    """What one test run reported (a named tuple: a frozen dataclass costs about
    three times as much to build, and one is built per test run's result)."""

    failing: bool
    failures: int | None  # failing tests (failed + errors), when the summary says
    passed: int | None
    tests: tuple[str, ...]  # names of failing tests, when listed
    signature: str  # short hash of the failing tests and their error lines
    headline: str  # one line describing the failure, for messages


def _runner_hint(command: str) -> bool:
    """``_RUNNER_HINT.search(command, 0, 4000)``, cheap for long commands too."""
    if len(command) <= _HINT_REGEX_CHARS:
        return _RUNNER_HINT.search(command) is not None
    head = command[:4000]
    for word in _RUNNER_WORDS:
        if word in head:
            return True
    return False


def is_test_run(call: Event | None) -> bool:
    """True when the call runs tests: a test tool, or a shell command starting a test runner."""
    if call is None:
        return False
    cached = call.facts.is_test_run
    if cached is not None:
        return cached
    kind = tool_kind(call.tool)
    if kind.test:
        result = True
    elif kind.edit:
        result = False  # what an edit writes is content (SWE-agent's edit body), not a command
    else:
        command = shell_command(call)
        result = bool(command) and _RUNS_TESTS[command]
    call.facts.is_test_run = result
    return result


def _runs_tests(command: str) -> bool:
    """Whether the command line ``command`` starts a test runner."""
    # Most commands name no runner at all: skip the command-position analysis.
    if _runner_hint(command):
        for segment in segments(command):
            if _RUNNERS.match(segment) or _RUNNERS.match(unwrapped(segment)):
                return True
    return False


#: Whether a command line runs tests, by its text alone (an agent runs the
#: same commands again and again).
_RUNS_TESTS = TextMemo(256, 2048, _runs_tests)


def _may_have_key(line: str) -> bool:
    """Whether ``line`` may hold ``failures=`` or ``errors=`` (in any case; a
    non-ASCII "ſ" matches "s" too); "==" in an assertion does not count."""
    return "=" in line and ("s=" in line or "S=" in line or not line.isascii())


def _counts(line: str) -> list[tuple[str, str]]:
    """(number, word) of each :data:`_COUNT` match in ``line``."""
    if not _may_have_key(line):
        return [(match[1], match[2]) for match in _COUNT_NUMBER.finditer(line)]
    return [
        (match.group(4), match.group(3)) if match.group(3) else (match.group(1), match.group(2))
        for match in _COUNT.finditer(line)
    ]


def _has_count(line: str) -> bool:
    """``_COUNT.search(line)``, cheaper."""
    return (_COUNT if _may_have_key(line) else _COUNT_NUMBER).search(line) is not None


def _summary_counts(text: str) -> tuple[int | None, int | None]:
    """(failures, passed) from the last summary line of a test output."""
    for line in reversed(text.splitlines()[-80:]):
        counts: tuple[int | None, int | None] | None = _SUMMARY_LINES[line]
        if counts is not None:
            return counts
    return None, None


def _line_counts(line: str) -> tuple[int | None, int | None] | None:
    """(failures, passed) a test summary ``line`` reports; ``None`` when it reports neither."""
    failures = passed = None
    for digits, word in _counts(line):
        number, word = int(digits), word.lower()
        if word.startswith(("fail", "error")):
            failures = (failures or 0) + number
        elif word.startswith(("pass", "test")):
            passed = (passed or 0) + number
        elif word.startswith("example"):
            passed = (passed or 0) + number  # rspec: "5 examples, 2 failures"
    if failures is None and passed is None:
        return None
    if passed is not None and failures and "example" in line:
        passed -= failures
    return failures, passed


#: ``_line_counts`` by line: runs that differ share summary lines, and
#: parsing one runs the count regex.
_SUMMARY_LINES = TextMemo(300, 2048, _line_counts)


def read_run(content: str, fails: bool) -> RunOutcome:
    """What a test run's output ``content`` reports (bounded to its head and
    tail), given whether its result ``fails`` (a nonzero exit status, an error)."""
    # A loop runs the same tests to the same output again.
    key = (content, fails)
    memo = _RUNS.keeps(content)
    outcome: RunOutcome | None = _RUNS.get(key) if memo else None
    if outcome is None:
        outcome = _read_run(content, fails)
        if memo:
            _RUNS.remember(key, outcome)
    return outcome


#: ``_read_run`` by (output, fails).
_RUNS = TextMemo(2000, 512)


def _read_run(content: str, fails: bool) -> RunOutcome:
    """:func:`read_run` of a test run's output, given whether it ``fails``."""
    head, tail = output_ends(content, TEST_OUTPUT_SPAN)
    failures, passed = _summary_counts(tail or head)
    fails = fails or _says_failed(tail or head)
    if not failures and not fails and (passed or not _FAILED_HINT.search(head + tail)):
        # A passing run: nothing to compare, so no signature to compute.
        return RunOutcome(False, failures, passed, (), "", "")
    # Each distinct line once (a report of 10,000 identical failures is three lines).
    lines = list(dict.fromkeys((head + ("\n" + tail if tail else "")).splitlines()))
    text = "\n".join(lines)
    names = _failing_names(text)
    errors = _error_lines(lines)
    is_failing = fails or bool(failures) or (failures is None and bool(names) and not passed)
    if failures is None and names and is_failing:
        failures = len(names)
    material = "\n".join(sorted(names)) + "\n--\n" + "\n".join(errors)
    if not names and not errors:
        material = normalize(text[-1000:], FAILURE_TEXT, 1000)
    signature = hashlib.blake2b(material.encode("utf-8", "replace"), digest_size=6).hexdigest()
    headline = names[0] if names else (errors[0] if errors else "")
    return RunOutcome(is_failing, failures, passed, tuple(sorted(names)), signature, headline)


def _says_failed(text: str) -> bool:
    """Whether the last non-blank line of a test output starts with a failing
    verdict ("FAIL: …", "Failure: …", "Tests failed"), whatever the exit status."""
    last = text.rstrip()[-300:].rpartition("\n")[2].strip()
    return _VERDICT.match(last) is not None


def _failing_names(text: str) -> list[str]:
    """The names of the failing tests a run's output lists (each once, at most MAX_FAILING_TESTS)."""
    names: list[str] = []
    for hint, pattern in _FAILING_NAMES:
        if hint not in text:
            continue
        for match in pattern.finditer(text):
            # Names carry no timings; only a file:line in them moves with edits (rspec).
            name = LINE_REF.sub(":<n>", ".".join(filter(None, match.groups()))).strip()[:200]
            if name and name not in names and not name.lower().startswith(("passed", "skipped")):
                names.append(name)
                if len(names) >= MAX_FAILING_TESTS:
                    break
    return names


def _error_lines(lines: list[str]) -> list[str]:
    """The distinct error lines of a run's output, normalized (at most MAX_ERROR_LINES)."""
    errors: list[str] = []
    for line in lines:
        normalized = _ERROR_LINES[line]
        if normalized and normalized not in errors:
            errors.append(normalized)
            if len(errors) >= MAX_ERROR_LINES:
                break
    return errors


def _error_line(line: str) -> str:
    """A test output's ``line`` as a telling error line, normalized; empty when
    it names no error or is a summary count ("1 failed, 20 passed")."""
    if line.isascii():  # (a flag of the string, no scan)
        low = line.lower()
        if _ERROR_LINE_LOWER.search(low) is None:
            return ""
        if low.isprintable() and not _may_count(low):
            return normalize(line, FAILURE_TEXT, 200)
    elif _ERROR_LINE.search(line) is None:
        return ""
    return "" if _has_count(line) else normalize(line, FAILURE_TEXT, 200)


def _may_count(low: str) -> bool:
    """Whether a lower-cased printable ASCII line may hold a :data:`_COUNT` match:
    a count's word follows white space, which in such a line is a space."""
    return "s=" in low or " fail" in low or " error" in low or " pass" in low or " exampl" in low


#: ``_error_line`` by line: runs that differ repeat most of their lines
#: ("Exit code 1", the same summary), and judging one runs several regexes.
_ERROR_LINES = TextMemo(300, 4096, _error_line)
