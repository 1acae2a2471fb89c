"""Text normalization shared by detectors, formats and the store.

Everything here is pure and bounded: long texts are clipped before any
expensive work so that a 1 MB tool result costs no more than a short one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

#: How much of a text the similarity detectors look at.  Loops show in the
#: head and tail of an output; the middle of a 1 MB result adds cost, not signal.
SIMILARITY_CHARS = 2000

#: Argument keys that identify a call instance, not what it does.
VOLATILE_KEYS = frozenset(
    {"id", "call_id", "tool_use_id", "request_id", "timestamp", "ts", "time", "nonce", "uuid"}
)

_WS = re.compile(r"\s+")
#: Serialized arguments that contain white space worth squashing.
_NEEDS_SQUASH = re.compile(rb"\s\s|\\[ntr]|\"\s|\s\"")
# :func:`_needs_squash` is the same test as substrings of the decoded text:
# in orjson's output the only raw white space is the space (tabs, newlines
# and other control characters are escaped), so ``_NEEDS_SQUASH`` matches
# exactly when one of ``"  "``, ``'" '``, ``' "'``, ``"\\n"``, ``"\\t"``,
# ``"\\r"`` occurs -- and a few ``str`` substring tests cost a fraction of
# one regex search (``in`` on ``bytes`` is slow too: it goes through the
# buffer protocol).


def _needs_squash(text: str) -> bool:
    """``_NEEDS_SQUASH.search`` on orjson output, given as decoded text (the
    escapes are looked for only when it holds a backslash)."""
    if "  " in text or '" ' in text or ' "' in text:
        return True
    return "\\" in text and ("\\n" in text or "\\t" in text or "\\r" in text)


_DROP_DIGITS = str.maketrans("", "", "0123456789")
_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def byte_classes(classes: dict[str, str]) -> bytes:
    """A ``bytes.translate`` table marking each ASCII character of a class
    (the keys' characters) by its mark, every other byte by ".": a text's
    classes are then found with ``in`` at C speed."""
    table = bytearray(b"." * 256)
    for chars, mark in classes.items():
        for char in chars:
            table[ord(char)] = ord(mark)
    return bytes(table)


def squash_ws(text: str) -> str:
    """Collapse runs of white space to one space and strip the ends."""
    return " ".join(text.split())


def squashed(text: str) -> str:
    """:func:`squash_ws` of ``text``, which is ``text`` itself when it holds no
    white space but single spaces between words (most prose): then no copy."""
    # Printable text holds no white space but " ".
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return squash_ws(text)


def clip(text: str, limit: int = SIMILARITY_CHARS) -> str:
    """Head and tail of ``text`` within ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + text[-half:]


# -- one normaliser, a rule set per purpose -------------------------------------------------------
#
# :func:`normalize` strips what changes between identical outcomes by a
# :class:`Profile`'s rules.  A rule's regex costs about as much per character
# whether it matches or not, so each rule says when it may match at all: a
# telltale in the text or in one of two character-class views of it, made
# of an ASCII text with C-speed ``bytes.translate`` (``d`` digit, ``s`` white
# space, ``u`` a unit's first letter, ``-``, ``:``, ``%`` themselves; ``h``
# a hex digit, and ``-``).  A substitution cannot create a telltale where there was
# none: a match is digits, hex letters, separators and units, and the
# placeholders are fenced by "<" and ">".  The views are decoded back to
# ``str``: ``in`` on ``bytes`` first tries its operand as an integer.

_CLASSES = byte_classes(
    {"0123456789": "d", " \t\n\r\f\v\x1c\x1d\x1e\x1f": "s", "msun": "u", "-": "-", ":": ":", "%": "%"}
)
_HEX_CLASSES = byte_classes({"0123456789abcdefABCDEF": "h", "-": "-"})


class Views:
    """The text being normalized (``text``), the text as given (``given``) and,
    for ASCII text, its character-class views (``classes``, ``hexes``)."""

    __slots__ = ("text", "given", "ascii", "classes", "hexes")

    def __init__(self, text: str):
        self.text = self.given = text
        self.ascii = text.isascii()
        if self.ascii:
            raw = text.encode("ascii")
            self.classes = raw.translate(_CLASSES).decode("ascii")
            self.hexes = raw.translate(_HEX_CLASSES).decode("ascii")
        else:  # \d and \s match more than ASCII digits and spaces: no views
            self.classes = self.hexes = ""

    def long_hex(self) -> bool:
        """Whether the given text may hold a run of 12 hex digits."""
        return not self.ascii or "h" * 12 in self.hexes


@dataclass(frozen=True, slots=True)
class Rule:
    """Replace ``pattern`` by ``replacement`` where ``may_match`` says it may match."""

    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]
    may_match: Callable[[Views], bool]


@dataclass(frozen=True, slots=True)
class Profile:
    """A rule set of :func:`normalize`, named for what it is for.

    ``gate`` says whether any rule may match at all (asked once, of the text
    as given); ``clips``: the text is clipped to the limit (head and tail)
    first and its white space squashed at the end; otherwise it is squashed
    and cut to the limit at the end (a limit of 0 keeps its lines)."""

    name: str
    rules: tuple[Rule, ...]
    gate: Callable[[Views], bool]
    clips: bool


def normalize(text: str, profile: Profile, limit: int) -> str:
    """``text`` without what changes between identical outcomes, by ``profile``'s
    rules, bounded by ``limit`` (see :class:`Profile`)."""
    if profile.clips:
        text = clip(text, limit)
    views = Views(text)
    if profile.gate(views):
        for rule in profile.rules:
            if rule.may_match(views):
                views.text = rule.pattern.sub(rule.replacement, views.text)
    if profile.clips:
        return squash_ws(views.text)
    return squash_ws(views.text)[:limit] if limit else views.text


def _classes(*telltales: str) -> Callable[[Views], bool]:
    """A rule's ``may_match``: one of ``telltales`` is in the class view (non-ASCII: always)."""
    return lambda views: not views.ascii or any(telltale in views.classes for telltale in telltales)


def _always(views: Views) -> bool:
    return True


#: Tool results compared with each other ("the same result again?", "did
#: anything move?"): timestamps, clock times, UUIDs, addresses, long hex ids
#: and durations go; counts stay ("5 failed" then "3 failed" is progress).
RESULT_TEXT = Profile(
    "result text",
    (
        # ISO timestamps and clock times
        Rule(
            re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"),
            "<ts>",
            _classes("dddd-dd-dd"),
        ),
        Rule(re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b"), "<time>", _classes("d:dd:dd")),
        # UUIDs and long hex (object addresses, hashes, request ids)
        Rule(
            re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
            "<uuid>",
            lambda views: not views.ascii or "hhhhhhhh-hhhh-" in views.hexes,
        ),
        Rule(
            re.compile(r"\b0x[0-9a-f]+\b", re.I),
            "<addr>",
            lambda views: not views.ascii or "0x" in views.given or "0X" in views.given,
        ),
        Rule(re.compile(r"\b[0-9a-f]{12,}\b", re.I), "<hex>", Views.long_hex),
        # durations: 1.23s, 150ms, 2 seconds.  ``\b\d+`` written as a digit not
        # after a word character, so that the regex may skip ahead to a digit.
        Rule(
            re.compile(r"\d(?<!\w\d)\d*(\.\d+)?\s?(ms|s|sec|secs|seconds|us|µs|ns|m|min|minutes)\b"),
            "<dur>",
            _classes("du", "dsu"),
        ),
    ),
    _always,
    clips=True,
)

_NUMERIC_NOISE = re.compile(
    # One pass over the text for everything that starts with a digit: the shared
    # leading digit is matched once, so the regex engine skips to digits
    # (``\d{4}`` is ``\d`` + ``\d{3}``, ``0x`` is ``\d`` + ``(?<=0)x``, …).
    r"\d(?:(?P<ts>\d{3}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<time>\d?:\d{2}:\d{2}(?:\.\d+)?\b)"
    r"|(?P<addr>(?<=0)x[0-9a-fA-F]+\b)"
    r"|(?P<dur>\d*+(?:\.\d++)?+\s?+(?:ms|s|sec|secs|seconds|us|µs|ns|min|minutes)\b)"
    r"|(?P<pct>\d*+(?:\.\d++)?+\s?+%))"
)
_HAS_DIGIT = re.compile(r"\d")
#: The line numbers of file:line references (they move with every edit).
#: ``(?<=[A-Za-z]):\d+`` with the literal first: a literal search, not the
#: lookbehind tried at every position.
LINE_REF = re.compile(r":(?<=[A-Za-z]:)\d+(?::\d+)?")


def _numeric(match: re.Match[str]) -> str:
    return f"<{match.lastgroup}>"


def _failure_noise(views: Views) -> bool:
    """Whether a failure's text may hold noise: every kind has a digit in it,
    and most digits are no noise ("assert 21 == 0"): each other kind needs a
    time "d:", a duration or percentage "du", "d%" (maybe with a space
    between), "a:d" of a file:line, "0x", "seed" or "line "."""
    if not views.ascii:
        return _HAS_DIGIT.search(views.given) is not None
    marks = views.classes
    if "d" not in marks:
        return False
    if views.long_hex():
        return True
    return (
        any(telltale in marks for telltale in ("du", "d%", "d:", ":d", "dsu", "ds%"))
        or "0x" in views.given
        or "seed" in views.given
        or "line " in views.given
    )


def _in_text(hint: str) -> Callable[[Views], bool]:
    """A rule's ``may_match``: ``hint`` is in the text as it is now."""
    return lambda views: hint in views.text


#: A test run's error lines and failure text, for a signature that stays put
#: while the same tests fail the same way: timestamps, clock times,
#: addresses, durations and percentages, long hex ids, seeds, "line N" and
#: file:line numbers go.  Only text with a digit in it is touched.
FAILURE_TEXT = Profile(
    "failure text",
    (
        Rule(_NUMERIC_NOISE, _numeric, _always),
        # (No replacement of the numeric noise holds or joins hex runs.)
        Rule(re.compile(r"\b[0-9a-fA-F]{12,}\b"), "<hex>", Views.long_hex),
        Rule(re.compile(r"seed:? ?\d+"), "seed <n>", _in_text("seed")),
        Rule(re.compile(r"line \d+"), "line <n>", _in_text("line ")),
        Rule(LINE_REF, ":<n>", _in_text(":")),
    ),
    _failure_noise,
    clips=False,
)


def _canonical(value: Any, depth: int = 0, squash: bool = True) -> Any:
    """``value`` with sorted keys, ids and times dropped, each text clipped (and its
    white space squashed unless ``squash`` is False: :func:`sent_hash`)."""
    if depth > 8:
        return "…"
    if isinstance(value, dict):
        return {
            str(k): _canonical(v, depth + 1, squash)
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
            if str(k) not in VOLATILE_KEYS
        }
    if isinstance(value, (list, tuple)):
        return [_canonical(v, depth + 1, squash) for v in value]
    if isinstance(value, str):
        clipped = clip(value, 4000)
        return squash_ws(clipped) if squash else clipped
    return value


#: Serialized arguments this long are canonicalized the careful way.
_FAST_ARGS_BYTES = 8000
_PLAIN = (int, float, bool, type(None))


def _surely_long(args: dict[str, Any]) -> bool:
    """True when ``orjson.dumps(args)`` would certainly succeed and be too
    long for the fast path of :func:`canonical_args`: string keys, plain
    values, ASCII strings (no lone surrogates to make it fail; ``isascii`` is
    a flag test), one of them at least ``_FAST_ARGS_BYTES`` long.  Dumping a
    1 MB command only to throw the result away costs over a millisecond."""
    long = False
    for key, value in args.items():
        if key.__class__ is not str:
            return False
        if value.__class__ is str:
            if not value.isascii():
                return False
            if len(value) >= _FAST_ARGS_BYTES:
                long = True
        elif not isinstance(value, _PLAIN):
            return False
    return long


def canonical_args(args: dict[str, Any] | None) -> str:
    """A stable string for a call's arguments: sorted keys, white space
    normalized, call ids and timestamps dropped."""
    return _canonical_text(args)[0]


def _canonical_text(args: dict[str, Any] | None) -> tuple[str, bool]:
    """:func:`canonical_args`, and whether the arguments had to be rewritten:
    not when it is their JSON as they are, sorted keys (most calls)."""
    try:
        if not args:
            return "{}", False
        if VOLATILE_KEYS.isdisjoint(args):
            # _surely_long() asked only when a value is long (a few calls in a
            # session), _needs_squash() only when the text has a space or an
            # escape: this runs for every call.
            for value in args.values():
                if value.__class__ is str and len(value) >= _FAST_ARGS_BYTES and _surely_long(args):
                    break
            else:
                raw = orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
                if len(raw) < _FAST_ARGS_BYTES:
                    text = raw.decode()
                    if (" " not in text and "\\" not in text) or not _needs_squash(text):
                        return text, False
        return _rewritten_args(args), True
    except (TypeError, orjson.JSONEncodeError):
        return repr(_canonical(args)), True


def _rewritten_args(args: dict[str, Any]) -> str:
    return orjson.dumps(_canonical(args), option=orjson.OPT_SORT_KEYS).decode()


class Items(Protocol):
    """Arguments as ``compact_args`` reads them: a dict, or key-value pairs with ``items()``."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


def compact_args(args: Items | None, width: int = 60) -> str:
    """A short human rendering of arguments for summaries."""
    if not args:
        return ""
    parts = []
    for key, value in args.items():
        if isinstance(value, str):
            shown = value
        else:
            try:
                shown = orjson.dumps(value, default=str).decode()
            except TypeError:  # an int past 64 bits, deep inside a structure
                shown = repr(value)
        # Bound before squashing: a 200 KB argument must not cost a 200 KB pass.
        parts.append(f"{key}={squash_ws(str(shown)[: width * 8])[:width]}")
    text = ", ".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def tokens(text: str) -> frozenset[str]:
    """Lower-cased white-space tokens, as in the Jaccard design note."""
    return frozenset(clip(text).lower().split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 0 when either is empty."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def call_key(event: Any) -> str:
    """``tool:canonical args`` of a tool call, memoized on the event.  When
    the arguments had to be rewritten (``_canonical_text`` says so), the
    event's facts say so too (``args_rewritten``): a short key of arguments
    kept as they are proves them small (``EventRef`` relies on it)."""
    facts = event.facts
    key = facts.call_key
    if key is None:
        text, rewritten = _canonical_text(event.args)
        if rewritten:
            facts.args_rewritten = True
        key = facts.call_key = f"{event.tool}:{text}"
    return key


def sent_hash(event: Any) -> int:
    """The hash of a call's arguments as sent, white space kept (ids and times left
    out): the hash of its :func:`call_key` when the key holds them as they are.  Two
    edits whose lines are indented differently share a key, not this."""
    key = call_key(event)
    if not event.facts.args_rewritten:
        return hash(key)
    # Bounded as the key is (each text clipped): a megabyte heredoc is not dumped whole.
    kept = _canonical(event.args or {}, squash=False)
    try:
        return hash(orjson.dumps(kept, option=orjson.OPT_SORT_KEYS))
    except (TypeError, orjson.JSONEncodeError):
        return hash(repr(kept))


def known_call_key(event: Any) -> str | None:
    """:func:`call_key` if something has asked for it already, else ``None``."""
    key: str | None = event.facts.call_key
    return key


def result_key(event: Any) -> str:
    """What a tool result said, for "did anything move?" checks: timestamps,
    durations and ids removed, but counts kept — "5 failed" then "3 failed"
    is progress, and so is a poll whose percentage climbs."""
    key = event.facts.result_key
    if key is None:
        prefix = "E:" if event.is_error else "R:"
        key = event.facts.result_key = prefix + normalize(event.content, RESULT_TEXT, SIMILARITY_CHARS)
    return key


def outcome_key(event: Any) -> str:
    """The kind of outcome of a tool result, for "same error again" checks:
    like :func:`result_key` with every counter removed too (line numbers in a
    traceback, pids, retry counts)."""
    key = event.facts.outcome_key
    if key is None:
        # Dropping every digit takes timestamps, durations and counters in
        # one C-speed pass; hex addresses need the regex only when present.
        text = clip(event.content)
        if "0x" in text:
            text = _HEX_ADDRESS.sub("<addr>", text)
        text = " ".join(text.translate(_DROP_DIGITS).split())
        key = event.facts.outcome_key = ("E:" if event.is_error else "R:") + text
    return key


# -- showing untrusted text on a terminal ---------------------------------------------------------

#: Bidirectional overrides, embeddings, isolates and marks: they reorder what a
#: terminal shows (``U+202E`` makes ``txt.exe`` of ``exe.txt``).
BIDI_CONTROLS = (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _picture(code: int) -> str:
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␛ for ESC)
    if code == 0x7F:
        return "␡"
    if code < 0xA0:
        return f"\\x{code:02x}"  # C1 controls (0x9b is CSI to some terminals)
    return f"\\u{code:04x}"  # bidi controls


#: Every C0/C1 control character, DEL and bidi control to a visible picture.
CONTROL_PICTURES = {code: _picture(code) for code in [*range(0x20), 0x7F, *range(0x80, 0xA0), *BIDI_CONTROLS]}
#: Text of many lines: newlines and tabs kept.
_PRINTABLE = {code: shown for code, shown in CONTROL_PICTURES.items() if code not in (0x0A, 0x09)}
#: JSON already escapes C0; the rest become ``\uXXXX`` escapes (the parsed value is unchanged).
_JSON_SAFE = {code: f"\\u{code:04x}" for code in [0x7F, *range(0x80, 0xA0), *BIDI_CONTROLS]}


def printable(text: Any) -> str:
    """``text`` safe to write to a terminal: every control character but newline and
    tab, and every bidi control, shown as a picture (ESC as ``␛``, U+202E as ``\\u202e``).
    What every text output of the CLI goes through (:class:`PrintableStream`)."""
    return str(text if text is not None else "").translate(_PRINTABLE)


def json_printable(text: str) -> str:
    """JSON text (controls in it already escaped by the encoder) with DEL, C1 and
    bidi controls escaped too, so a terminal showing it is not steered: the
    same JSON values, other bytes only where such a character was."""
    return text.translate(_JSON_SAFE)


class PrintableStream:
    """A text stream that writes everything through :func:`printable` (or, with
    ``as_json``, :func:`json_printable`); anything else goes to the stream it wraps.
    ``unescaped`` is the wrapped stream, for the few writers of terminal codes of
    our own (the scan's progress bar)."""

    def __init__(self, stream: Any, *, as_json: bool = False):
        self.unescaped = stream
        self._shown = json_printable if as_json else printable

    def write(self, text: str) -> int:
        self.unescaped.write(self._shown(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unescaped, name)
