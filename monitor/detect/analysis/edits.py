"""Edits: whether a call changes files, and file operations done by hand.

* :func:`is_edit` — an edit or write tool, or a shell command that writes a
  file (``sed -i``, ``perl -i``, ``tee``, ``patch``, ``git apply``,
  ``echo/printf/cat … > file``, heredocs);
* :func:`manual_file_op` — a file read or written by hand in the shell
  (``cat``, ``head``, ``echo >``, ``sed -i``) where a file tool would do.

Judged per simple command by its program, not by word-boundary regexes over
the whole (possibly long) command; bounded to 4,000 characters.
"""

from __future__ import annotations

import re

from monitor.detect.analysis.memo import TextMemo
from monitor.detect.analysis.shell import program, segments, shell_command, tool_kind
from monitor.events import Event

_REDIRECT = re.compile(r">{1,2}\s*(?!/dev/null|&)[^\s&>]")
_SED_INPLACE = re.compile(r"\s(?:-[a-zA-Z]*i|--in-place)")
_PERL_INPLACE = re.compile(r"\s-\w*i")
_HEREDOC = re.compile(r"<<-?\s*['\"]?\w+")
_READ_PROGRAMS = frozenset({"cat", "head", "tail", "less", "more", "nl", "tac", "awk", "sed"})


def is_edit(call: Event) -> bool:
    """True when a tool call changes files (an edit/write tool, or a shell edit)."""
    if tool_kind(call.tool).edit:
        return True
    command = shell_command(call)
    return bool(command) and _EDITS[command]


def _edits(command: str) -> bool:
    """Whether the command line ``command`` changes files (see :func:`_shell_edit`)."""
    return _shell_edit(command[:4000], segments(command))


#: Whether a command line changes files, by its text alone.
_EDITS = TextMemo(256, 2048, _edits)


def _shell_edit(command: str, parts: list[str]) -> bool:
    """A heredoc, or a simple command of ``parts`` that writes a file."""
    if "<<" in command and _HEREDOC.search(command):
        return True
    for segment in parts:
        if _writes(program(segment), segment):
            return True
    return False


def _writes(runs: str, segment: str) -> bool:
    """Whether a simple command run by the program ``runs`` writes a file (see :func:`is_edit`)."""
    if runs in ("tee", "patch"):
        return True
    if runs == "sed":
        return _SED_INPLACE.search(segment) is not None
    if runs == "perl":
        return _PERL_INPLACE.search(segment) is not None
    if runs == "git":
        return segment.split()[1:2] == ["apply"]
    if runs in ("echo", "printf", "cat"):
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
    parts = segments(command)
    # :func:`_shell_edit` and "every segment reads" in one pass: each
    # segment's program is found once.
    reads = bool(parts)
    for segment in parts:
        runs = program(segment)
        if _writes(runs, segment):
            return True
        if runs not in _READ_PROGRAMS:
            reads = False
    return reads
