"""Signatures of calls and results: fingerprints, failure signatures, outcome classes.

A *fingerprint* is looser than the exact call key: the tool name plus its
primary arguments only (design note 003), with shell reads of one file through
``cat`` / ``head`` / ``tail`` / ``less`` / ``sed -n`` folded into
``tool:file_read:PATH``.  An *outcome* says whether a result carries
information: an empty or "done" acknowledgement of one command run over many
items is not evidence of being stuck, an error or a "no matches" is.

Also here, because several detectors need the same judgement:

* :func:`failure_signature` — what went wrong, in a form that repeats when the
  same thing goes wrong again (the last exception line of a traceback), or
  ``None`` for a success or a failure that says nothing but "it failed";
* :func:`not_an_outcome` — results that say nothing about the call itself (a
  parallel sibling failed, the user refused the call);
* :func:`varies_only_in_items` — two calls that differ only in a path, file
  name, URL or number: one command over many items, not a retry;
* :func:`text_marks` — a small bit set of a result's lines, to tell whether a
  result showed anything new.
"""

from __future__ import annotations

import re
import shlex
import zlib
from collections.abc import Iterator
from typing import Any

from rapidfuzz.distance import Levenshtein

from monitor.detect.analysis.memo import TextMemo
from monitor.detect.analysis.shell import STATUS_WRAPPERS
from monitor.events import Event
from monitor.text import SIMILARITY_CHARS, call_key, canonical_args, clip, squash_ws

PRIMARY_KEYS = (
    "path",
    "file_path",
    "command",
    "cmd",
    "pattern",
    "query",
    "url",
    "content",
    "filename",
    "offset",
    "limit",
    # Where a search looks is part of what it does: the same pattern in another
    # directory or files is another search (one search over many places).
    "dirPath",
    "dir_path",
    "directory",
    "glob",
)
_PRIMARY_SET = frozenset(PRIMARY_KEYS)
COMMAND_KEYS = ("command", "cmd")
FILE_READERS = frozenset({"cat", "head", "tail", "less", "more", "bat"})
_READ_PROGRAMS = FILE_READERS | {"sed"}
_SHELL_META = re.compile(r"[|;&<>`]|\$\(")

#: Acknowledgements that say "it worked" and nothing else.
_ACK = re.compile(
    r"^(?:ok|okay|done|success(?:ful(?:ly)?)?|true|none|null|\{\}|\[\]|"
    r"(?:the )?file .{0,200}? (?:has been |was )?(?:updated|created|written|saved|edited|modified)"
    r"(?: successfully)?\.?.*|"
    r"(?:successfully )?(?:wrote|written|saved|updated|created|applied|edited|replaced|inserted|modified).{0,200}|"
    r"file (?:created|updated|written|saved|edited|modified) successfully.{0,300}|"  # Claude Code Write
    r"todos? (?:have|has) been (?:modified|updated|saved)(?: successfully)?\..*|"  # Claude Code TodoWrite
    r"plan updated|"  # Codex update_plan
    r"success\. updated the following files:.*|"  # Codex apply_patch
    # a job only started says that it started, not what it found (Claude Code, Vorflux, …)
    r"(?:background (?:job|process|task) started|command running in (?:the )?background).*|"
    r"exit code:? 0|process exited with code 0|"
    # Codex's code-mode exec: a script that ran and printed nothing (or an empty value)
    r"script completed(?: wall time:? [\d.]+ ?s(?:econds?)?)?(?: output:)?(?: \{\}| \[\]| null| undefined)?)\.?$",
    re.IGNORECASE | re.DOTALL,
)


def _command_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # Codex: ["bash", "-lc", "cat foo"] — the script is the last element.
        if len(value) >= 3 and value[0].endswith("sh") and value[1] in ("-c", "-lc", "-ic"):
            script: str = value[-1]
            return script
        return " ".join(value)
    return None


def shell_file_read(command: str) -> str | None:
    """The file a simple shell read of one file targets, else ``None``.

    ``cat foo.py``, ``head -n 50 foo.py``, ``tail -f log`` and
    ``sed -n '1,80p' foo.py`` all read one file; anything with pipes,
    redirects, ``;`` or several files does not fold."""
    head = command.lstrip()[:8].split(None, 1)
    if not head or head[0].rsplit("/", 1)[-1] not in _READ_PROGRAMS:
        return None  # cheap exit for the common case
    if _SHELL_META.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    operands: list[str] = []
    if program in FILE_READERS:
        skip_next = False
        for word in words[1:]:
            if skip_next:
                skip_next = False
                continue
            if word in ("-n", "-c", "--lines", "--bytes"):
                skip_next = True
                continue
            if word.startswith("-"):
                continue
            operands.append(word)
    elif program == "sed" and len(words) >= 4 and words[1] == "-n":
        operands = [w for w in words[3:] if not w.startswith("-")]
    else:
        return None
    return operands[0] if len(operands) == 1 else None


def fingerprint(event: Event) -> str:
    """The loose key of a tool call, memoized on the event."""
    facts = event.facts
    cached = facts.fingerprint
    if cached is not None:
        return cached
    args = event.args or {}
    tool = event.tool or "?"
    result = None
    if "command" in args or "cmd" in args:  # COMMAND_KEYS; most calls have neither
        for key in COMMAND_KEYS:
            command = _command_text(args.get(key))
            if command is not None:
                path = shell_file_read(command)
                if path is not None:
                    result = f"{tool}:file_read:{path}"
                break
    if result is None:
        # (One argument, as most calls have, is all primary or none: no set to build.)
        primary_keys = _PRIMARY_SET.intersection(args) if len(args) > 1 else None
        if primary_keys and len(primary_keys) < len(args):
            primary = {k: args[k] for k in PRIMARY_KEYS if k in primary_keys}
            result = f"{tool}:{canonical_args(primary)}"
        elif event.tool:
            # Every argument is primary, or none is: the fingerprint is the
            # exact call key (same tool, same canonical arguments), which the
            # other call detectors compute anyway.
            result = call_key(event)
        else:
            result = f"{tool}:{canonical_args(args)}"
    facts.fingerprint = result
    return result


def is_acknowledgement(result: Event) -> bool:
    """A result that only says "it worked" (or nothing at all)."""
    if result.is_error or len(result.content) > 400:
        return False
    cached = result.facts.ack
    if cached is None:
        cached = result.facts.ack = text_is_acknowledgement(result.content)
    return cached


def text_is_acknowledgement(content: str) -> bool:
    """:func:`is_acknowledgement` of a successful result of at most 400 characters."""
    text = squash_ws(content)
    return len(text) < 3 or bool(_ACK.match(text))


def arg_similarity(a: Any, b: Any, cutoff: float = 0.0) -> float:
    """Normalized Levenshtein similarity of two argument values (design note 001):
    strings by edit distance, objects field by field, lists element-wise."""
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return 1.0
        longest = max(len(a), len(b))
        # Edit distance is at least the length difference: skip hopeless pairs.
        if longest and 1.0 - abs(len(a) - len(b)) / longest < cutoff:
            return 0.0
        return Levenshtein.normalized_similarity(a[:2000], b[:2000], score_cutoff=cutoff or None)
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        if not keys:
            return 1.0
        matching = sum(1 for k in keys if k in a and k in b and arg_similarity(a[k], b[k], 0.8) >= 0.8)
        return matching / len(keys)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return 0.0
        if not a:
            return 1.0
        return sum(arg_similarity(x, y) for x, y in zip(a, b)) / len(a)
    return 1.0 if a == b else 0.0


# -- failures and their signatures ------------------------------------------------

#: Results that are not the call's own outcome: a sibling in a parallel batch
#: failed (Claude Code's "Sibling tool call errored", and from 2.1 "Cancelled:
#: parallel tool call Bash(…) errored"), the user refused or interrupted the call.
_NOT_AN_OUTCOME = (
    "sibling tool call errored",
    "cancelled: parallel tool call",
    "doesn't want to proceed",
    "was rejected",
    "request interrupted",
    "interrupted by user",
    "user denied",
    "permission to use",
)
#: What a non-error result says when a search came back empty-handed.
EMPTY_HANDED = (
    "no matches",
    "no files found",
    "no results",
    "0 results",
    "nothing found",
    "not found",
    "no such file",
    "does not exist",
    "could not find",
    "cannot find",
    "unable to find",
    "no match",
)


def _empty_handed(low: str) -> bool:
    """``low`` (lower-cased) contains an :data:`EMPTY_HANDED` phrase."""
    if "no" in low:
        # The phrases by a word each has: most texts with "no" ("not",
        # "know") have none of the words, and a substring test costs less
        # than a step of a generator.  (Kept in step with EMPTY_HANDED.)
        return (
            ("found" in low and ("no files found" in low or "nothing found" in low or "not found" in low))
            or (
                "find" in low and ("could not find" in low or "cannot find" in low or "unable to find" in low)
            )
            or ("match" in low and "no match" in low)  # (and "no matches")
            or ("result" in low and ("no results" in low or "0 results" in low))
            or ("such" in low and "no such file" in low)
            or ("exist" in low and "does not exist" in low)
        )
    # The phrases without "no".
    return "0 results" in low or "unable to find" in low


class LinePattern:
    """A ``^``-anchored ``re.MULTILINE`` pattern, tried at line starts only.

    CPython's regex engine tries such a pattern at every position of the text
    (about 100 instructions a character); behind a newline it skips from one
    newline to the next.  ``body`` is the pattern without its ``^``; matches
    are the pattern's, a match found behind a newline including that newline
    (``start()`` is one less; groups are the same)."""

    __slots__ = ("first", "rest")

    def __init__(self, body: str, flags: int = 0):
        self.first = re.compile("^(?:" + body + ")", flags | re.MULTILINE)  # at a line start
        self.rest = re.compile("\n(?:" + body + ")", flags | re.MULTILINE)  # at the next one

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """``re.finditer`` of the pattern (which must not match an empty string)."""
        first, rest = self.first.match, self.rest.search
        at = 0
        while True:
            if not at or text[at - 1] == "\n":  # (a match may end at a line start)
                found = first(text, at)
                if found is not None:
                    yield found
                    at = found.end()
                    continue
            found = rest(text, at)
            if found is None:
                return
            yield found
            at = found.end()

    def lines(self, text: str) -> list[str]:
        """``re.findall`` of a pattern without groups: the matched texts."""
        first = self.first
        if "\n" not in text:  # one line, one line start (most failures)
            found = first.match(text)
            return [] if found is None else [found.group()]
        return [found.group() if found.re is first else found.group()[1:] for found in self.finditer(text)]

    def remove(self, text: str) -> str:
        """``re.sub("", text)``: the text without what the pattern matches."""
        first = self.first
        if "\n" not in text:
            found = first.match(text)
            return text if found is None else text[found.end() :]
        parts: list[str] = []
        kept = 0
        for found in self.finditer(text):
            parts.append(text[kept : found.start() if found.re is first else found.start() + 1])
            kept = found.end()
        if not parts:
            return text
        parts.append(text[kept:])
        return "".join(parts)


#: The last line of a traceback or a tool's error report: what went wrong.
_ERROR_LINE = LinePattern(
    r"[ \t]*(?:[\w.]*(?:Error|Exception|Exit|Interrupt)\b|error\b|ERROR\b|fatal\b|panic\b|"
    r"Fatal\b|FATAL\b|thread '[^']*' panicked)[^\n]*"
)
#: Wrapper lines agents put around a command's output (Claude Code, Codex).
_WRAPPER_LINE = LinePattern(
    rf"[ \t]*(?:{STATUS_WRAPPERS}|"
    r"chunk id:[^\n]*|original token count:[^\n]*|error: exit code -?\d+|</?tool_use_error>)[ \t]*$",
    re.IGNORECASE,
)
#: Error lines that only say a command failed, not why ("make: Error 2",
#: "Error: exit status 1"): a more specific line before them is preferred.
_GENERIC_ERROR = re.compile(
    r"exit (?:code|status)|non-zero|returned \d|\berror \d+\s*$"
    # pip's wrappers around a package's own build error: that it failed, not why
    r"|error: (?:subprocess-exited-with-error|metadata-generation-failed)",
    re.IGNORECASE,
)
#: :data:`_GENERIC_ERROR` for lower-cased ASCII text, where the two agree (``(?i)``
#: tries every alternative at every position), and words one of its matches has.
_GENERIC_ERROR_LOWER = re.compile(_GENERIC_ERROR.pattern)
_GENERIC_WORDS = ("exit ", "non-zero", "returned ", "error ", "error:")
_DROP_DIGITS = str.maketrans("", "", "0123456789")
_DIGITS = b"0123456789"
#: Shorter than this after normalization, a failure only says "it failed".
MIN_SIGNATURE_CHARS = 8


def not_an_outcome(result: Event) -> bool:
    """A result that says nothing about its own call (sibling failed, user refused).
    Agents report those as errors, which keeps the common case one attribute read."""
    if not result.is_error or len(result.content) > 600:
        return False
    cached = result.facts.not_an_outcome
    if cached is None:
        low = result.content.lower()
        cached = False
        for marker in _NOT_AN_OUTCOME:  # (a loop, not any() over a generator: cheaper)
            if marker in low:
                cached = True
                break
        result.facts.not_an_outcome = cached
    return cached


def _signature(text: str) -> str:
    """Normalized for "the same failure again": digits (line numbers, pids,
    counters, timestamps) dropped, tool-use tags removed, white space squashed."""
    text = text.replace("<tool_use_error>", " ").replace("</tool_use_error>", " ")
    if text.isascii():  # the same digits dropped as bytes: str.translate looks up every character
        return " ".join(text.encode("ascii").translate(None, _DIGITS).decode("ascii").split())
    return " ".join(text.translate(_DROP_DIGITS).split())


def _generic_error(line: str) -> bool:
    """``_GENERIC_ERROR.search(line)``, cheaper."""
    if not line.isascii():
        return _GENERIC_ERROR.search(line) is not None
    low = line.lower()
    for word in _GENERIC_WORDS:
        if word in low:
            return _GENERIC_ERROR_LOWER.search(low) is not None
    return False


def _telling_error_line(lines: list[str]) -> str:
    """The last error line that says why, not merely that, something failed."""
    for line in reversed(lines):
        if not _generic_error(line):
            return line
    return lines[-1]


#: An argument this long or longer, found in its result, is the call's input quoted back.
MIN_ECHO_CHARS = 8
#: A call's argument text searched for the lines a failure quotes back (head only).
ECHO_SOURCE_CHARS = 20_000


def not_echoed(text: str, call: Event | None) -> str:
    """``text`` without the lines that quote its own call's arguments back (an edit
    refused "Found 4 matches…" then ``String: <the old text>``): what the agent sent is
    not what the failure shows anew."""
    if call is None or not call.args:
        return text
    sent = [
        v[:ECHO_SOURCE_CHARS] for v in call.args.values() if isinstance(v, str) and len(v) >= MIN_ECHO_CHARS
    ]
    if not sent:
        return text
    kept = []
    for line in text.splitlines():
        quoted = line.strip()
        _, colon, after = quoted.partition(": ")
        tail = after.strip() if colon else ""
        if len(quoted) >= MIN_ECHO_CHARS and any(quoted in arg or (tail and tail in arg) for arg in sent):
            continue
        kept.append(line)
    return "\n".join(kept)


def failure_signature(result: Event) -> str | None:
    """What went wrong, comparable across different calls; ``None`` when the
    result is not a failure, or a failure with nothing to compare ("Exit code 1").

    Errors keep their last exception-style line when they have one (the last
    line of a Python traceback, ``fatal: …``, ``error[E0425]: …``), so five
    different ways of starting a program that end in the same
    ``ModuleNotFoundError`` share a signature although their tracebacks differ.
    A non-error result counts only when it is short and empty-handed ("No
    matches found") or ends in a traceback: a file that mentions "error" is not
    a failure."""
    cached = result.facts.failure_signature
    if cached is not None:
        return cached or None
    signature = ""
    text = result.content
    if len(text) > SIMILARITY_CHARS:
        text = clip(text)
    failed = result.is_error
    if not failed:
        if len(text) <= 300:
            failed = _empty_handed(text.lower())
        if not failed and "Traceback (most recent call last)" in text:
            failed = True
    if failed and not not_an_outcome(result):
        if result.is_error and "\n" in text:
            text = not_echoed(text, result.call)  # what went wrong, not the input it quotes back
        candidate = _FAILURES[text]
        if len(candidate) >= MIN_SIGNATURE_CHARS:
            signature = ("E:" if result.is_error else "R:") + candidate
    result.facts.failure_signature = signature
    return signature or None


def _failure_text(text: str) -> str:
    """What a failure's (clipped) text says went wrong, normalized: its
    telling error line, or the whole text without wrapper lines."""
    body = _WRAPPER_LINE.remove(text)
    lines = _ERROR_LINE.lines(body)
    # Without an error line the whole (clipped) text is the signature: a
    # shared preamble must not make two different failures look alike.
    return _signature(_telling_error_line(lines))[:300] if lines else _signature(body)


#: ``_failure_text`` by text: a loop fails the same way again and again.
_FAILURES = TextMemo(2000, 512, _failure_text)


def failed_silently(result: Event) -> bool:
    """An error result with nothing to say beyond its exit code."""
    return result.is_error and failure_signature(result) is None and not not_an_outcome(result)


# -- one command over many items ---------------------------------------------------

#: Argument keys that name the item a call works on.
ITEM_KEYS = frozenset(
    {
        "path",
        "file_path",
        "filename",
        "url",
        "cwd",
        "workdir",
        "directory",
        "dir",
        "offset",
        "limit",
        "page",
        "notebook_path",
    }
)
_ITEM_TOKEN = re.compile(
    r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*://\S+"  # a URL
    r"|[-\w.]*[/\\][^\s]*"  # a path
    r"|[-\w]+(?:\.[-\w]+)+"  # a dotted name: a file, a host, a module
    r"|-?\d+(?:[.,:-]\d+)*[%a-z]{0,2})$"  # a number
)


def _strip_quotes(token: str) -> str:
    return token.strip("'\"`,;()[]{}")


def _item_tokens_only(a: str, b: str) -> bool:
    """``a`` and ``b`` differ only in path, file name, URL or number tokens."""
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    changed = [(x, y) for x, y in zip(ta, tb) if x != y]
    return bool(changed) and all(
        _ITEM_TOKEN.match(_strip_quotes(x)) and _ITEM_TOKEN.match(_strip_quotes(y)) for x, y in changed
    )


def varies_only_in_items(a: Any, b: Any) -> bool:
    """Two calls' arguments differ, but only in the item they work on (a path,
    a file name, a URL, a page or a number): ``git add a.py`` / ``git add b.py``,
    ``pytest tests/test_a.py`` / ``pytest tests/test_b.py``.  That is one command
    run over many items, not a retry with a slightly different spelling."""
    if isinstance(a, dict) and isinstance(b, dict):
        changed = [k for k in set(a) | set(b) if a.get(k) != b.get(k)]
        if not changed:
            return False
        for key in changed:
            x, y = a.get(key), b.get(key)
            if key in ITEM_KEYS:
                continue
            if isinstance(x, list) and isinstance(y, list):
                x, y = " ".join(map(str, x)), " ".join(map(str, y))
            if not (isinstance(x, str) and isinstance(y, str) and _item_tokens_only(x, y)):
                return False
        return True
    if isinstance(a, str) and isinstance(b, str):
        return _item_tokens_only(a, b)
    return False


def primary_args(call: Event) -> dict[str, Any]:
    """The primary arguments of a call, or all of them when it has none
    (Claude's ``description`` of a Bash call says nothing about what runs);
    memoized on the event."""
    cached = call.facts.primary_args
    if cached is None:
        cached = call.facts.primary_args = primary_of(call.args or {})
    return cached


def primary_of(args: dict[str, Any]) -> dict[str, Any]:
    """:func:`primary_args` of a call's arguments."""
    return {k: args[k] for k in PRIMARY_KEYS if k in args} or args


# -- did a result show anything new? ----------------------------------------------

#: Bits in a :func:`text_marks` set (a power of two).  Each line sets two bits, from
#: two parts of one CRC: a new line looks old only if both are taken (one bit was not enough).
LINE_BITS = 4096
_LINE_MASK = LINE_BITS - 1


def text_marks(text: str) -> int:
    """A result's non-blank lines (white space squashed; pass the clipped head
    and tail of a long text) as a bit set in an ``int``: cheap to keep and to compare."""
    marks = 0
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            crc = zlib.crc32(line.encode("utf-8", "replace"))
            marks |= (1 << (crc & _LINE_MASK)) | (1 << ((crc >> 16) & _LINE_MASK))
    return marks
