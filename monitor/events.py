"""The normalized event model every source, format and detector shares.

An :class:`Event` is one thing an agent did or said, already translated from
whatever format it arrived in (native JSONL, a Claude Code transcript, a Codex
rollout, a socket).  Detectors only ever see these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum, StrEnum
from typing import Any, Literal

from orjson import dumps as _dumps


class Kind(StrEnum):
    """The event types of the native format."""

    SESSION_START = "session_start"
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    COMPACTION = "compaction"
    SESSION_END = "session_end"
    #: The agent waits for the person: a permission prompt, a question, an
    #: elicitation (``content``: what it asks; ``status``: why, or
    #: ``"resolved"`` when the wait is over).  No detector sees it.
    WAITING = "waiting"


KINDS: frozenset[str] = frozenset(k.value for k in Kind)

# The members as module constants, for hot paths: ``Kind.TOOL_CALL`` goes
# through ``EnumType.__getattr__`` on every access, and a decoder or detector
# tests the kind per event.
SESSION_START = Kind.SESSION_START
MESSAGE = Kind.MESSAGE
TOOL_CALL = Kind.TOOL_CALL
TOOL_RESULT = Kind.TOOL_RESULT
USAGE = Kind.USAGE
COMPACTION = Kind.COMPACTION
SESSION_END = Kind.SESSION_END
WAITING = Kind.WAITING


class Level(IntEnum):
    """Escalation levels, ordered so that ``max()`` picks the most severe."""

    NONE = 0
    NOTICE = 1
    WARN = 2
    CRITICAL = 3
    TERMINATE = 4

    @property
    def label(self) -> str:
        return "watching" if self is Level.NONE else self.name.lower()

    @classmethod
    def parse(cls, value: str | int | Level) -> Level:
        if isinstance(value, Level):
            return value
        if isinstance(value, int):
            return cls(value)
        text = str(value).strip().lower()
        if text in ("watching", "none", "ok"):
            return cls.NONE
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(
                f"unknown level {value!r} (expected notice, warn, critical or terminate)"
            ) from None


class _Unknown(Enum):
    UNKNOWN = 0


#: "Not worked out yet", for a fact whose value may be ``None``.
UNKNOWN: Literal[_Unknown.UNKNOWN] = _Unknown.UNKNOWN


class Facts:
    """What the pipeline has worked out about one event, each fact at most once.

    One per event (``Event.facts``), typed, every fact at its class default
    until it is first asked for.  Each fact has one owner that computes and
    reads it (tests/test_facts.py checks that no other module touches it):

    * ``call_key``, ``args_rewritten``, ``result_key``, ``outcome_key``:
      :mod:`monitor.text`'s keys;
    * everything else: its module in :mod:`monitor.detect.analysis`
      (``failures``, ``signatures``, ``calls``, ``waits``, ``progress``), which the
      detectors ask (``failed(result)``, ``call_record(call)``…); the
      engine's enrichment stage marks waits and attaches results first.

    Loops repeat their calls and outputs, and a dozen detectors look at
    each: working a fact out once per event is the saving."""

    call_key: str | None = None
    #: ``call_key`` had to rewrite the arguments (a short key then proves nothing).
    args_rewritten: bool = False
    result_key: str | None = None
    outcome_key: str | None = None
    #: The event's evidence reference (monitor.detect.base.ref).
    ref: EventRef | None = None
    #: A call's record (monitor.detect.analysis.calls.CallRecord).
    record: Any = None
    #: The command line a shell-like call runs (``None``: none).
    shell_command: str | None | Literal[_Unknown.UNKNOWN] = UNKNOWN
    is_test_run: bool | None = None
    #: A result is a failure (``failures.failed``).
    failed: bool | None = None
    failure_kind: str | None = None
    #: What a failed result's telling line names (``progress.failure_names``).
    failure_names: frozenset[str] | None = None
    run_outcome: Any = None
    #: A result's failure signature ("" for none), and its comparable failure.
    failure_signature: str | None = None
    comparable_failure: str | None | Literal[_Unknown.UNKNOWN] = UNKNOWN
    fingerprint: str | None = None
    primary_args: dict[str, Any] | None = None
    ack: bool | None = None
    not_an_outcome: bool | None = None
    #: A call made after a wait: the seconds waited (or True for a call that only waits).
    waited: float | bool | None = None
    wait_only: bool | None = None
    #: A call's sparkline bar, until its result draws the step's (monitor.detect.engine).
    spark: Any = None

    def __repr__(self) -> str:
        known = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        return f"Facts({known})"


@dataclass(slots=True)
class Event:
    """One normalized agent event.

    ``source`` and ``line`` say where it came from (a file path and its 1-based
    line, or ``socket:<peer>`` and the line on that connection) so that every
    detection can point back at the record that triggered it.
    """

    kind: Kind
    session: str
    ts: float
    source: str = ""
    line: int | None = None
    agent: str | None = None
    role: str | None = None
    content: str = ""
    call_id: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    is_error: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    status: str | None = None
    pid: int | None = None
    parent: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # Filled in by the engine: position in the session, and for a tool result
    # the call it answers (so detectors can reason about call + result).
    seq: int = 0
    call: Event | None = None
    #: What the pipeline works out about the event, once (see :class:`Facts`).
    facts: Facts = field(default_factory=Facts, repr=False, compare=False)

    @property
    def where(self) -> str:
        """``file:line`` (or just the source) for messages."""
        if self.line is None:
            return self.source
        return f"{self.source}:{self.line}"

    def summary(self, width: int = 80) -> str:
        """A one-line human description, bounded to ``width`` characters."""
        return _finish(self._summary_text(width), width)

    def _summary_text(self, width: int) -> str:
        """What :meth:`summary` shortens and puts on one line."""
        if self.kind is TOOL_CALL:
            from monitor.text import compact_args

            return f"{self.tool}({compact_args(self.args)})"
        if self.kind is TOOL_RESULT:
            prefix = "error" if self.is_error else "result"
            return f"{prefix}: {self.content[: width * 8]}"
        if self.kind is MESSAGE:
            return f"{self.role}: {self.content[: width * 8]}"
        if self.kind is USAGE:
            return f"usage in={self.input_tokens} out={self.output_tokens} cost={self.cost_usd}"
        if self.kind is SESSION_START:
            return f"session start ({self.agent or 'agent'})"
        if self.kind is SESSION_END:
            return f"session end ({self.status or 'ended'})"
        if self.kind is WAITING:
            return f"waiting for input ({self.status or 'input'}): {self.content[: width * 8]}"
        return self.kind.value


def _finish(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters."""
    # Bound the work before normalizing: a 1 MB message must not cost a
    # 1 MB copy or split.
    text = " ".join(text[: width * 8 + 64].split())
    return text if len(text) <= width else text[: width - 1] + "…"


_new = object.__new__


#: ``Event.summary()``'s default width, which ``EventRef.summary`` has.
SUMMARY_WIDTH = 80
#: Characters of a text (or of an argument's value) that an EventRef keeps
#: when they surely hold all its summary shows (see ``_head``).
_HEAD = 128
_ARG_HEAD = 100
#: Width of one argument's value and of all of them in ``compact_args``.
_ARG_WIDTH = 60
#: A call key (``tool:`` and the arguments' JSON) this short, of arguments
#: kept as they are, proves them small enough to keep whole.
_SMALL_CALL_KEY = 256
_KIND_VALUE: dict[Kind, str] = {k: k.value for k in Kind}
_CALL_KIND = TOOL_CALL.value

#: What a reference keeps of a call to write its summary later:
#: ``(tool, key, ..., value, ...)`` (see :func:`call_snapshot`).
CallSnapshot = tuple[Any, ...]


class EventRef:
    """A pointer to an event used as evidence in a detection: ``seq``,
    ``kind`` (the type's name), ``source``, ``line`` and ``summary`` (the
    event's :meth:`Event.summary`).

    Detectors keep these in their windows instead of events, one per event,
    so :meth:`of` must be cheap and small: it keeps a bounded snapshot of
    what the summary shows (the start of a text, a call's tool and the
    start of each argument that can show), never the event, and writes the
    summary only when it is first read -- the same text ``Event.summary()``
    gives.  Refs compare and hash by their five values; treat them as
    immutable.
    """

    __slots__ = ("seq", "kind", "source", "line", "_summary", "_raw")
    __match_args__ = ("seq", "kind", "source", "line", "summary")

    seq: int
    kind: str
    source: str
    line: int | None
    #: The summary once written; until then ``_raw`` holds what it is made of.
    _summary: str | None
    _raw: str | CallSnapshot | None

    def __init__(self, seq: int, kind: str, source: str, line: int | None, summary: str | None):
        self.seq = seq
        self.kind = kind
        self.source = source
        self.line = line
        self._summary = summary
        self._raw = None

    @classmethod
    def of(cls, event: Event) -> EventRef:
        """The reference to ``event``.  Runs once per event in several
        detectors: ordinary events take the flat path below."""
        ref = _new(cls)
        ref.seq = event.seq
        kind = event.kind
        ref.kind = _KIND_VALUE[kind] if kind.__class__ is Kind else kind.value
        ref.source = event.source
        ref.line = event.line
        ref._summary = None
        if kind is TOOL_RESULT or kind is MESSAGE:
            content = event.content
            prefix: str | None
            if kind is TOOL_RESULT:
                prefix = "error: " if event.is_error else "result: "
            else:
                role = event.role
                prefix = f"{role}: " if role is None or (role.__class__ is str and len(role) <= 64) else None
            if prefix is not None and content.__class__ is str:
                head = _head(content, _HEAD, SUMMARY_WIDTH)
                if head is not None:
                    ref._raw = prefix + head
                    return ref
        elif kind is TOOL_CALL:
            snapshot = call_snapshot(event)
            if snapshot is not None:
                ref._raw = snapshot
                return ref
        # Anything else (usage, session start and end, text full of white
        # space, odd field types): the summary now.
        ref._summary = event.summary(SUMMARY_WIDTH)
        ref._raw = None
        return ref

    @classmethod
    def of_call(cls, seq: int, source: str, line: int | None, snapshot: CallSnapshot) -> EventRef:
        """The reference to a call from its :func:`call_snapshot` (what a
        call's record keeps: it makes the reference only when it is cited)."""
        ref = cls(seq, _CALL_KIND, source, line, None)
        ref._raw = snapshot
        return ref

    @property
    def summary(self) -> str:
        summary = self._summary
        if summary is None:
            raw = self._raw
            if isinstance(raw, tuple):
                raw = _call_text(raw)
            assert raw is not None  # (one of _summary and _raw is always set)
            summary = self._summary = _finish(raw, SUMMARY_WIDTH)
            self._raw = None
        return summary

    def _key(self) -> tuple[int, str, str, int | None, str]:
        return (self.seq, self.kind, self.source, self.line, self.summary)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not EventRef:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"EventRef(seq={self.seq!r}, kind={self.kind!r}, source={self.source!r}, "
            f"line={self.line!r}, summary={self.summary!r})"
        )

    def __reduce__(self) -> tuple[type[EventRef], tuple[int, str, str, int | None, str]]:
        return (EventRef, self._key())

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "file": self.source,
            "line": self.line,
            "summary": self.summary,
        }


def _head(text: str, keep: int, shown: int) -> str | None:
    """A prefix of ``text`` that gives the same first ``shown`` characters
    once white space is collapsed (``" ".join(t.split())``), and shows that
    there are more: ``text`` itself when it is at most ``keep`` long, else
    ``text[:keep]`` when its characters other than white space are more
    than ``shown``; None when neither holds (text full of white space: the
    caller writes the summary at once rather than keep a long copy).  Every
    white space character but " " is unprintable, so a printable head
    (newlines made spaces) counts its spaces alone."""
    if len(text) <= keep:
        return text
    head = text[:keep]
    if "\n" in head:
        head = head.replace("\n", " ")
    if head.isprintable() and keep - head.count(" ") > shown:
        return head
    return None


class _Pairs(tuple[tuple[str, Any], ...]):
    """Key-value pairs that ``compact_args`` reads like a dict's items."""

    __slots__ = ()

    def items(self) -> _Pairs:
        return self


def _call_text(snapshot: CallSnapshot) -> str:
    """A call's summary text from a snapshot ``(tool, key, ..., value,
    ...)`` (the keys, then their values), as ``Event._summary_text`` writes it."""
    from monitor.text import compact_args

    half = len(snapshot) // 2
    pairs = _Pairs(zip(snapshot[1 : half + 1], snapshot[half + 1 :]))
    return f"{snapshot[0]}({compact_args(pairs)})"


def call_snapshot(event: Event) -> CallSnapshot | None:
    """What a reference to the call ``event`` keeps to write its summary
    later, bounded: ``(tool, key, ..., value, ...)``; None when the summary
    must be written at once."""
    facts = event.facts
    key = facts.call_key
    args = event.args
    if key is not None and len(key) <= _SMALL_CALL_KEY and not facts.args_rewritten:
        # Its arguments' JSON is the short key (monitor.text.call_key): they
        # are small, keep them as they are (the summary from them is the
        # event's by construction).
        if not args:
            return (event.tool,)
        if len(args) == 1:
            for name in args:  # the one argument (most calls): no unpacking into a list
                return (event.tool, name, args[name])
        return (event.tool, *args, *args.values())
    return _call_snapshot(event.tool, args)


def _call_snapshot(tool: Any, args: Any) -> CallSnapshot | None:
    """``(tool, key, ..., value, ...)``: what ``compact_args`` can show of
    ``args``, bounded -- the arguments until their text is surely past its
    width, each value as the text it shows (a long one cut by ``_head``, a
    number as its JSON).  None when something is unusual, e.g. a structure
    (then the caller writes the text at once)."""
    if tool.__class__ is not str:
        if tool is not None:
            return None
    elif len(tool) > SUMMARY_WIDTH * 9:
        tool = tool[: SUMMARY_WIDTH * 9]
    if not args:
        return (tool,) if args is None or args.__class__ is dict else None
    if args.__class__ is not dict:
        return None
    keys = []
    values = []
    # A lower bound of the length of "k=v, k=v": once past the width, later
    # arguments cannot show.
    length = -2
    for key, value in args.items():
        if length > _ARG_WIDTH:
            break
        if key.__class__ is not str:
            return None
        if len(key) > _ARG_WIDTH + 4:
            key = key[: _ARG_WIDTH + 4]
        length += len(key) + 3
        cls = value.__class__
        if cls is not str:
            if value is not None and cls is not int and cls is not float and cls is not bool:
                # A structure or a str subclass: its JSON collapses white
                # space in ways a bounded head cannot promise; write it now.
                return None
            try:
                value = _dumps(value).decode()
            except (TypeError, ValueError):
                return None  # an int past 64 bits: as the summary has it
        shown = _head(value, _ARG_HEAD, _ARG_WIDTH)
        if shown is None:
            return None
        if shown is not value:
            length += _ARG_WIDTH  # a head that surely fills the value's width
        keys.append(key)
        values.append(shown)
    return (tool, *keys, *values)
