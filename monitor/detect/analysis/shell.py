"""Shell commands: what a tool call runs, and how its output is wrapped.

* :func:`tool_kind` — what a tool's name says it is (a test tool, an edit
  tool, a shell);
* :func:`shell_command` — the command line a shell-like call runs;
* :func:`segments` / :func:`program` / :func:`unwrapped` — the simple commands
  of a command line, the program each runs and the wrappers before it
  (``env X=1``, ``sudo``, ``npx``, ``uv run``, ``python -m``);
* :func:`output_body` — what a command printed, without the lines agents wrap
  around it (exit code reports, ``<returncode>`` tags).

Bounded: a command line is looked at up to 4,000 characters.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from monitor.detect.analysis.memo import TextMemo
from monitor.events import UNKNOWN, Event

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
COMMAND_KEY_SET = frozenset(COMMAND_KEYS)
_SHELL_STRING_KEYS = ("input", "code", "commands")

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
_TEST_TOOLS = re.compile(r"(?i)(?:run_?)?tests?|test_?runner|run_?pytest|pytest")
_EDIT_TOOLS = re.compile(
    r"(?i)edit|write|replace|patch|insert|create_file|str_replace|apply_diff|multiedit|notebook|save_file|append"
)


class ToolKind(NamedTuple):
    """What a tool's name says it is."""

    test: bool  # a test tool (``run_tests``, ``pytest``)
    edit: bool  # a tool that edits files (not a shell, not a to-do list)
    shell: bool  # a shell: its calls run command lines


def _judge_tool(tool: str | None) -> ToolKind:
    name = tool or ""
    low = name.lower()
    return ToolKind(
        bool(_TEST_TOOLS.fullmatch(name)),
        bool(_EDIT_TOOLS.search(low)) and low not in SHELL_TOOLS and "todo" not in low,
        low in SHELL_TOOLS,
    )


#: Tool name -> its :class:`ToolKind`: names repeat, regexes and lower-casing
#: need not (bounded even if names are made up on the fly).
_TOOL_KINDS = TextMemo(256, 4096, _judge_tool)


def tool_kind(tool: str | None) -> ToolKind:
    """What the tool named ``tool`` is, by its name alone."""
    kind: ToolKind = _TOOL_KINDS[tool]
    return kind


def _args_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # Codex-style argv: ["bash", "-lc", "pytest -q"] runs the last element.
        if len(value) >= 3 and value[-2] in ("-c", "-lc", "-ic", "-lic", "/c", "-Command"):
            last: str = value[-1]
            return last
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
    if not COMMAND_KEY_SET.isdisjoint(args):  # (most calls have none of these keys: one C-level test)
        command = _first_command(args, COMMAND_KEYS)
    if command is None and tool_kind(call.tool).shell:
        command = _first_command(args, _SHELL_STRING_KEYS)
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


def segments(command: str) -> list[str]:
    """The simple commands of a command line (split at ``&&``, ``||``, ``;``,
    ``|`` and new lines), stripped, empty ones left out."""
    return [s.strip() for s in _SEGMENTS.split(command[:4000]) if s.strip()]


def unwrapped(segment: str) -> str:
    """``segment`` without the wrappers before its program (``env X=1``,
    ``sudo``, ``npx``, ``uv run``, ``python -m``: :data:`_WRAPPERS`)."""
    head = segment[:8].split(None, 1)  # (a long first word is cut: then the regex decides)
    word = head[0] if head else ""
    if word in _WRAPPER_WORDS or "=" in word or word.startswith("python") or len(word) == 8:
        return _WRAPPERS.sub("", segment, count=1)
    return segment  # (most segments: no wrapper starts with that word)


def program(segment: str) -> str:
    """The base name of the program a simple command runs (its wrappers aside)."""
    stripped = unwrapped(segment)
    word = stripped.split(None, 1)[0] if stripped else ""
    return word.rsplit("/", 1)[-1]


#: Lines that wrap a command's output without being part of it: exit-code
#: reports (Claude Code, Codex; Codex's code-mode ``exec``: "Script completed",
#: "Wall time 0.2 seconds") and mini-swe-agent's ``<returncode>`` tags.
#: The exit-code and timing lines themselves (a regex alternation), shared with
#: ``signatures``' wrapper lines.
STATUS_WRAPPERS = (
    r"exit code:?\s*-?\d+|process exited with code -?\d+|wall time(?::| [\d.]+ ?s)[^\n]*|output:|"
    r"script (?:completed|failed)|script error:|<returncode>\s*-?\d+\s*</returncode>|</?output>"
)
_WRAPPERS_OF_OUTPUT = re.compile(rf"(?im)^[ \t]*(?:{STATUS_WRAPPERS}|<returncode>|</returncode>)[ \t]*$")


#: Status lines a harness writes after a command's output, not printed by the command: Gemini CLI's
#: shell tool ends its result in ``Error: (none)``, ``Exit Code: 1``, ``Signal: 0``, ``Background PIDs:
#: (none)`` and ``Process Group PGID: 8632`` (google-gemini/gemini-cli, packages/core/src/tools/shell.ts).
_STATUS_AFTER_OUTPUT = re.compile(
    r"(?i)(?:error:\s*\(none\)|exit code:\s*(?:-?\d+|\(none\))|signal:\s*(?:-?\d+|\(none\)|sig[a-z]+)"
    r"|background pids:[\d,\s]*(?:\(none\))?|process group pgid:\s*(?:\d+|\(none\)))\s*"
)


def without_status(lines: list[str]) -> list[str]:
    """``lines`` (a command's output, split) without the status lines a harness wrote after
    it (:data:`_STATUS_AFTER_OUTPUT`): their last is the output's own last line, where a
    failure says what went wrong."""
    end = len(lines)
    while end and _STATUS_AFTER_OUTPUT.fullmatch(lines[end - 1].strip()):
        end -= 1
    return lines if end == len(lines) else lines[:end]


def output_lines(text: str) -> list[str]:
    """The non-empty lines of what a command printed (:func:`output_body`), without the
    status lines a harness writes after it (:func:`without_status`)."""
    return without_status([line for line in output_body(text).splitlines() if line.strip()])


def output_body(text: str) -> str:
    """What a command printed, without the lines agents wrap around it (exit
    code reports, ``<returncode>``/``<output>`` tags); empty when it printed
    nothing -- which says nothing about whether anything changed."""
    if len(text) > 400:
        return text  # long enough to hold output whatever wraps it
    return _WRAPPERS_OF_OUTPUT.sub("", text.replace("<output>", "\n").replace("</output>", "\n")).strip()


def output_ends(text: str, span: int) -> tuple[str, str]:
    """The head and tail of a command's output, ``span`` characters each (exit
    codes and test summaries live there): ``(text, "")`` when it is short."""
    if len(text) <= 2 * span:
        return text, ""
    return text[:span], text[-span:]
