"""Following whole-document logs live: a JSON (or Markdown) file rewritten as the agent works.

mini-swe-agent and SWE-agent rewrite their trajectory after every step,
OpenHands and Cline their event lists, Aider appends to its Markdown history:
none is one JSON record a line, so :class:`~monitor.sources.tail.Tailer` cannot
read them.  :class:`DocumentFollower` reads such a file whole each time it
changes (:func:`monitor.formats.documents.load`, as ``scan`` does) and hands on
only the steps it has not handed on before: the events whose ``line`` (the
step's index, or the file's line for Aider) is past the last one delivered,
and at that last step those not delivered yet (a session end written with the
final step).  Problems are reported the same way, once.

A file caught half rewritten (not valid JSON yet) is read again on its next
change; it is reported only once it has been left so.  The read position
stored for a restart is the next step (``line``) and the size read, under the
file's identity without a head hash (a rewritten document's first bytes
change): a restarted watcher takes up at that step, as it does with a JSONL
file's next line.  Started "from the end", only steps written afterwards are
read; "recent" or "from the start", the whole document.

An OpenHands V1 conversation folder (``<id>/events/event-NNNNN-<uuid>.json``,
one event a file, each written once) is read a file at a time into one
session per conversation, each event at its place (``event-00002`` is line
3), as ``scan`` reads the folder.

A Cline / Roo Code task's ``ui_messages.json`` is followed on its own, for the
asks that wait for the person (:mod:`monitor.formats.cline_asks`): a change to
it reads it alone, not the history beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats import cline_asks, documents
from monitor.formats.base import Problem, RecordError
from monitor.formats.openhands_v1 import AGENT, V1Reader, is_v1_event
from monitor.sources import Sink
from monitor.sources.paths import is_storage_file
from monitor.sources.reporting import submit_new
from monitor.sources.resume import path_key
from monitor.sources.tailed import TailedFile

#: A document left invalid for this long is reported (a writer mid-rewrite is not).
SETTLE_SECONDS = 2.0
#: Largest document read whole (a bigger one is reported, not read).
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024

#: The kind of a Cline / Roo Code task's ``ui_messages.json`` (its asks: :mod:`monitor.formats.cline_asks`).
CLINE_UI = "cline-ui"

_Key = tuple[Any, ...]


def _key(event: Event) -> _Key:
    return (event.session, event.kind, event.call_id, event.role, event.status, event.content[:200])


@dataclass
class _State:
    #: The last step delivered (0: none yet) and what was delivered at it.
    line: int = 0
    at_line: set[_Key] = field(default_factory=set)
    started: bool = False
    reported: set[tuple[int | None, str]] = field(default_factory=set)
    invalid_since: float | None = None
    #: Taken up from a stored position: what was at its step is not known, so all of it was delivered.
    resumed: bool = False


class DocumentFollower:
    """Reads the document-format files a :class:`~monitor.sources.files.FileSource` follows."""

    def __init__(self, sink: Sink, again: Callable[[str, bool], None], fmt: str | None = None):
        self.sink = sink
        self.again = again
        self.fmt = fmt
        self.keeps_positions = bool(getattr(sink, "keeps_positions", False))
        self._kinds: dict[tuple[int, int], str | None] = {}
        self._states: dict[tuple[int, int], _State] = {}
        #: The OpenHands V1 conversations read one event file at a time, by events folder.
        self._conversations: dict[Path, V1Reader] = {}
        self.bytes_read = 0

    def kind(self, tf: TailedFile) -> str | None:
        """The document format of ``tf`` (None: a line format, for the tailer)."""
        if tf.ident not in self._kinds:
            if len(self._kinds) > 100_000:
                self._kinds.clear()
            forced = self.fmt if self.fmt in documents.DOCUMENT_FORMATS else None
            if cline_asks.is_ui(tf.path):
                forced = CLINE_UI  # a Cline task's UI messages: its asks (the history is read apart)
            elif documents.is_event_file(Path(tf.path)):
                forced = "openhands"
            if is_storage_file(tf.path):
                forced = "opencode-storage"  # (read by monitor.sources.storage)
            self._kinds[tf.ident] = forced or documents.kind_of(Path(tf.path))
        return self._kinds[tf.ident]

    def forget(self, tf: TailedFile) -> None:
        self._kinds.pop(tf.ident, None)
        self._states.pop(tf.ident, None)

    async def read(self, tf: TailedFile, st: os.stat_result) -> None:
        """Read ``tf`` again (it changed) and hand on what is new in it."""
        state = self._states.get(tf.ident)
        if state is None:
            state = self._states[tf.ident] = self._first_state(tf, st)
        if documents.is_event_file(Path(tf.path)):
            await self._event_file(tf, st, state)
            return
        tf.mtime_ns, tf.offset = st.st_mtime_ns, st.st_size
        if st.st_size > MAX_DOCUMENT_BYTES:
            await self._report(
                state, [Problem(tf.path, None, f"a document of {st.st_size:,} bytes; not read")]
            )
            return
        try:
            events, problems = self._load(tf)
        except OSError as exc:
            await self._report(state, [Problem(tf.path, None, f"cannot read: {exc.strerror or exc}")])
            return
        self.bytes_read += st.st_size
        if not events and problems and problems[0].line is None:
            # Perhaps caught half rewritten: try again, and say so once it is left so.
            now = time.monotonic()
            if state.invalid_since is None:
                state.invalid_since = now
            if now - state.invalid_since < SETTLE_SECONDS:
                tf.mtime_ns = -1  # (read again on the next check, even unchanged)
                self.again(tf.path, False)
                return
            await self._report(state, problems)
            return
        state.invalid_since = None
        if tf.align == "back":  # started from the end: what is there already is not new
            tf.align = ""
            state.line = max((e.line or 0 for e in events), default=0)
            state.at_line = {_key(e) for e in events if e.line == state.line}
            state.started = True
        fresh = self._fresh(state, events)
        await self._report(state, problems, fresh, self._position(tf, state))

    def _load(self, tf: TailedFile) -> tuple[list[Event], list[Problem]]:
        path = Path(tf.path)
        if cline_asks.is_ui(tf.path):
            return cline_asks.load(path)
        return documents.load(path, documents.session_of(path), self.fmt)

    async def _event_file(self, tf: TailedFile, st: os.stat_result, state: _State) -> None:
        """One event of an OpenHands V1 conversation folder (written once): read
        with its conversation's other events, as ``scan`` reads the folder."""
        tf.mtime_ns, tf.offset = st.st_mtime_ns, st.st_size
        if state.line > 0 or tf.align == "back":
            state.line = max(state.line, 1)  # read already (or before a restart), or older than the start
            tf.align = ""
            return
        path = Path(tf.path)
        folder, session = path.parent, path.parent.parent.name or "openhands"
        number = documents.event_number(path)
        problem: Problem | None = None
        try:
            item = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            if st.st_mtime > time.time() - SETTLE_SECONDS:
                tf.mtime_ns = -1  # perhaps still being written
                self.again(tf.path, False)
                return
            item, problem = None, Problem(str(folder), number, f"{path.name}: cannot be read as JSON ({exc})")
        self.bytes_read += st.st_size
        state.line = 1
        conversation = self._conversations.get(folder)
        events: list[Event] = []
        if conversation is None:
            conversation = self._conversations[folder] = V1Reader(str(folder), session)
            if len(self._conversations) > 10_000:
                self._conversations.pop(next(iter(self._conversations)))
            events.append(
                Event(kind=Kind.SESSION_START, session=session, ts=0.0, source=str(folder), agent=AGENT)
            )
        problems = [problem] if problem is not None else []
        if isinstance(item, dict) and is_v1_event(item):
            try:
                events.extend(conversation.decode(item, number, time.time()))
            except RecordError as exc:
                problems.append(Problem(str(folder), number, str(exc)))
        elif problem is None:
            problems.append(
                Problem(str(folder), number, f"expected an event object, got {type(item).__name__}")
            )
        if events and events[0].kind is Kind.SESSION_START:
            events[0].ts = events[1].ts if len(events) > 1 else time.time()
        await self._report(state, problems, events, self._position(tf, state))

    def _first_state(self, tf: TailedFile, st: os.stat_result) -> _State:
        record, tf.resume = tf.resume, None
        if record is not None and record.get("line") is not None and int(record["offset"]) <= st.st_size:
            # Where a previous watcher stopped: the step after the last it delivered.
            return _State(line=int(record["line"]) - 1, started=True, resumed=True)
        return _State()

    def _fresh(self, state: _State, events: list[Event]) -> list[Event]:
        fresh: list[Event] = []
        last = state.line
        for event in events:
            line = event.line
            if line is None:
                if not state.started:
                    fresh.append(event)
            elif line > last or (line == last and not state.resumed and _key(event) not in state.at_line):
                fresh.append(event)
        state.started, state.resumed = True, False
        newest = max((e.line for e in fresh if e.line is not None), default=last)
        if newest > last:
            state.line = newest
            state.at_line = set()
        state.at_line.update(_key(e) for e in fresh if e.line == state.line)
        return fresh

    def _position(self, tf: TailedFile, state: _State) -> dict[str, Any] | None:
        if not self.keeps_positions or state.line <= 0:
            return None
        return {
            "dev": tf.ident[0],
            "ino": tf.ident[1],
            "head_len": 0,
            "head": "",
            "path": path_key(tf.path),
            "offset": tf.offset,
            "line": state.line + 1,
            "mark": b"",
        }

    async def _report(
        self,
        state: _State,
        problems: list[Problem],
        events: list[Event] | None = None,
        where_read: dict[str, Any] | None = None,
    ) -> None:
        await submit_new(self.sink, state.reported, problems, events, where_read)
