"""Assistant turns: a session's events grouped into what one model response did.

The turn-level detectors (output similarity, turn similarity, monologue) judge
*turns*, not records.  A turn is one model response: its text (possibly split
over several ``message`` events) plus the tool calls it made, and the results
those calls got.  :class:`TurnTracker` assembles turns from the event stream
and hands each one back, once, when it is complete.

Why this needs care: real transcripts split one response into several records
(Claude Code writes the text, thinking and each ``tool_use`` block of one API
message on separate lines, up to a minute apart), and streaming agents send a
reply in chunks.  Counting records as turns would make one long answer look
like a monologue.  Rules, in order:

* a ``tool_result``, a system message, a compaction or a session boundary
  ends the response that came before it; so does a ``usage`` report unless
  it belongs to that response (same id, same record, or a ``delta``);
* an assistant message carrying a response id (``meta`` key such as
  ``message_id``) continues the current turn exactly when the id matches;
* when the adapter reports usage per response with the response's id (Claude
  Code does, on the response's first record), the turn takes that id and
  later messages continue it until a report names another response; a usage
  on the same record as a message that had been taken as a continuation
  moves that message to a new turn;
* with no ids at all, a message marked ``continues`` (native
  ``"continues": true``) continues the turn; one read without a time of its
  own (native ``message`` without ``ts``: meta ``untimed``) starts a new turn;
  otherwise a message continues a text-only turn when it arrives less than
  ``same_turn_seconds`` after the previous text, and starts a new turn
  otherwise (and always after the turn's tool calls);
* a tool call joins the current turn until that turn has been answered;
  after that it starts a tool-only turn.

A turn is complete when it has been ended and every call has its result, or
when the next turn starts.  Everything kept is bounded: the text is held as a
head and a tail, calls and results up to :data:`MAX_CALLS`.
"""

from __future__ import annotations

from typing import Any

from monitor.detect.analysis.memo import NORMALIZED_RESULTS
from monitor.events import Event, Kind
from monitor.text import SIMILARITY_CHARS, call_key, clip, squashed

#: ``meta`` keys under which adapters may carry the id of the model response
#: a record belongs to.  Records of one response share it.
RESPONSE_ID_KEYS = ("message_id", "response_id", "msg_id", "request_id", "requestId")

_TOOL_CALL, _TOOL_RESULT, _MESSAGE, _USAGE = Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE, Kind.USAGE

#: Calls, results and evidence events kept per turn.
MAX_CALLS = 16
MAX_EVIDENCE = 8


def response_id(event: Event) -> str | None:
    """The id of the model response ``event`` belongs to, if the adapter kept one."""
    meta = event.meta
    if not meta:
        return None
    for key in RESPONSE_ID_KEYS:
        value = meta.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            return str(value)
    return None


def marked(turn: Turn, key: str) -> bool:
    """Whether a message of ``turn`` carries ``meta[key] = True`` (an adapter's mark on the
    reply: ``calls_unrecorded``, ``resumed``)."""
    return any(e.meta and e.meta.get(key) is True for e in turn.events if e.kind is _MESSAGE)


def has_text(text: str) -> bool:
    """True unless ``text`` is empty or white space only."""
    return bool(text) and not text.isspace()


class BoundedText:
    """Text appended piece by piece, of which only the head and tail are kept
    (like :func:`monitor.text.clip`), so a 1 MB reply costs what a short one does."""

    __slots__ = ("limit", "head", "tail", "length", "_squashed")

    def __init__(self, limit: int = SIMILARITY_CHARS):
        self.limit = limit
        self.head = ""
        self.tail = ""
        self.length = 0
        self._squashed: str | None = None

    def add(self, piece: str) -> None:
        # Only slices of at most ``limit`` characters are ever copied.
        if self.length and piece:
            self._append("\n")  # pieces are separate records: keep words apart
        self._append(piece)

    def _append(self, piece: str) -> None:
        self._squashed = None
        half = self.limit // 2
        self.length += len(piece)
        taken = 0
        if len(self.head) < half:
            taken = half - len(self.head)
            self.head += piece[:taken]
        if len(piece) > taken:
            self.tail = (self.tail + piece[max(taken, len(piece) - half) :])[-half:]

    def text(self) -> str:
        return self.head + self.tail

    def squashed(self) -> str:
        """:meth:`text` with its white space squashed (:func:`monitor.text.squashed`),
        made once: output and turn similarity both compare it."""
        text = self._squashed
        if text is None:
            text = self._squashed = squashed(self.head + self.tail)
        return text

    def restore(self, state: tuple[str, str, int]) -> None:
        """Go back to an earlier ``(head, tail, length)``."""
        self.head, self.tail, self.length = state
        self._squashed = None


class Outcome:
    """The results a turn got, held without their events: for each result its
    error flag and the head and tail of its content (:func:`monitor.text.clip`,
    all that :func:`monitor.text.result_key` reads).  Normalized only when a
    comparison needs it: most turns never resemble another, and normalizing
    every result would dominate the cost."""

    __slots__ = ("items", "_key")

    def __init__(self, items: tuple[tuple[bool, str], ...]):
        self.items = items  # (is_error, clipped content) per result
        self._key: tuple[str, ...] | None = None

    def __bool__(self) -> bool:
        return bool(self.items)

    def key(self) -> tuple[str, ...]:
        """The normalized results, order-free (parallel calls finish in any order)."""
        if self._key is None:
            normalized = NORMALIZED_RESULTS.__getitem__
            self._key = tuple(
                sorted(("E:" if error else "R:") + normalized(content) for error, content in self.items)
            )
        return self._key

    def moved(self, other: Outcome) -> bool:
        """True when both turns got results and they differ: progress."""
        if not self.items or not other.items:
            return False
        if self.items == other.items:
            return False  # the same contents (as far as normalizing looks)
        return self.key() != other.key()


_NO_RESULTS = Outcome(())


#: A tool call made in a turn: ``(tool name, canonical key)``.  A plain
#: tuple: one is built per call, and a NamedTuple's (even through
#: ``tuple.__new__``) cost a third of the turn.
Call = tuple[str | None, str]


class Turn:
    """One assistant response: text, tool calls, and the results they got.

    While the turn is built it holds its first, latest and (up to
    :data:`MAX_EVIDENCE`) evidence events; the detectors judging it take
    :class:`~monitor.events.EventRef` of each event they keep, never the
    turn, so a judged turn goes with its events once the next event is fed."""

    __slots__ = (
        "first",
        "last",
        "response",
        "text",
        "has_text",
        "messages",
        "calls",
        "call_id",
        "call_ids",
        "open_calls",
        "results",
        "ended",
        "answered",
        "events",
        "_undo",
        "keep_keys",
        "_outcome",
        "after",
    )

    def __init__(self, first: Event, keep_text: bool, response: str | None = None):
        """A turn opened by ``first``: a tool call is added here (most turns
        are one call and its result, and this runs for each), anything else
        is added by the caller."""
        self.keep_keys = keep_text  # callers that need no text need no call/result keys either
        self.first = first
        self.last = first  # latest message or call added
        meta = first.meta
        self.response = (response_id(first) if meta else None) or response
        #: Created with the first message (most turns are tool calls only).
        self.text: BoundedText | None = None
        self.has_text = False
        self.messages = 0
        # Tuples, not lists: one allocation each, and most turns never grow.
        self.results: tuple[tuple[bool, str], ...] = ()  # (is_error, clipped content) per result
        self.ended = False  # the response is over (result, usage of another, system message…)
        self.answered = False  # at least one tool result came back
        self._undo: tuple[Any, ...] | None = None  # state before the latest message
        self._outcome: Outcome | None = None
        #: The harness's (system) message since the turn before, if any: what it
        #: answered that turn with (a format error, a limit).
        self.after: Event | None = None
        #: The first call's id; the ids of all its calls once there are two
        #: (most turns make one call: no set for them).
        self.call_ids: set[str] | None = None
        if first.kind is _TOOL_CALL:  # add_call(), inlined
            self.calls: tuple[Call, ...] = ((first.tool, call_key(first) if keep_text else ""),)
            self.call_id: str | None = first.call_id or None
            self.open_calls = 1  # calls still waiting for their result
            self.events: list[Event] = [first]
        else:
            self.calls = ()
            self.call_id = None
            self.open_calls = 0
            self.events = []

    # -- building ---------------------------------------------------------

    def _remember(self, event: Event) -> None:
        self.last = event
        if len(self.events) < MAX_EVIDENCE:
            self.events.append(event)

    def add_message(self, event: Event) -> None:
        text = self.text
        if text is None and self.keep_keys:
            text = self.text = BoundedText()
        self._undo = (
            self.has_text,
            self.messages,
            len(self.events),
            self.last,
            None if text is None else (text.head, text.tail, text.length),
        )
        self.messages += 1
        content = event.content
        if content and not content.isspace():  # has_text(), inlined
            self.has_text = True
        if text is not None and content:
            text.add(content)
        self.response = self.response or response_id(event)
        self._remember(event)

    def take_back_message(self) -> None:
        """Undo the latest :meth:`add_message` (it turned out to start another response)."""
        if self._undo is None:
            return
        self.has_text, self.messages, events, self.last, text = self._undo
        del self.events[events:]
        if text is not None and self.text is not None:
            self.text.restore(text)
        self._undo = None

    def add_call(self, event: Event) -> None:
        self._undo = None
        self.open_calls += 1
        call_id = event.call_id
        if call_id:
            if self.call_id is None:
                self.call_id = call_id
            elif self.call_ids is None:
                self.call_ids = {self.call_id, call_id}
            else:
                self.call_ids.add(call_id)
        if len(self.calls) < MAX_CALLS:
            self.calls += ((event.tool, call_key(event) if self.keep_keys else ""),)
        if self.response is None and event.meta:
            self.response = response_id(event)
        self._remember(event)

    def add_result(self, event: Event) -> None:
        """A result of one of its calls: it ends the response."""
        self._undo = None
        if self.open_calls > 0:
            self.open_calls -= 1
        self.answered = self.ended = True
        if len(self.results) < MAX_CALLS and self.keep_keys:
            content = event.content
            if len(content) > SIMILARITY_CHARS:
                content = clip(content)
            self.results += ((event.is_error, content),)
        if len(self.events) < MAX_EVIDENCE:
            self.events.append(event)

    # -- reading ----------------------------------------------------------

    @property
    def complete(self) -> bool:
        return self.ended and self.open_calls == 0

    @property
    def text_only(self) -> bool:
        return not self.calls and self.open_calls == 0

    def text_value(self) -> str:
        return self.text.text() if self.text is not None else ""

    def outcome(self) -> Outcome:
        """The results, made once per turn (the turn detectors share it)."""
        outcome = self._outcome
        if outcome is None:
            outcome = self._outcome = Outcome(self.results) if self.results else _NO_RESULTS
        return outcome


def _same_record(a: Event, b: Event) -> bool:
    """Events decoded from one record (one line of one file)."""
    return a.line is not None and a.line == b.line and a.source == b.source


class TurnTracker:
    """Assembles one session's assistant turns; :meth:`feed` returns a turn once
    it is complete (at most one per event)."""

    __slots__ = ("keep_text", "same_turn_seconds", "current", "_announced", "_heard")

    def __init__(self, *, keep_text: bool = True, same_turn_seconds: float = 1.0):
        """``keep_text=False`` keeps only the shape of each turn (text or not,
        calls or not): no text, call keys or result keys are computed."""
        self.keep_text = keep_text
        self.same_turn_seconds = same_turn_seconds
        self.current: Turn | None = None
        #: Response id announced by a usage report before any of its content
        #: (Claude Code reports usage on a response's first record).
        self._announced: str | None = None
        #: The harness's latest message since the last turn started (for the next one's ``after``).
        self._heard: Event | None = None

    def reset(self) -> None:
        self.current = None
        self._announced = None
        self._heard = None

    def _close(self) -> Turn | None:
        turn, self.current = self.current, None
        return turn

    def _start(self, event: Event) -> Turn:
        """Start the current turn with ``event``; the turn."""
        turn = self.current = Turn(event, self.keep_text, self._announced)
        self._announced = None
        if self._heard is not None:
            turn.after, self._heard = self._heard, None
        return turn

    def _continues(self, turn: Turn, message: Event) -> bool:
        """Does an assistant ``message`` belong to the response ``turn`` is building?"""
        if turn.answered or turn.ended:
            return False  # a result came back or the response ended: a new response
        ours, theirs = turn.response, response_id(message)
        if theirs is not None:
            return ours == theirs
        if ours is not None:
            # The adapter reports each response's usage (with its id): until a
            # report names another response, this is the same one.
            return True
        if turn.calls:
            return False
        meta = message.meta
        if meta:
            if meta.get("continues") is True:
                return True  # the log says so (native ``"continues": true``)
            if meta.get("untimed") is True:
                return False  # no time to go by: each record is its own response
        return message.ts - turn.last.ts < self.same_turn_seconds

    def feed(self, event: Event) -> Turn | None:
        """The turn ``event`` completes, if any."""
        kind = event.kind
        if kind is _TOOL_CALL:
            return self._call(event)
        if kind is _TOOL_RESULT:
            return self._result(event)
        if kind is _MESSAGE:
            return self._message(event)
        if kind is _USAGE:
            return self._usage(event)
        # compaction, session start/end: whatever was in progress is over
        if self.current is not None:
            self.current.ended = True
            self.current.open_calls = 0
        return self._close()

    def _call(self, event: Event) -> Turn | None:
        turn = self.current
        if turn is not None and not turn.answered:
            # No result back yet: the call joins this response if the
            # response ids agree or, without ids, while it has not ended.
            ours = turn.response
            theirs = response_id(event) if event.meta else None
            if (ours == theirs) if (ours is not None and theirs is not None) else not turn.ended:
                turn.add_call(event)
                return None
        closed = self._close()
        self._start(event)  # (a turn started by a call has it added)
        return closed

    def _result(self, event: Event) -> Turn | None:
        turn = self.current
        if turn is None:
            return None
        call_id = event.call_id
        ours = turn.call_id
        if call_id and ours is not None and call_id != ours:
            others = turn.call_ids
            if others is None or call_id not in others:
                return None  # not an answer to this turn's calls
        turn.add_result(event)
        if turn.open_calls == 0:  # turn.complete: the result ended it
            self.current = None
            return turn
        return None

    def _message(self, event: Event) -> Turn | None:
        turn = self.current
        if event.role == "assistant":
            if turn is not None and self._continues(turn, event):
                turn.add_message(event)
                return None
            closed = self._close()
            self._start(event)
            if self.current is not None:
                self.current.add_message(event)
            return closed
        if event.role == "user":
            self.reset()  # the engine resets detectors too; be safe on our own
            return None
        self._heard = event
        return self._end_response()

    def _usage(self, event: Event) -> Turn | None:
        """A usage report ends the response in progress, unless it belongs to it."""
        if event.meta.get("delta"):
            return None  # more output of a response already reported
        rid = response_id(event)
        turn = self.current
        if turn is not None and rid is not None:
            if rid == turn.response:
                return None
            if _same_record(event, turn.last):
                if turn.response is None:
                    turn.response = rid  # the usage of the record just added
                    return None
                if turn.messages > 1 and turn.last.kind is Kind.MESSAGE:
                    # That message opened a new response (its usage names
                    # another): give it back and start the new turn with it.
                    message = turn.last
                    turn.take_back_message()
                    turn.ended = True
                    self._announced = rid
                    closed = self._close()
                    self._start(message).add_message(message)
                    return closed
        closed = self._end_response()
        self._announced = rid
        return closed

    def _end_response(self) -> Turn | None:
        turn = self.current
        if turn is None:
            return None
        turn.ended = True
        return self._close() if turn.complete else None
