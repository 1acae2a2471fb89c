"""What a command did: shell commands, test runs, failures and failure signatures.

Shared by the ``test_fix``, ``failure_cascade`` and ``limits`` detectors.  All
functions are pure and bounded: outputs are only searched in their head and
tail (exit codes and test summaries live there), and results are memoized on
the event so that several detectors pay for the analysis once.

* :func:`shell_command` — the command line of a shell-like tool call.
* :func:`is_test_run` — whether a call runs a test suite (pytest, npm test,
  jest, vitest, go test, cargo test, make test, unittest, rspec, …).
* :func:`exit_code` / :func:`failed` — a result failed when the tool says so
  (``is_error``) or its output reports a nonzero exit code; ``grep``-like
  "no match" (exit 1) is not a failure.
* :func:`run_outcome` — failing/passed counts, failing test names and a
  signature of the failure, for telling "the same failure again" from progress.
* :func:`tests_failed` — a test run whose runner ran and reported failing
  tests: the code under test failed, not the command.
* :func:`comparable_failure` / :func:`shown_failure` — what a failure is,
  comparable across calls and sessions, and how to quote it.
* :func:`is_edit` / :func:`manual_file_op` — edits, and file operations done by
  hand in the shell (``cat``, ``echo >``, ``sed -i``, ``printf >``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, NamedTuple

from monitor.detect.analysis.memo import TextMemo
from monitor.detect.analysis.signatures import LinePattern, failure_signature
from monitor.events import UNKNOWN, Event
from monitor.text import byte_classes, squash_ws

#: Tools whose calls are shell commands even when the command key is unusual.
SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "zsh",
        "terminal",
        "exec",
        "exec_command",
        "execute_command",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "shell_command",
        "local_shell",
        "execute_bash",
        "powershell",
        "container.exec",
        "cmd",
    }
)
COMMAND_KEYS = ("command", "cmd", "script")
_COMMAND_KEY_SET = frozenset(COMMAND_KEYS)
_SHELL_STRING_KEYS = ("input", "code", "commands")

#: How much of an output the exit-code search looks at, at each end.
EXIT_CODE_SPAN = 600
#: How much of a test output the summary parser looks at, at each end (runners
#: print failures and the summary last; the head catches jest-style reports).
TEST_OUTPUT_SPAN = 2000
#: Failing test names and error lines kept per run (bounded signatures).
MAX_FAILING_TESTS = 50
MAX_ERROR_LINES = 12

_SEGMENTS = re.compile(r"&&|\|\||[;|\n]")
_WRAPPERS = re.compile(
    r"^(?:(?:[A-Za-z_][A-Za-z0-9_]*=\S*|env|time|sudo|nice|command|exec|timeout\s+\S+|"
    r"npx|bunx|uv\s+run|poetry\s+run|pipenv\s+run|pdm\s+run|hatch\s+run|rye\s+run|"
    r"bundle\s+exec|(?:yarn|pnpm)(?:\s+(?:exec|dlx))?(?=\s+(?:jest|vitest|mocha)\b)|"
    r"python[\d.]*\s+-m|py\s+-m)\s+)*"
)
#: First words of a segment that :data:`_WRAPPERS` can remove (besides
#: ``NAME=value`` and ``python…``): the regex only runs on segments starting so.
_WRAPPER_WORDS = frozenset(
    {
        "env",
        "time",
        "sudo",
        "nice",
        "command",
        "exec",
        "timeout",
        "npx",
        "bunx",
        "uv",
        "poetry",
        "pipenv",
        "pdm",
        "hatch",
        "rye",
        "bundle",
        "yarn",
        "pnpm",
        "py",
    }
)
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
_TEST_TOOLS = re.compile(r"(?i)(?:run_?)?tests?|test_?runner|run_?pytest|pytest")

# Exit-code reports, matched on lower-cased text; each pattern starts with a
# literal so the regex engine can skip ahead instead of trying every position,
# and runs only on text holding the literal it needs (paired with it).
_EXIT_PATTERNS = (
    ("exit", re.compile(r"exit(?:ed)?[ _]?(?:with )?(?:status|code)\b[\"']?\s*[:=]?\s*[\"']?\(?(-?\d+)")),
    ("return", re.compile(r"return[ _]?code\b[\"']?\s*[:=]?\s*[\"']?\(?(-?\d+)")),
    ("[exit ", re.compile(r"\[exit (-?\d+)\]")),
    ("<returncode>", re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")),  # mini-swe-agent
    ("***", re.compile(r"make(?:\[\d+\])?: \*\*\* [^\n]{0,200}?\berror (\d+)")),
)
#: Programs whose exit status 1 means "no" (no match, files differ), not failure.
_BENIGN_ONE = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "diff", "cmp", "test", "[", "[[", "which", "pgrep"}
)

_EDIT_TOOLS = re.compile(
    r"(?i)edit|write|replace|patch|insert|create_file|str_replace|apply_diff|multiedit|notebook|save_file|append"
)
# Editing files from the shell is judged per simple command (segment) by its
# program, not by word-boundary regexes over the whole (possibly long) command.
_REDIRECT = re.compile(r">{1,2}\s*(?!/dev/null|&)[^\s&>]")
_SED_INPLACE = re.compile(r"\s(?:-[a-zA-Z]*i|--in-place)")
_PERL_INPLACE = re.compile(r"\s-\w*i")
_HEREDOC = re.compile(r"<<-?\s*['\"]?\w+")
_READ_PROGRAMS = frozenset({"cat", "head", "tail", "less", "more", "nl", "tac", "awk", "sed"})

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
# Noise in failure text that changes between identical failures: timestamps,
# clock times, addresses, durations, percentages (one pass over the text for
# everything that starts with a digit), then long hex ids, seeds, "line N" and
# the line numbers of file:line references (they move with every edit).
_NUMERIC_NOISE = re.compile(
    # The shared leading digit is matched once, so the regex engine skips to digits
    # (``\d{4}`` is ``\d`` + ``\d{3}``, ``0x`` is ``\d`` + ``(?<=0)x``, …).
    r"\d(?:(?P<ts>\d{3}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<time>\d?:\d{2}:\d{2}(?:\.\d+)?\b)"
    r"|(?P<addr>(?<=0)x[0-9a-fA-F]+\b)"
    r"|(?P<dur>\d*+(?:\.\d++)?+\s?+(?:ms|s|sec|secs|seconds|us|µs|ns|min|minutes)\b)"
    r"|(?P<pct>\d*+(?:\.\d++)?+\s?+%))"
)
_NUMERIC_REPL = {"ts": "<ts>", "time": "<time>", "addr": "<addr>", "dur": "<dur>", "pct": "<pct>"}
_OTHER_NOISE = (  # (substring that must be present, pattern, replacement)
    (None, re.compile(r"\b[0-9a-fA-F]{12,}\b"), "<hex>"),
    ("seed", re.compile(r"seed:? ?\d+"), "seed <n>"),
    ("line ", re.compile(r"line \d+"), "line <n>"),
    # ``(?<=[A-Za-z]):\d+`` with the literal first: a literal search, not the
    # lookbehind tried at every position.
    (":", re.compile(r":(?<=[A-Za-z]:)\d+(?::\d+)?"), ":<n>"),
)
_HAS_DIGIT = re.compile(r"\d")
#: ASCII with each hex digit as "h": a text without ``_HEX_RUN`` in it has
#: no match of the hex pattern of :data:`_OTHER_NOISE`.
_HEX_MARKS = byte_classes({"0123456789abcdefABCDEF": "h"})
_HEX_RUN = "h" * 12
#: ASCII by what a character can be in a match of the other noise: "d" a
#: digit, "s" white space, ":" itself, "u" what can follow a number's digits
#: (and a space) in a duration or a percentage (a unit's first letter, "%").
_NOISE_MARKS = byte_classes({"0123456789": "d", " \t\n\r\f\v\x1c\x1d\x1e\x1f": "s", ":": ":", "msun%": "u"})
_LINE_REF = _OTHER_NOISE[-1][1]


def _judge_tool(tool: str | None) -> tuple[bool, bool, bool]:
    """(a test tool?, an edit tool?, a shell tool?) by the tool's name."""
    name = tool or ""
    low = name.lower()
    return (
        bool(_TEST_TOOLS.fullmatch(name)),
        bool(_EDIT_TOOLS.search(low)) and low not in SHELL_TOOLS and "todo" not in low,
        low in SHELL_TOOLS,
    )


#: Tool name -> :func:`_judge_tool`'s answer: names repeat, regexes and
#: lower-casing need not (bounded even if names are made up on the fly).
_TOOL_KINDS = TextMemo(256, 4096, _judge_tool)
#: A tool's kind: the table's own look-up, asked several times for most events.
_tool_kind = _TOOL_KINDS.__getitem__


def _args_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # Codex-style argv: ["bash", "-lc", "pytest -q"] runs the last element.
        if len(value) >= 3 and value[-2] in ("-c", "-lc", "-ic", "-lic", "/c", "-Command"):
            return value[-1]
        return " ".join(value)
    return None


def shell_command(call: Event | None) -> str | None:
    """The command line a shell-like tool call runs, or ``None``."""
    if call is None:
        return None
    cached = call.facts.shell_command
    if cached is not UNKNOWN:
        return cached
    args = call.args or {}
    command = None
    if not _COMMAND_KEY_SET.isdisjoint(args):  # (most calls have none of these keys: one C-level test)
        command = _first_command(args, COMMAND_KEYS)
    if command is None:
        kind = _tool_kind(call.tool)
        if kind[2]:
            command = _first_command(args, _SHELL_STRING_KEYS)
        if command is None:
            # is_test_run()'s answer too, now at hand: without a command, whether it is a test tool.
            call.facts.is_test_run = kind[0]
    call.facts.shell_command = command
    return command


def _first_command(args: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The command line of the first of ``keys`` in ``args`` that holds one."""
    for key in keys:
        value = args.get(key)
        if value is not None:
            command = _args_string(value)
            if command is not None:
                return command
    return None


def _segments(command: str) -> list[str]:
    return [s.strip() for s in _SEGMENTS.split(command[:4000]) if s.strip()]


#: Subcommands whose exit status 1 means "no": no match, a difference, not
#: installed.
_SUBCOMMANDS_BENIGN_ONE = {
    "git": frozenset({"grep", "diff"}),
    "pip": frozenset({"show"}),
    "pip3": frozenset({"show"}),
    "npm": frozenset({"ls", "list"}),
}


def _benign_one(segment: str, program: str | None = None) -> bool:
    """Whether exit status 1 of the command ``segment`` (run by ``program``,
    when known) means "no", not failure: ``grep``, ``diff``, ``test``,
    ``git grep``, ``git diff --exit-code``, ``pip show``, ``npm ls``, ``command -v``."""
    if segment.lstrip().startswith(("command -v ", "type ")):
        return True  # "is it installed?" -- no is an answer
    if program is None:
        program = _program(segment)
    if program in _BENIGN_ONE:
        return True
    subcommands = _SUBCOMMANDS_BENIGN_ONE.get(program)
    if subcommands is not None:
        words = _unwrapped(segment).split()
        for word in words[1:]:
            if not word.startswith("-"):
                return word in subcommands
            if word in ("-C", "-c"):
                return False  # an option with a value: not worth parsing further
    return False


#: Linters and checkers whose nonzero exit status says "I found something" --
#: their report is the output, the command worked (as a test run's failing
#: tests are the code failing).  pylint's status is a bit field of message
#: kinds below 32 (32: usage error); the others exit 1 with findings.
_LINTERS = frozenset(
    {
        "pylint",
        "flake8",
        "mypy",
        "ruff",
        "eslint",
        "pyflakes",
        "pycodestyle",
        "pydocstyle",
        "shellcheck",
        "black",
        "isort",
        "pyright",
        "stylelint",
        "hadolint",
        "yamllint",
    }
)


def _reported_findings(program: str, code: int, content: str) -> bool:
    """A linter, the ``program`` of a command's last segment, exiting with its
    "found something" status and a report."""
    if program not in _LINTERS:
        return False
    if not (0 < code < 32 if program == "pylint" else code == 1):
        return False
    return bool(output_body(content[:2000]))


def _unwrapped(segment: str) -> str:
    """``segment`` without the wrappers before its program (``env X=1``,
    ``sudo``, ``npx``, ``uv run``, ``python -m``: :data:`_WRAPPERS`)."""
    head = segment[:8].split(None, 1)  # (a long first word is cut: then the regex decides)
    word = head[0] if head else ""
    if word in _WRAPPER_WORDS or "=" in word or word.startswith("python") or len(word) == 8:
        return _WRAPPERS.sub("", segment, count=1)
    return segment  # (most segments: no wrapper starts with that word)


def _program(segment: str) -> str:
    stripped = _unwrapped(segment)
    word = stripped.split(None, 1)[0] if stripped else ""
    return word.rsplit("/", 1)[-1]


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
    if _tool_kind(call.tool)[0]:
        result = True
    else:
        command = shell_command(call)
        result = bool(command) and _RUNS_TESTS[command]
    call.facts.is_test_run = result
    return result


def _runs_tests(command: str) -> bool:
    """Whether the command line ``command`` starts a test runner."""
    # Most commands name no runner at all: skip the command-position analysis.
    if _runner_hint(command):
        for segment in _segments(command):
            if _RUNNERS.match(segment) or _RUNNERS.match(_unwrapped(segment)):
                return True
    return False


#: Whether a command line runs tests, by its text alone (an agent runs the
#: same commands again and again).
_RUNS_TESTS = TextMemo(256, 2048, _runs_tests)


def _ends(text: str, span: int) -> tuple[str, str]:
    if len(text) <= 2 * span:
        return text, ""
    return text[:span], text[-span:]


def exit_code(text: str) -> int | None:
    """The exit code a command output reports (``Exit code 1``, ``exit status 2``,
    ``"exit_code": 1``, ``make: *** … Error 2``), searched at both ends; ``None`` if none."""
    head, tail = _ends(text, EXIT_CODE_SPAN)
    for part, last in ((tail, True), (head, False)):
        if not part:
            continue
        low = part.lower()
        if "exit" not in low and "return" not in low and "***" not in part:
            continue  # the common case, without running the regexes
        best: re.Match[str] | None = None
        for needed, pattern in _EXIT_PATTERNS:
            if needed not in low:
                continue
            if last:
                for match in pattern.finditer(low):
                    if best is None or match.start() > best.start():
                        best = match
            else:
                match = pattern.search(low)
                if match is not None and (best is None or match.start() < best.start()):
                    best = match
        if best is not None:
            return int(best.group(1))
    return None


def failed(result: Event) -> bool:
    """True when a tool result is a failure: ``is_error``, or a nonzero exit code in
    a shell command's output (or a test tool's).  Exit status 1 of ``grep``/``diff``/
    ``test`` means "no", not failure."""
    cached = result.facts.failed
    if cached is not None:
        return cached
    command = shell_command(result.call)
    code = _exit_code(result, command)
    if code is None or code == 0:
        outcome = result.is_error
    else:
        outcome = not (command and "||" not in command and _answered_no(result, command, code))
    result.facts.failed = outcome
    return outcome


def _exit_code(result: Event, command: str | None) -> int | None:
    """The exit code a result reports: read from a shell's output, else kept by its adapter."""
    # Exit codes are only read from shell output: a file that *contains* "exit status 1"
    # does not make read_file fail (and most results are spared the search).
    call = result.call
    shellish = command is not None or _tool_kind(result.tool)[2] or (call is not None and is_test_run(call))
    code = exit_code(result.content) if shellish and result.content else None
    if code is None and result.meta:
        # Adapters that read the status from the log keep it as meta
        # ``exit_code`` (the chat adapter: mini-swe-agent's <returncode>).
        found = result.meta.get("exit_code")
        if isinstance(found, int) and not isinstance(found, bool):
            code = found
    return code


def _answered_no(result: Event, command: str, code: int) -> bool:
    """Whether a nonzero exit of ``command`` is an answer, not a failure: a
    search or comparison that said "no", or a checker that reported findings."""
    segments = _segments(command)
    last = _program(segments[-1]) if segments else ""
    if code == 1:
        if segments and _benign_one(segments[-1], last):
            return True
        if (
            len(result.content) <= 300
            and len(segments) > 1
            and any(_benign_one(segment) for segment in segments[:-1])
            and not output_body(result.content)
        ):
            # ``grep X f | head`` or ``grep -q X f && echo found`` exiting
            # 1 with nothing to say: the search said "no".
            return True
    return _reported_findings(last, code, result.content)


#: Lines that wrap a command's output without being part of it: exit-code
#: reports (Claude Code, Codex) and mini-swe-agent's ``<returncode>`` tags.
_WRAPPERS_OF_OUTPUT = re.compile(
    r"(?im)^[ \t]*(?:exit code:?\s*-?\d+|process exited with code -?\d+|wall time:[^\n]*|output:|"
    r"<returncode>\s*-?\d+\s*</returncode>|</?output>|<returncode>|</returncode>)[ \t]*$"
)


def output_body(text: str) -> str:
    """What a command printed, without the lines agents wrap around it (exit
    code reports, ``<returncode>``/``<output>`` tags); empty when it printed
    nothing -- which says nothing about whether anything changed."""
    if len(text) > 400:
        return text  # long enough to hold output whatever wraps it
    return _WRAPPERS_OF_OUTPUT.sub("", text.replace("<output>", "\n").replace("</output>", "\n")).strip()


class RunOutcome(NamedTuple):
    """What one test run reported (a named tuple: a frozen dataclass costs about
    three times as much to build, and one is built per test run's result)."""

    failing: bool
    failures: int | None  # failing tests (failed + errors), when the summary says
    passed: int | None
    tests: tuple[str, ...]  # names of failing tests, when listed
    signature: str  # short hash of the failing tests and their error lines
    headline: str  # one line describing the failure, for messages


def _numeric(match: re.Match[str]) -> str:
    return _NUMERIC_REPL[match.lastgroup]


def _normalize_failure(text: str, limit: int = 200) -> str:
    """``text`` without the noise that changes between identical failures; with a
    ``limit``, white space squashed and clipped (0 keeps the lines)."""
    if text.isascii():
        # Digits, runs of hex digits and what noise needs, found by translating
        # the bytes: the regexes try every position.  (Tested with str's
        # ``in``: bytes' ``in`` first tries its operand as an int.)
        raw = text.encode("ascii")
        marks = raw.translate(_NOISE_MARKS).decode("ascii")
        noisy = "d" in marks
        hexish = noisy and _HEX_RUN in raw.translate(_HEX_MARKS).decode("ascii")
        if noisy and not hexish:
            # Most digits are no noise ("assert 21 == 0"): each other kind
            # needs one of these (a time "d:", a duration or percentage "du"
            # or "dsu", "a:d" of a file:line), "0x", "seed" or "line ".
            noisy = (
                "du" in marks
                or "d:" in marks
                or ":d" in marks
                or "dsu" in marks
                or "0x" in text
                or "seed" in text
                or "line " in text
            )
    else:
        noisy = hexish = _HAS_DIGIT.search(text) is not None
    if noisy:  # every kind of noise has a digit in it
        text = _NUMERIC_NOISE.sub(_numeric, text)
        for hint, pattern, repl in _OTHER_NOISE:
            # (No replacement of the numeric noise holds or joins hex runs.)
            if hexish if hint is None else hint in text:
                text = pattern.sub(repl, text)
    return squash_ws(text)[:limit] if limit else text


def _may_have_key(line: str) -> bool:
    """Whether ``line`` may hold ``failures=`` or ``errors=`` (in any case; a
    non-ASCII "ſ" matches "s" too); "==" in an assertion does not count."""
    return "=" in line and ("s=" in line or "S=" in line or not line.isascii())


def _counts(line: str) -> list[tuple[str, str]]:
    """(number, word) of each :data:`_COUNT` match in ``line``."""
    if not _may_have_key(line):
        return [match.groups() for match in _COUNT_NUMBER.finditer(line)]
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
        counts = _SUMMARY_LINES[line]
        if counts:
            return counts
    return None, None


def _line_counts(line: str) -> tuple[int | None, int | None] | tuple[()]:
    """(failures, passed) a test summary ``line`` reports; ``()`` when it reports neither."""
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
        return ()
    if passed is not None and failures and "example" in line:
        passed -= failures
    return failures, passed


#: ``_line_counts`` by line: runs that differ share summary lines, and
#: parsing one runs the count regex.
_SUMMARY_LINES = TextMemo(300, 2048, _line_counts)


def run_outcome(result: Event) -> RunOutcome:
    """Parse a test run's output (bounded to its head and tail)."""
    cached = result.facts.run_outcome
    if cached is not None:
        return cached
    # What a run reported depends on its output and on whether it failed
    # alone, and a loop runs the same tests to the same output again.
    content = result.content
    key = (content, failed(result))
    memo = _RUNS.keeps(content)
    outcome = _RUNS.get(key) if memo else None
    if outcome is None:
        outcome = _run_outcome(content, key[1])
        if memo:
            _RUNS.remember(key, outcome)
    result.facts.run_outcome = outcome
    return outcome


#: ``_run_outcome`` by (output, failed).
_RUNS = TextMemo(2000, 512)


def _run_outcome(content: str, fails: bool) -> RunOutcome:
    """:func:`run_outcome` of a test run's output, given whether it ``fails``."""
    head, tail = _ends(content, TEST_OUTPUT_SPAN)
    failures, passed = _summary_counts(tail or head)
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
        material = _normalize_failure(text[-1000:], limit=1000)
    signature = hashlib.blake2b(material.encode("utf-8", "replace"), digest_size=6).hexdigest()
    headline = names[0] if names else (errors[0] if errors else "")
    return RunOutcome(is_failing, failures, passed, tuple(sorted(names)), signature, headline)


def _failing_names(text: str) -> list[str]:
    """The names of the failing tests a run's output lists (each once, at most MAX_FAILING_TESTS)."""
    names: list[str] = []
    for hint, pattern in _FAILING_NAMES:
        if hint not in text:
            continue
        for match in pattern.finditer(text):
            # Names carry no timings; only a file:line in them moves with edits (rspec).
            name = _LINE_REF.sub(":<n>", ".".join(filter(None, match.groups()))).strip()[:200]
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
            return _normalize_failure(line)
    elif _ERROR_LINE.search(line) is None:
        return ""
    return "" if _has_count(line) else _normalize_failure(line)


def _may_count(low: str) -> bool:
    """Whether a lower-cased printable ASCII line may hold a :data:`_COUNT` match:
    a count's word follows white space, which in such a line is a space."""
    return "s=" in low or " fail" in low or " error" in low or " pass" in low or " exampl" in low


#: ``_error_line`` by line: runs that differ repeat most of their lines
#: ("Exit code 1", the same summary), and judging one runs several regexes.
_ERROR_LINES = TextMemo(300, 4096, _error_line)


def tests_failed(result: Event) -> bool:
    """A test run that ran and reported failing tests (a count or names): its
    exit status says the code under test fails, as ``grep``'s 1 says "no
    match" -- the command itself worked.  ``test_fix`` judges such runs; the
    failure streaks (``failure_cascade``, ``limits``) neither count nor end
    at one, so triaging failing tests one by one is not a cascade."""
    if not is_test_run(result.call):
        return False
    run = run_outcome(result)
    return run.failing and bool(run.failures or run.tests)


def comparable_failure(result: Event) -> str | None:
    """What went wrong, comparable across calls and sessions (``None`` when the
    result is no failure worth comparing): :func:`failure_signature`, except
    for a test run, whose failure is which tests failed -- names whole -- and
    how many (a signature drops digits, which would make ``test_parse[case3]``
    and ``test_parse[case4]``, or 3 failures and then 2, the same failure).
    Quote it with :func:`shown_failure`."""
    # Memoized on the result: several detectors ask for every result.
    facts = result.facts
    cached = facts.comparable_failure
    if cached is not UNKNOWN:
        return cached
    if result.is_error and not failed(result):
        found = None  # exit status 1 of a search or a comparison: "no", not a failure
    else:
        found = signature = failure_signature(result)
        if signature is not None and is_test_run(result.call):
            run = run_outcome(result)
            if run.failing:
                found = f"T:{run.signature}:{run.failures}\x00{run.headline or signature[2:]}"
    facts.comparable_failure = found
    return found


_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`|‘[^’\n]{0,200}’")
_ITEMISH = re.compile(r"[^\s:]*[/\\.][^\s:]*|[^\s:]*\d[^\s:]*")


def failure_kind(result: Event) -> str:
    """What kind of failure a failed result is, the names in it aside: its
    telling error line (or last line) without quoted names, paths, dotted
    names and numbers, and without the program a shell could not run.  Two
    different commands failing the same way (``brew``, then ``conda``: "command
    not found"; ``cat``, then ``sed``: "No such file or directory") share it;
    ``No matching distribution found for erfa`` and ``… for pyerfa`` do not."""
    cached = result.facts.failure_kind
    if cached is not None:
        return cached
    signature = failure_signature(result)
    if signature is not None:
        line = signature[2:]
    else:
        lines = [ln for ln in output_body(clip_tail(result.content)).splitlines() if ln.strip()]
        line = lines[-1] if lines else ""
    line = _ITEMISH.sub(" ", _QUOTED.sub(" ", line))
    # The last clause says what went wrong; the ones before name who met it
    # (``sed: can't read x:``, ``bash: brew:``), unless it is a bare word.
    parts = [" ".join(part.lower().split()) for part in line.split(":")]
    parts = [part for part in parts if part]
    kind = parts[-1] if parts else ""
    if len(parts) > 1 and " " not in kind:
        kind = parts[-2] + ": " + kind
    kind = kind[:200]
    result.facts.failure_kind = kind
    return kind


def clip_tail(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[-limit:]


def shown_failure(key: str) -> str:
    """The part of a :func:`comparable_failure` (or ``outcome_key``) worth quoting."""
    if key[:2] == "T:":
        return key.split("\x00", 1)[1]
    return key[2:] if key[:2] in ("E:", "R:") else key


def is_edit(call: Event) -> bool:
    """True when a tool call changes files (an edit/write tool, or a shell edit)."""
    if _tool_kind(call.tool)[1]:
        return True
    command = shell_command(call)
    return bool(command) and _EDITS[command]


def _edits(command: str) -> bool:
    """Whether the command line ``command`` changes files (see :func:`_shell_edit`)."""
    return _shell_edit(command[:4000], _segments(command))


#: Whether a command line changes files, by its text alone.
_EDITS = TextMemo(256, 2048, _edits)


def _shell_edit(command: str, segments: list[str]) -> bool:
    """A heredoc, or a simple command that writes a file: ``sed -i``, ``perl -i``,
    ``tee``, ``patch``, ``git apply``, ``echo/printf/cat … > file``."""
    if "<<" in command and _HEREDOC.search(command):
        return True
    for segment in segments:
        if _writes(_program(segment), segment):
            return True
    return False


def _writes(program: str, segment: str) -> bool:
    """Whether a simple command run by ``program`` writes a file (see :func:`_shell_edit`)."""
    if program in ("tee", "patch"):
        return True
    if program == "sed":
        return _SED_INPLACE.search(segment) is not None
    if program == "perl":
        return _PERL_INPLACE.search(segment) is not None
    if program == "git":
        return segment.split()[1:2] == ["apply"]
    if program in ("echo", "printf", "cat"):
        return ">" in segment and _REDIRECT.search(segment) is not None
    return False


def manual_file_op(command: str | None) -> bool:
    """True for a file operation done by hand in the shell: reading with
    ``cat``/``head``/``tail``, writing with ``echo >``/``printf >``/heredocs, ``sed -i``."""
    if not command:
        return False
    command = command[:4000]
    if "<<" in command and _HEREDOC.search(command):
        return True
    segments = _segments(command)
    # :func:`_shell_edit` and "every segment reads" in one pass: each
    # segment's program is found once.
    reads = bool(segments)
    for segment in segments:
        program = _program(segment)
        if _writes(program, segment):
            return True
        if program not in _READ_PROGRAMS:
            reads = False
    return reads
