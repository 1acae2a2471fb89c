"""The normalized event model every source, format and detector shares.

An :class:`Event` is one thing an agent did or said, already translated from
whatever format it arrived in (native JSONL, a Claude Code transcript, a Codex
rollout, a socket).  Detectors only ever see these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any


class Kind(StrEnum):
    """The event types of the native format."""

    SESSION_START = "session_start"
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    COMPACTION = "compaction"
    SESSION_END = "session_end"


KINDS: frozenset[str] = frozenset(k.value for k in Kind)

# The members as module constants, for hot paths: ``Kind.TOOL_CALL`` goes
# through ``EnumType.__getattr__`` on every access (about 0.2 µs in 3.11,
# ten times a global), and a decoder or detector tests the kind per event.
SESSION_START = Kind.SESSION_START
MESSAGE = Kind.MESSAGE
TOOL_CALL = Kind.TOOL_CALL
TOOL_RESULT = Kind.TOOL_RESULT
USAGE = Kind.USAGE
COMPACTION = Kind.COMPACTION
SESSION_END = Kind.SESSION_END


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
    #: Per-event memo of derived keys (canonical args, normalized result) so
    #: that several detectors do not recompute them.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def where(self) -> str:
        """``file:line`` (or just the source) for messages."""
        if self.line is None:
            return self.source
        return f"{self.source}:{self.line}"

    def summary(self, width: int = 80) -> str:
        """A one-line human description, bounded to ``width`` characters."""
        if self.kind is Kind.TOOL_CALL:
            from monitor.text import compact_args

            text = f"{self.tool}({compact_args(self.args)})"
        elif self.kind is Kind.TOOL_RESULT:
            prefix = "error" if self.is_error else "result"
            text = f"{prefix}: {self.content[: width * 8]}"
        elif self.kind is Kind.MESSAGE:
            text = f"{self.role}: {self.content[: width * 8]}"
        elif self.kind is Kind.USAGE:
            text = (
                f"usage in={self.input_tokens} out={self.output_tokens} "
                f"cost={self.cost_usd}"
            )
        elif self.kind is Kind.SESSION_START:
            text = f"session start ({self.agent or 'agent'})"
        elif self.kind is Kind.SESSION_END:
            text = f"session end ({self.status or 'ended'})"
        else:
            text = self.kind.value
        # Bound the work before normalizing: a 1 MB message must not cost a
        # 1 MB copy or split.
        text = " ".join(text[: width * 8 + 64].split())
        return text if len(text) <= width else text[: width - 1] + "…"


_new = object.__new__


def new_event(kind: Kind, session: str, ts: float, source: str, line: int | None, role: str | None,
              content: str, call_id: str | None, tool: str | None, args: dict[str, Any] | None,
              is_error: bool, meta: dict[str, Any]) -> Event:
    """An :class:`Event` with the fields decoders set for calls, results and
    messages, the others at their defaults: what ``Event(...)`` makes, at
    about half the cost.  Decoders build one per line; the dataclass
    ``__init__`` (22 arguments, two default factories) was most of decoding.
    tests/test_events.py checks it sets every field ``Event(...)`` does."""
    event = _new(Event)
    event.kind = kind
    event.session = session
    event.ts = ts
    event.source = source
    event.line = line
    event.agent = None
    event.role = role
    event.content = content
    event.call_id = call_id
    event.tool = tool
    event.args = args
    event.is_error = is_error
    event.input_tokens = None
    event.output_tokens = None
    event.cost_usd = None
    event.status = None
    event.pid = None
    event.parent = None
    event.meta = meta
    event.seq = 0
    event.call = None
    event.cache = {}
    return event


@dataclass(frozen=True, slots=True)
class EventRef:
    """A pointer to an event used as evidence in a detection."""

    seq: int
    kind: str
    source: str
    line: int | None
    summary: str

    @classmethod
    def of(cls, event: Event) -> EventRef:
        return cls(event.seq, event.kind.value, event.source, event.line, event.summary())

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "file": self.source,
            "line": self.line,
            "summary": self.summary,
        }
