"""What a round ended in, read from the result's text: failure, nothing found, rejection.

Many formats carry no exit codes (SWE-agent, Aider, Trae, a harness's own
search tool): whether a round failed, found nothing or was refused must be
read from what came back.  The rules are written once, here, and documented
in docs/detectors.md (*Stale outcomes*):

* **rejected**: the harness refused the reply or the action ("No tool calls
  found in the response", "Your patch is empty", "did not conform to the edit format", "validation failed",
  an edit the tool did not apply ("Your changes have NOT been applied", "No exact match found",
  a patch whose old lines are not in the file: "Failed to find expected lines"),
  "has not been read yet", a model call refused at a token limit…).  Read
  in tool results and in the harness's messages (user-role or system).
  A system message ending in an error line (aider's ``litellm.NotFoundError:
  …``) is a failure of the round too.
* **empty**: a search or lookup that found nothing ("No matches found for
  …", "0 results", "nothing found").  Only for calls that search.
* **failure**: the tool said it failed (``is_error``, an exit code, a failed
  test run), or the output *ends* in an error line (``Error: …``,
  ``fatal: …``, a traceback's last line, ``bash: x: command not found``
  -- the program named stays in the key --, a line
  ending "failed"), or the whole output is a short "not there" ("No session
  found for 2327", "does not exist").  An error line in the middle of a
  file that was read is not an outcome.

:func:`outcome_of` returns an :class:`Outcome` whose ``key`` compares rounds:
the telling line of the text after :func:`normalise`, which drops what varies
by accident between two identical outcomes (digits, so counters, pids, line
numbers and timestamps; hex ids and addresses; terminal colours; temporary
directories) and, for an empty search, the quoted search term the result
echoes.  What stays is what went wrong: ``No module named 'pytz'`` and ``No
module named 'sqlparse'`` are different outcomes, and a test run's outcome
keeps which tests failed and how many (:func:`~monitor.detect.analysis.failures.run_outcome`).

Pure and bounded: texts are clipped to their head and tail first.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.failures import comparable_failure, failed, run_outcome
from monitor.detect.analysis.shell import shell_command, without_status
from monitor.detect.analysis.signatures import MIN_ECHO_CHARS, is_acknowledgement, not_an_outcome, not_echoed
from monitor.detect.analysis.testruns import is_test_run
from monitor.events import Event
from monitor.text import clip

#: How much of a text is read (head and tail).
OUTCOME_CHARS = 4000
#: An error line counts as the outcome of a non-error result only among its last lines.
TAIL_LINES = 4
#: How much of a text's end is read for its last lines.
ENDING_CHARS = 1500
#: A key longer than this says no more.
KEY_CHARS = 240

FAILURE, EMPTY, REJECTED, ANSWER = "failure", "empty", "rejected", "answer"
#: A success shorter than this (normalised) says too little to be "the same answer".
MIN_ANSWER_CHARS = 40


class Outcome(NamedTuple):
    """What one round ended in: its ``kind``, a ``key`` equal for the same
    outcome (see :func:`normalise`), the line to quote, and (a failure's) the digests of
    the text's lines (normalised, see :func:`body_lines`): a round with the
    same key that shows a line no earlier one showed told the agent
    something new (a debug print, another probe)."""

    kind: str
    key: str
    shown: str
    body: frozenset[int] = frozenset()


#: A harness refusing the reply or the action: the round did nothing.
_REJECTION = re.compile(  # searched in lower-cased text
    r"no tool calls? (?:found|in the response)|must (?:include|contain) (?:at least |exactly )?one"
    r"|exactly one (?:action|command|tool|bash|code block)|format error|malformed (?:response|action|reply)"
    r"|your (?:patch|diff|submission) is empty|did not conform to the edit format"
    r"|(?:search/replace|edit) blocks? failed to match|searchreplacenoexactmatch"
    r"|could not find the exact text|old_?(?:str|string|text) (?:was )?not found|no replacement was performed"
    r"|did not appear verbatim|string to replace not found|no exact match found"
    r"|failed to find (?:expected lines|context)"
    r"|(?:changes|edit|patch) (?:have|has|was|were) not been applied"
    r"|has not been read yet"
    r"|validation failed|hook (?:failed|rejected|blocked)|(?:commit|push) (?:was )?rejected"
    r"|unknown (?:tool|command|action)|invalid (?:tool|action|command) (?:name|call)?"
    r"|has hit a (?:token|rate) limit|(?:token|context|rate) limit (?:exceeded|reached)|context_length_exceeded"
)
#: Words one of :data:`_REJECTION`'s matches holds (lower case): a text with
#: none of them is searched no further (a case-blind alternation costs about
#: a millisecond per 4000 characters; these ``in`` tests, microseconds).
_REJECTION_WORDS = (
    "tool call", "must include", "must contain", "exactly one", "format error", "malformed", "is empty",
    "did not conform", "failed to match", "searchreplace", "exact text", "old_s", "old_t", "oldstr",
    "oldtext", "to replace not found", "no replacement", "verbatim", "not been read", "validation failed",
    "exact match", "not been applied", "failed to find",
    "hook ", "rejected", "unknown tool", "unknown command", "unknown action", "invalid tool",
    "invalid action", "invalid command", "hit a token", "hit a rate", "limit exceeded", "limit reached",
    "context_length",
)  # fmt: skip
#: Shorter pieces of :data:`_REJECTION_WORDS`, each held by several of them: a text is
#: searched for these first, and for the words that hold a piece only when it holds the
#: piece (most texts hold none: 18 ``in`` tests of a text instead of 35).
_REJECTION_PIECES = (
    "not ", "exact", "old", "invalid ", "unknown ", "limit ", "hit a ", "must ", "replace", "failed",
)  # fmt: skip


def _by_piece(words: tuple[str, ...], pieces: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each of ``pieces`` with the ``words`` that hold it (and no earlier piece), then
    each word that holds none as its own piece: a text holds one of ``words`` exactly
    when it holds a piece and one of that piece's words."""
    groups = []
    left = words
    for piece in pieces:
        groups.append((piece, tuple(word for word in left if piece in word)))
        left = tuple(word for word in left if piece not in word)
    return (*groups, *((word, (word,)) for word in left))


#: :data:`_REJECTION_WORDS` by piece (see :func:`_by_piece`).
_REJECTION_GROUPS = _by_piece(_REJECTION_WORDS, _REJECTION_PIECES)
#: A checker's diagnostic named by its code, as harnesses list them under a refused edit
#: (flake8's ``- E999 SyntaxError: unmatched ']'``, ``F821 undefined name``, tsc's ``TS2322: …``).
_DIAGNOSTIC = re.compile(r"^[ \t]*[-*]?[ \t]*[A-Z]{1,3}\d{3,4}\b:?[ \t]+\S[^\n]*", re.M)
#: A search or lookup that found nothing.
_EMPTY = re.compile(
    r"(?i)\bno (?:matches|match|results?|files?|entries|items|hits)(?: were)? found\b|\bnothing found\b"
    r"|\b0 (?:results|matches|hits)\b|\bfound 0\b|\bno matches\b|\bdid not match any\b"
)
#: A short answer that something looked up is not there ("No session found
#: for 2327", "foo: not found", "… does not exist"): a failed lookup.
_MISSING = re.compile(r"(?i)\bno (?:\w+ ){1,2}found\b|\bnot found\b|\bdoes(?: not|n't) exist\b|\bno such \w+")
#: A lookup's answer longer than this is more than "not there".
MISSING_CHARS = 300
#: A line saying what went wrong: it starts with an error word (the last line
#: of a traceback, ``error: …``, ``fatal: …``, ``FAILED …``), is a program's
#: complaint (``bash: x: command not found``, ``sed: -e expression …``), or
#: ends in "failed" / "rejected" ("Pre-commit validation failed").
_ERROR_LINE = re.compile(
    r"^\W{0,3}(?:[\w.]*(?:Error|Exception)\b|error\b|ERROR\b|Error\b|fatal\b|FATAL\b|Fatal\b|panic\b"
    r"|FAILED\b|FAIL\b|failed\b|Failed\b)"
    r"|^[\w./-]+: (?:line \d+: )?.*(?i:error|not found|no such file|permission denied|cannot|can't|unexpected eof)"
    r"|\b(?i:failed|rejected)\W*$"
)
#: A line that only says that something failed, not why ("Exit code 1",
#: "(Command exited with code 1)", "make: *** Error 2"): never the telling line.
_GENERIC = re.compile(
    r"(?i)exit(?:ed)?(?: with)? (?:code|status)|non-zero|returned (?:non-zero|\d)|^\W*error:? \d+\W*$"
    r"|\*\*\* .*error \d+|</?(?:returncode|output|tool_use_error)>|^\W*(?:error|fatal|failed|failure)\W*$"
)
#: Tools and shell programs that search: their "nothing" is an answer.
_SEARCH_TOOL = re.compile(r"(?i)search|find|grep|glob|lookup|locate|\bls\b|list")
_SEARCH_PROGRAM = re.compile(r"(?:^|[\s;&|(])(?:grep|egrep|rg|ag|ack|find|fd|locate|git grep|git log -S)\b")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_TEMP_DIR = re.compile(r"(/(?:tmp|var/folders|private/var)/)[^\s/'\"]+")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
_HASH = re.compile(r"\b(?=[a-fA-F]*\d)[0-9a-fA-F]{7,}\b")
_DIGITS = re.compile(r"\d+")
_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`|‘[^’\n]{0,200}’|“[^”\n]{0,200}”")
_AFTER_FOR = re.compile(r"(?i)(\b(?:for|matching|named|of)\b).*$")


def normalise(text: str, *, query: bool = False, limit: int = KEY_CHARS) -> str:
    """``text`` without what varies by accident between two identical
    outcomes: terminal colours, temporary directories, hex ids and
    addresses (``0x`` kept), commit hashes, digits (counters, pids, line numbers, timestamps); white
    space squashed, lower-cased, clipped.  With ``query`` (an empty search),
    also the quoted search term and whatever follows "for"/"matching"."""
    text = _without_colours(text)
    if query:
        text = _AFTER_FOR.sub(r"\1 <q>", _QUOTED.sub("<q>", text))
    return " ".join(_scrubbed(text).split()).lower()[:limit]


#: Each character a hash is made of, as "0": seven in a row are where a hash can be.
_HEX_AS_ZERO = bytes.maketrans(b"123456789abcdefABCDEF", b"0" * 21)
_ASCII_DIGITS = b"0123456789"


def _without_colours(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def _scrubbed(text: str) -> str:
    """``text`` without temporary directories' names, hex ids and
    addresses (``0x`` kept), hashes and digits.  Each pattern runs only
    on a text that holds what it looks for: a pattern search costs tens
    of instructions a character, these tests a few (and most outputs
    hold no address, temporary path or hash)."""
    if "/tmp/" in text or "/var/folders/" in text or "/private/var/" in text:
        text = _TEMP_DIR.sub(r"\1<tmp>", text)
    if "0x" in text:
        text = _ADDRESS.sub("0x", text)
    # Digits are dropped, not replaced: the same as a failure signature does
    # (monitor.detect.analysis.signatures), so the two compare.
    if not text.isascii():
        return _DIGITS.sub("", _HASH.sub("", text))
    # ASCII text (most): its bytes are translated, a few instructions a
    # character where a str's translation costs tens (and ``\d`` is 0-9 alone).
    raw = text.encode("ascii")
    if b"0000000" in raw.translate(_HEX_AS_ZERO):
        raw = _HASH.sub("", text).encode("ascii")
    return raw.translate(None, _ASCII_DIGITS).decode("ascii")


#: At most this many lines of a body are kept (its head and tail are read).
BODY_LINES = 200


def body_lines(text: str) -> frozenset[int]:
    """Digests of the lines of ``text`` (its head and tail), normalised as
    :func:`normalise` does (the substitutions made once over the whole
    text), without the lines that only say that it failed ("exit code 1")."""
    text = _scrubbed(_without_colours(clip(text, OUTCOME_CHARS)))
    digests = set()
    for raw in text.splitlines():
        line = " ".join(raw.split()).lower()
        if line and not _generic(line):
            digests.add(hash(line[:KEY_CHARS]))
            if len(digests) >= BODY_LINES:
                break
    return frozenset(digests)


#: A Python traceback frame (``File "x.py", line 12, in f``; digits are scrubbed
#: before lines are read): the line after it, indented deeper, quotes its source.
_FRAME = re.compile(r'[ \t]*File "[^"\n]*", line\b')
#: Lines that quote code or point at it, not lines the program printed: pytest's
#: ``>`` (the failing line) and ``E`` (its explanation) lines, a location
#: (``tests/test_a.py:12: AssertionError``, ``file.py:12: in f``), a JavaScript stack
#: frame (``at f (a.js:1:2)``), a code frame's numbered or pointer line (``> 12 | x``,
#: ``   | ^``), a line of carets or tildes under a quoted line (Python 3.11).
_QUOTES_CODE = re.compile(
    r">(?:\s|$)|E(?:\s|$)|[\w./\\-]+\.\w+:\d*:? (?:in \S+$|\w*(?:Error|Exception|Failure)\b)"
    r"|\s+at \S|\s*>?\s*\d*\s*\|(?:\s|$)|\s*[~^]+\s*$"
)
#: A pytest section heading (``____ test_foo ____``, ``_ _ _ _`` between frames):
#: the traceback it starts runs to the next ``--- Captured … ---`` or ``===`` line.
_PYTEST_FAILURE = re.compile(r"_{3,} \S.* _{3,}\s*$|(?:_ ){3,}")
_PYTEST_SECTION_END = re.compile(r"-{3,} Captured |={3,}")


#: A test runner's progress line (``..F.s``, ``tests/test_a.py .F. [ 50%]``; digits
#: scrubbed): which tests passed, in an order parallel runs shuffle.
_PROGRESS = re.compile(r"\s*(?:\S+\s+)?(?:[.sSfFeExX]*\.[.sSfFeExX]*|[FE]+)\s*(?:\[\s*%\])?\s*$")


def _quoted_source(lines: list[str]) -> set[int]:
    """The indexes of ``lines`` that quote source code or point at it (see
    :func:`printed_lines`)."""
    quoted: set[int] = set()
    frame_indent = -1  # the indentation of the frame just read, if the last line was one
    in_pytest = False
    for index, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if frame_indent >= 0 and indent > frame_indent and line.strip() and not _FRAME.match(line):
            quoted.add(index)  # the source line a frame quotes
            frame_indent = -1
            continue
        frame_indent = -1
        if in_pytest and _PYTEST_SECTION_END.match(line):
            in_pytest = False
        if _PYTEST_FAILURE.match(line):
            in_pytest = True
            continue  # (the heading names the failing test: printed, and in the signature)
        if _FRAME.match(line):
            frame_indent = indent
            quoted.add(index)
        elif in_pytest or _QUOTES_CODE.match(line) or _PROGRESS.match(line):
            quoted.add(index)
    return quoted


def printed_lines(text: str) -> frozenset[int]:
    """:func:`body_lines` without the lines that quote source code: what the
    program printed.  A traceback's frames and the source line under each (a
    Python ``File "…", line N`` frame, then its code), pytest's tracebacks (from
    a ``____ test ____`` heading to its captured output or the next ``===``
    line: the test's source, its ``>`` and ``E`` lines, its locations), ``>``
    and ``E`` lines anywhere, JavaScript stack frames (``at f (a.js:1:2)``), code
    frames (``> 12 | x``) and caret lines are quotes: an edit changes them by
    itself, so a change in them is no sign of what the edit did.  A test
    runner's progress line (``..F.s``) is left out too: parallel runs shuffle
    it, and the failing tests it shows are compared by name already; and so is
    a line that only labels what follows (it ends in a colon: ``STDERR output:``
    printed over an empty stderr is no output of its own)."""
    text = _scrubbed(_without_colours(clip(text, OUTCOME_CHARS)))
    lines = text.splitlines()
    quoted = _quoted_source(lines)
    digests = set()
    for index, raw in enumerate(lines):
        if index in quoted:
            continue
        line = " ".join(raw.split()).lower()
        if line and not line.endswith(":") and not _generic(line):
            digests.add(hash(line[:KEY_CHARS]))
            if len(digests) >= BODY_LINES:
                break
    return frozenset(digests)


def _lines(text: str) -> list[str]:
    return [line for line in (raw.strip() for raw in _without_colours(text).splitlines()) if line]


def _searches(call: Event | None) -> bool:
    """The call looks for something: a shell search, or a search tool (whose arguments
    may be a command line too: SWE-agent's ``find_file``, ``search_dir``)."""
    if call is None:
        return False
    command = shell_command(call)
    if command and _SEARCH_PROGRAM.search(command[:2000]) is not None:
        return True
    return bool(call.tool and _SEARCH_TOOL.search(call.tool))


def rejection(text: str) -> Outcome | None:
    """The harness refused the reply or the action (see the module's rules)."""
    clipped = clip(text, OUTCOME_CHARS)
    low = clipped.lower()
    if not _holds_a_rejection_word(low):
        return None
    found = _REJECTION.search(low)
    if found is None:
        return None
    # The refusal is what its first phrase says; what it quotes (the agent's
    # own input echoed back) and the details after it vary with each attempt
    # while the refusal stays.
    phrase = " ".join(found.group().split())
    if len(low) != len(clipped):
        clipped = low  # lower-casing moved the offsets (a few non-ASCII letters): quote it lower-cased
    start = clipped.rfind("\n", 0, found.start()) + 1
    end = clipped.find("\n", found.end())
    line = clipped[start : end if end >= 0 else len(clipped)].strip()
    # What the harness found wrong, when it names it by a checker's code
    # ("- E999 SyntaxError: unmatched ']'", "TS2322 …"), is part of the refusal:
    # a different error each time is a different refusal (fixing forward).
    found_wrong = list(dict.fromkeys(m.group().strip() for m in _DIAGNOSTIC.finditer(text, 0, OUTCOME_CHARS)))
    named = "|" + normalise(" ; ".join(found_wrong[:4])) if found_wrong else ""
    return Outcome(REJECTED, "J:" + phrase + named, line[:200])


def _holds_a_rejection_word(low: str) -> bool:
    """Whether the lower-cased ``low`` holds one of :data:`_REJECTION_WORDS` (by their pieces)."""
    for piece, words in _REJECTION_GROUPS:  # (loops, not any() over a generator: cheaper)
        if piece in low:
            for word in words:
                if word in low:
                    return True
    return False


def _empty(text: str, call: Event | None) -> Outcome | None:
    # What the text says first (a few word tests), whether the call searches
    # only for a text that says "nothing found" (a pattern over its command).
    if len(text) > 600 or ("\x1b" not in text and not _holds_any(text, _EMPTY_WORDS)):
        return None  # (colours could join a word)
    for line in _lines(text)[-TAIL_LINES:]:
        if _EMPTY.search(line):
            return Outcome(EMPTY, "N:" + normalise(line, query=True), line[:200]) if _searches(call) else None
    return None


#: Words one of :data:`_EMPTY`'s matches holds (lower case).
_EMPTY_WORDS = ("found", "match", "0 ")


def _holds_any(text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text``, lower-cased, holds one of ``words`` (lower case): a cheap test
    before a regex every match of which holds one of them."""
    low = text.lower()
    for word in words:
        if word in low:
            return True
    return False


def _ending_error(text: str) -> str | None:
    """The error line among the last lines of ``text``, if it ends in one."""
    # The last lines are in the last characters: the rest is not split.
    tail = text[-ENDING_CHARS:] if len(text) > ENDING_CHARS else text
    if "\x1b" not in tail and not _holds_any(tail, _ERROR_WORDS):
        return None  # no line of it can be an error line (most outputs); colours could join a word
    lines = without_status(_lines(tail))[-3 * TAIL_LINES :]
    telling = [line for line in lines if not _generic(line) and _NUMBERED.match(line) is None]
    for line in reversed(telling[-TAIL_LINES:]):
        if _error_line(line):
            return line
    return None


#: A line of a numbered listing of a file (SWE-agent's viewer "589:    raise …", ``cat -n``'s
#: "589<tab>…"): it quotes the file, it is no error the command met ("12:30:01 ERROR" is not one).
_NUMBERED = re.compile(r"\d+(?::(?!\d)|\t)")

#: Words a match of :data:`_ERROR_LINE` holds (lower case); of :data:`_GENERIC`.
_ERROR_WORDS = (
    "error", "exception", "fatal", "panic", "fail", "not found", "no such file", "permission denied",
    "cannot", "can't", "unexpected eof", "rejected",
)  # fmt: skip
_GENERIC_WORDS = ("exit", "non-zero", "returned", "error", "fatal", "fail", "<")


def _error_line(line: str) -> bool:
    """``_ERROR_LINE.search(line)``, after a cheap test for its words."""
    low = line.lower()
    for word in _ERROR_WORDS:
        if word in low:
            return _ERROR_LINE.search(line) is not None
    return False


#: What is left of a failure that names no cause once its generic parts are gone ("Error: rg command failed").
_BARE_FAILURE = re.compile(r"[\W\d_]*(?:error[\W\d_]*)?(?:(?:[\w.-]+\s+)?(?:command\s+)?failed[\W\d_]*)?")


def _only_that_it_failed(text: str) -> bool:
    """The tool's failure text says that it failed and nothing of why ("Error: ripgrep command
    failed: exit status 2"), so it is no outcome to compare."""
    return _BARE_FAILURE.fullmatch(_GENERIC.sub(" ", text.lower())) is not None


def _generic(line: str) -> bool:
    """``_GENERIC.search(line)``, after a cheap test for its words."""
    low = line.lower()
    for word in _GENERIC_WORDS:
        if word in low:
            return _GENERIC.search(line) is not None
    return False


def outcome_of(result: Event) -> Outcome | None:
    """What the round of tool result ``result`` ended in; ``None`` for a
    success (or a result that is not its call's own outcome)."""
    found = _outcome(result)
    if found is None or found.kind != FAILURE:
        # A refusal is judged by what it refuses, not the input it echoes; an
        # empty search by what it missed (and where): only a failure's lines are compared.
        return found
    return found._replace(body=body_lines(not_echoed(result.content, result.call)))


def _outcome(result: Event) -> Outcome | None:
    text = result.content
    call = result.call
    if not text.strip():
        # A search that printed nothing found nothing (grep piped into head exits 0).
        return (
            Outcome(EMPTY, "N:", "(nothing printed)")
            if _searches(call) and not not_an_outcome(result)
            else None
        )
    if not_an_outcome(result):
        return None
    if result.is_error and not failed(result):
        return None  # exit status 1 of a search or a comparison: "no", not a failure
    if is_test_run(call):
        run = run_outcome(result)
        if run.failing:
            return Outcome(FAILURE, f"T:{run.signature}:{run.failures}", run.headline or "tests failed")
        return None
    refused = rejection(text)
    if refused is not None:
        return refused
    empty = _empty(text, call)
    if empty is not None:
        return empty
    known = comparable_failure(result)
    if known is not None:
        # The tool said it failed: what its telling error line says (a
        # failure that says only "exit code 1" has none, and is no outcome).
        shown = known[2:] if known[:2] in ("E:", "R:") else known
        if _only_that_it_failed(shown):
            return None  # "ripgrep command failed: exit status 2" says that, not what: no outcome
        return Outcome(FAILURE, "F:" + normalise(shown), shown[:200])
    line = _ending_error(text)
    if line is None and len(text) <= MISSING_CHARS and _MISSING.search(text):
        line = " ".join(text.split())
    if line is not None:
        return Outcome(FAILURE, "F:" + normalise(line), line[:200])
    return None


#: A line that names an error and says what it is, as a person pastes it from a
#: log or a console: ``TypeError: …``, ``error: …``, ``Backend error: {…}``,
#: ``Type error: Cannot find name …`` (a word or two before "error", then a
#: colon or "!", then at least a few words).  Not a heading ("Error handling"),
#: not a header that only says that it failed ("Failed to compile").
_QUOTED_ERROR = re.compile(
    r"^\W{0,3}(?:[\w.]*(?:Error|Exception)|(?:[\w.-]+ ){0,2}(?i:error|exception))\s*[:!]\s*\S.{7,}"
)
#: The lines of a message that are read for the errors it quotes (its first lines).
QUOTED_LINES = 60


def quoted_errors(text: str) -> frozenset[str]:
    """The error lines a person quotes in ``text`` (:data:`_QUOTED_ERROR`),
    normalised as :func:`normalise` does: the same error pasted again with
    other words around it ("still the same: …", another log line before it)
    is the same complaint."""
    clipped = clip(text, OUTCOME_CHARS)
    low = clipped.lower()
    if "error" not in low and "exception" not in low:
        return frozenset()
    return frozenset(
        normalise(line) for line in _lines(clipped)[:QUOTED_LINES] if _QUOTED_ERROR.match(line) is not None
    )


def answer_of(result: Event) -> Outcome | None:
    """A success that says something (not an acknowledgement, not a few words):
    its whole text is its key, so that the same answer from
    different questions ("006da4c chore(release): …" from five ``git log``
    spellings) is recognised -- without what it quotes of the call's own
    arguments (:func:`without_echo`).  ``None`` for a failure or a bare "done"."""
    if result.is_error or is_acknowledgement(result):
        return None
    # The text itself, its ends' white space aside: a page, a count or a
    # line number is what the answer says (and a digest of the clipped text
    # costs microseconds where normalising it costs a fraction of a millisecond).
    text = without_echo(clip(result.content).strip(), result.call)
    if len(text) < MIN_ANSWER_CHARS:
        return None
    # A stable digest, not hash(): the pattern is printed and stored, and must
    # be the same in every process (hash() of a str is seeded per process).
    return Outcome(ANSWER, f"A:{digest(text)}", text.split("\n", 1)[0][:200])


#: Arguments longer than this are content (a file, a script), not a query a result quotes.
MAX_ECHO_CHARS = 500


def without_echo(text: str, call: Event | None) -> str:
    """``text`` with the argument of its own call that its first line quotes as "…"
    ("Web search results for query: \"…\""): a tool answering every question
    with the same words around the question quoted back says the same thing each
    time.  Only a quoted argument in the first line (a header) is an echo: a search's
    matches hold what it looked for, and are its answer."""
    if call is None or not call.args:
        return text
    first, newline, rest = text.partition("\n")
    for value in call.args.values():
        if isinstance(value, str) and MIN_ECHO_CHARS <= len(value) <= MAX_ECHO_CHARS and value in first:
            for quote in ('"', "'", "`"):
                first = first.replace(f"{quote}{value}{quote}", f"{quote}…{quote}")
    return first + newline + rest


def reply_outcome(message: Event) -> Outcome | None:
    """What a message from the harness says about the round before it: a
    refusal ("No tool calls found…", a format error) in a user-role message
    (harnesses that speak as the user) or a system one, and a harness error
    in a system message (aider's "litellm.NotFoundError: …", "has hit a
    token limit!") are that round's outcome; anything else a person or a
    harness says is not (``None``)."""
    role = message.role
    text = message.content
    if role not in ("user", "system") or not text:
        return None
    refused = rejection(text)
    if refused is not None or role == "user":
        return refused
    line = _ending_error(text)
    return None if line is None else Outcome(FAILURE, "F:" + normalise(line), line[:200])
