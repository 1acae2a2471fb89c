"""Failures: whether a result failed, how, and what its failure is.

Shared by the ``test_fix``, ``failure_cascade``, ``limits``, ``retry_rounds``,
``repeated_result`` and ``swarm`` detectors; each answer is memoized on the
event, so that several detectors pay for it once.

* :func:`exit_code` / :func:`failed` — a result failed when the tool says so
  (``is_error``) or its output reports a nonzero exit code; ``grep``-like
  "no match" (exit 1) and a linter's findings are answers, not failures.
* :func:`run_outcome` — what a test run's result reports (see
  :mod:`~monitor.detect.analysis.testruns`), given whether it failed.
* :func:`tests_failed` — a test run whose runner ran and reported failing
  tests: the code under test failed, not the command.
* :func:`comparable_failure` / :func:`shown_failure` — what a failure is,
  comparable across calls and sessions, and how to quote it.
* :func:`failure_kind` — what kind of failure it is, the names in it aside.
* :func:`closer_look` — a failed command re-run narrower or filtered to read
  its error: a look at the failure before, not a retry of it.
"""

from __future__ import annotations

import re

from monitor.detect.analysis.shell import (
    output_body,
    output_ends,
    output_lines,
    program,
    segments,
    shell_command,
    tool_kind,
    unwrapped,
)
from monitor.detect.analysis.signatures import failure_signature
from monitor.detect.analysis.testruns import RunOutcome, is_test_run, read_run
from monitor.events import UNKNOWN, Event

#: How much of an output the exit-code search looks at, at each end.
EXIT_CODE_SPAN = 600

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


#: Subcommands whose exit status 1 means "no": no match, a difference, not
#: installed.
_SUBCOMMANDS_BENIGN_ONE = {
    "git": frozenset({"grep", "diff"}),
    "pip": frozenset({"show"}),
    "pip3": frozenset({"show"}),
    "npm": frozenset({"ls", "list"}),
}


def _benign_one(segment: str, runs: str | None = None) -> bool:
    """Whether exit status 1 of the command ``segment`` (run by ``runs``,
    when known) means "no", not failure: ``grep``, ``diff``, ``test``,
    ``git grep``, ``git diff --exit-code``, ``pip show``, ``npm ls``, ``command -v``."""
    if segment.lstrip().startswith(("command -v ", "type ")):
        return True  # "is it installed?" -- no is an answer
    if runs is None:
        runs = program(segment)
    if runs in _BENIGN_ONE:
        return True
    subcommands = _SUBCOMMANDS_BENIGN_ONE.get(runs)
    if subcommands is not None:
        words = unwrapped(segment).split()
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


def _reported_findings(runs: str, code: int, content: str) -> bool:
    """A linter, the program ``runs`` of a command's last segment, exiting with
    its "found something" status and a report."""
    if runs not in _LINTERS:
        return False
    if not (0 < code < 32 if runs == "pylint" else code == 1):
        return False
    return bool(output_body(content[:2000]))


def exit_code(text: str) -> int | None:
    """The exit code a command output reports (``Exit code 1``, ``exit status 2``,
    ``"exit_code": 1``, ``make: *** … Error 2``), searched at both ends; ``None`` if none."""
    head, tail = output_ends(text, EXIT_CODE_SPAN)
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
                first = pattern.search(low)
                if first is not None and (best is None or first.start() < best.start()):
                    best = first
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


def no_status(result: Event) -> bool:
    """A command the harness stopped without a status (exit code -1, as
    Vorflux records a killed or timed-out call) that printed nothing: it
    says nothing of how the command went -- no failure of a streak, and
    no success that ends one."""
    if result.content.strip():
        return False
    return _exit_code(result, shell_command(result.call)) == -1


def _exit_code(result: Event, command: str | None) -> int | None:
    """The exit code a result reports: read from a shell's output, else kept by its adapter."""
    # Exit codes are only read from shell output: a file that *contains* "exit status 1"
    # does not make read_file fail (and most results are spared the search).
    call = result.call
    shellish = command is not None or tool_kind(result.tool).shell or (call is not None and is_test_run(call))
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
    parts = segments(command)
    last = program(parts[-1]) if parts else ""
    if code == 1:
        if parts and _benign_one(parts[-1], last):
            return True
        if (
            len(result.content) <= 300
            and len(parts) > 1
            and any(_benign_one(segment) for segment in parts[:-1])
            and not output_body(result.content)
        ):
            # ``grep X f | head`` or ``grep -q X f && echo found`` exiting
            # 1 with nothing to say: the search said "no".
            return True
    return _reported_findings(last, code, result.content)


def run_outcome(result: Event) -> RunOutcome:
    """What a test run's result reports (:func:`~monitor.detect.analysis.testruns.read_run`
    of its output, given whether it failed)."""
    cached: RunOutcome | None = result.facts.run_outcome
    if cached is None:
        cached = result.facts.run_outcome = read_run(result.content, failed(result))
    return cached


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
#: An import that found no module: which module is missing is the failure, not a name beside it.
_NO_MODULE = re.compile(r"No module named '?([\w.]+)")


def failure_kind(result: Event) -> str:
    """What kind of failure a failed result is, the names in it aside: its
    telling error line (or last line) without quoted names, paths, dotted
    names and numbers, and without the program a shell could not run.  Two
    different commands failing the same way (``brew``, then ``conda``: "command
    not found"; ``cat``, then ``sed``: "No such file or directory") share it;
    ``No matching distribution found for erfa`` and ``… for pyerfa`` do not,
    nor do imports missing different modules the commands did not import
    themselves (``No module named 'zoneinfo'``, then ``'distutils.cmd'``: the
    next missing piece)."""
    cached = result.facts.failure_kind
    if cached is not None:
        return cached
    signature = failure_signature(result)
    if signature is not None:
        line = signature[2:]
    else:
        lines = output_lines(clip_tail(result.content))
        line = lines[-1] if lines else ""
    missing = _NO_MODULE.search(line)
    if missing is not None and "import " + missing.group(1) not in (shell_command(result.call) or ""):
        # A module the command did not import itself is the next missing piece, not the same
        # setback again (a module it imports is its echo: ``import reqests``, then ``requets``).
        kind = "no module named " + missing.group(1)
        result.facts.failure_kind = kind
        return kind
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


#: A closer look shows at least this many lines the failure before did not: more than its own error line.
NEW_LINES = 2
#: Programs a command's output is piped into to read a part of it.
_FILTERS = frozenset({"tail", "head", "grep", "egrep", "fgrep", "less", "more"})
_NO_DIGITS = str.maketrans("", "", "0123456789")


def command_words(command: str | None) -> frozenset[str]:
    """A command's words (its first 2,000 characters) without their digits:
    ``tail -10`` and ``tail -30`` alike."""
    if not command:
        return frozenset()
    return frozenset(word.translate(_NO_DIGITS) for word in command[:2000].split())


#: A package pinned to a version in an install command: ``numpy==1.23.5``, ``'setuptools<60'``.
_PINNED = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)(==|>=|<=|~=|!=|<|>)([\w.*]+)")  # no spaces: not `> log`
_INSTALLS = re.compile(
    r"\b(?:pip3?|uv pip|conda|mamba|micromamba|poetry|npm|yarn|pnpm|gem|cargo)\b[^|;&]*\b(?:install|add)\b"
)


def pins(command: str | None) -> frozenset[tuple[str, str]]:
    """The packages an install command pins, with their constraints (``("numpy", "==1.24.0")``)."""
    if not command or not _INSTALLS.search(command[:2000]):
        return frozenset()
    return frozenset((name.lower(), op + version) for name, op, version in _PINNED.findall(command[:2000]))


def other_versions(previous_command: str | None, command: str | None) -> bool:
    """Whether ``command`` installs other versions of a package ``previous_command`` pinned:
    a search over versions (``numpy==1.23.5``, then ``numpy==1.24.0``), not the same try again."""
    before = dict(pins(previous_command))
    return any(name in before and before[name] != version for name, version in pins(command))


def pipe_parts(command: str) -> list[str]:
    """The commands of a pipeline: ``command`` split at each ``|`` outside quotes
    (``grep -i "error\\|Error"`` is one command) that is not part of ``||``."""
    parts: list[str] = []
    start, quote, i = 0, "", 0
    while i < len(command):
        char = command[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 1  # an escaped character inside double quotes
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "|":
            if command[i + 1 : i + 2] == "|" or command[i - 1 : i] == "|":
                i += 1  # `||`: one command, not a pipe
                continue
            parts.append(command[start:i])
            start = i + 1
        i += 1
    parts.append(command[start:])
    return parts


def unfiltered(command: str) -> tuple[str, bool]:
    """``command`` without the filters its output is piped into at its end
    (``2>&1 | tail -30``, ``| grep -i error | head -20``), and whether it had any."""
    parts = pipe_parts(command[:2000])
    filtered = False
    while len(parts) > 1 and program(parts[-1].strip()) in _FILTERS:
        parts.pop()
        filtered = True
    base = "|".join(parts).strip()
    if base.endswith("2>&1"):
        base = base[:-4].rstrip()
    return base, filtered


def closer_look(
    previous_command: str | None,
    command: str | None,
    previous_lines: frozenset[int] = frozenset(),
    lines: frozenset[int] = frozenset(),
) -> bool:
    """Whether ``command``, failing the same way as ``previous_command`` just
    before it, is a closer look at that failure rather than a retry: the
    command before *narrowed* (its words, digits aside, a strict part of the
    one before's, with or without the filters at their ends: one package of
    several) or *filtered* (the same command, its output now piped into
    ``tail``, ``head`` or ``grep``, or into another of them: ``| tail -20``,
    then ``| grep -i error``), showing at least :data:`NEW_LINES` lines
    (``previous_lines`` and ``lines``: :func:`~monitor.detect.analysis.outcomes.body_lines`
    of the two outputs) the one before did not.  Left alone: the same command
    again, a command with other words, and a re-run whose only new line is
    its error line.  Pipes are split outside quotes (:func:`pipe_parts`)."""
    if not command or not previous_command or len(lines - previous_lines) < NEW_LINES:
        return False
    words, previous_words = command_words(command), command_words(previous_command)
    if words and words < previous_words:
        return True
    base, filtered = unfiltered(command)
    previous_base, _ = unfiltered(previous_command)
    base_words, previous_base_words = command_words(base), command_words(previous_base)
    if base_words and base_words < previous_base_words:
        return True  # narrowed, its filter changed too
    # Filtered now: first filtered, or its filter changed (`| tail -20`, then `| grep -i error`).
    return filtered and bool(base_words) and base_words == previous_base_words and command != previous_command


def clip_tail(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[-limit:]


def shown_failure(key: str) -> str:
    """The part of a :func:`comparable_failure` (or ``outcome_key``) worth quoting."""
    if key[:2] == "T:":
        return key.split("\x00", 1)[1]
    return key[2:] if key[:2] in ("E:", "R:") else key
