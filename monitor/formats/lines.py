"""From raw lines of bytes to events, without ever losing or crashing on input.

:class:`LineDecoder` is what the offline scanner, the file tailer and the
socket server all feed: it JSON-decodes each line, picks the file's format from
its first valid record (unless forced), and reports every bad line as a
:class:`~monitor.formats.base.Problem` with ``file:line``.  Non-UTF-8 bytes are
replaced and reported, and the record is still used.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event
from monitor.formats.base import Problem, RecordDecoder, RecordError
from monitor.formats.compressed import plain_name
from monitor.formats.registry import LINE_FORMATS, sniff
from monitor.framing import Line

#: Lines longer than this are skipped (and reported) rather than parsed.
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
#: Event times outside 1970-01-01 .. 3000-01-01 (UTC) are reported and
#: replaced by the time the line was read: printers, ``history`` and ``show``
#: format every time, and ``datetime`` cannot go past the year 9999.
TS_MIN, TS_MAX = 0.0, 32_503_680_000.0


def clamp_times(events: list[Event], now: float) -> str | None:
    """Replace out-of-range (or NaN) event times by ``now``; say what was replaced."""
    bad = None
    for event in events:
        ts = event.ts
        if not TS_MIN <= ts <= TS_MAX:  # NaN fails both comparisons
            bad = ts
            event.ts = now
    if bad is None:
        return None
    return f"ts {bad!r} is out of range (1970..3000); replaced with the time it was read"


def session_from_path(source: str) -> str:
    """The default session id of a file: its stem."""
    name = plain_name(Path(source).name)
    for suffix in (".jsonl", ".ndjson", ".json", ".log", ".traj"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name or source


_fast_loads = orjson.loads

#: Records read before a file that began like native (a bare ``message``) is settled as native.
_UNSETTLED = 64
#: The fields of a native ``message`` another format's message records also have.
_MESSAGE_FIELDS = frozenset({"type", "role", "content", "ts", "timestamp", "delta"})


def _native_lookalike(cls: type[RecordDecoder], record: dict[str, Any]) -> bool:
    """A native ``message`` record without a session: Gemini CLI's stream-json starts so too."""
    return (
        cls is LINE_FORMATS.get("native")
        and record.get("type") == "message"
        and record.keys() <= _MESSAGE_FIELDS
    )


def _loads(raw: bytes) -> tuple[Any, str | None]:
    """Parse one JSON line; return (value, note) where note reports repairs."""
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as uerr:
            text = raw.decode("utf-8", errors="replace")
            try:
                return json.loads(text), f"invalid UTF-8 at byte {uerr.start}, replaced with U+FFFD"
            except ValueError as jerr:
                raise ValueError(f"invalid UTF-8 at byte {uerr.start} and invalid JSON: {jerr}") from None
            except RecursionError:  # json's recursion guard (orjson stops at 1,024 levels)
                raise ValueError(
                    f"invalid UTF-8 at byte {uerr.start} and JSON nested too deeply to parse"
                ) from None
        raise ValueError(f"invalid JSON: {exc}") from None


class LineDecoder:
    """Stateful decoder of one stream of JSON lines (a file or a connection)."""

    def __init__(
        self,
        source: str,
        *,
        fmt: str | None = None,
        session: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ):
        if fmt is not None and fmt not in LINE_FORMATS:
            raise ValueError(f"unknown format {fmt!r} (expected one of: {', '.join(sorted(LINE_FORMATS))})")
        self.source = source
        self.default_session = session or session_from_path(source)
        self.max_line_bytes = max_line_bytes
        self.decoder: RecordDecoder | None = LINE_FORMATS[fmt](source, self.default_session) if fmt else None
        self.lines = 0
        self.events = 0
        self.problems: list[Problem] = []
        self.problem_count = 0
        self.max_problems_kept = 1000
        #: Problems go uncounted (see ``feed_lines``' ``mine``): another reader reports them.
        self.quiet = False
        #: Records left to another reader (``feed_lines``' ``mine``).
        self.passed = 0
        #: Records still to look at for a format that starts like native (``_settle``); 0: settled.
        self.unsettled = 0

    @property
    def format(self) -> str | None:
        return self.decoder.name if self.decoder else None

    def problem(self, line: int | None, reason: str) -> Problem:
        problem = Problem(self.source, line, reason)
        if self.quiet:
            return problem
        self.problem_count += 1
        if len(self.problems) < self.max_problems_kept:
            self.problems.append(problem)
        return problem

    def oversized(self, line: int, size: int) -> Problem:
        """Report a line that was too long to parse (the reader skipped it)."""
        return self.problem(
            line, f"line of {size:,} bytes exceeds the {self.max_line_bytes:,}-byte limit; skipped"
        )

    def feed(
        self, raw: bytes, line: int | None, now: float | None = None
    ) -> tuple[list[Event], Problem | None]:
        """Decode one line (without its newline).  Never raises on bad input."""
        self.lines += 1
        if now is None:
            now = time.time()
        # Strip only when there is white space at an end: copying every line
        # (1 MB ones too) just to find there was none costs more than parsing.
        stripped = raw
        if not raw or raw[:1].isspace() or raw[-1:].isspace():
            stripped = raw.strip()
            if not stripped:
                return [], None
        if len(raw) > self.max_line_bytes:
            return [], self.oversized(line or 0, len(raw))
        try:
            record, note = _fast_loads(stripped), None
        except orjson.JSONDecodeError:
            try:
                record, note = _loads(stripped)
            except ValueError as exc:
                return [], self.problem(line, str(exc))
        if record.__class__ is not dict and not isinstance(record, dict):
            return [], self.problem(line, f"expected a JSON object, got {type(record).__name__}")
        decoder = self.decoder
        if decoder is None or note is not None or self.unsettled:
            return self.feed_record(record, line, now, note)
        # The common case, as feed_record without the sniffing and the note.
        try:
            events = decoder.decode(record, line, now)
        except RecordError as exc:
            return [], self.problem(line, str(exc))
        except Exception as exc:  # an adapter bug must not take the monitor down
            return [], self.problem(line, f"{type(exc).__name__} while decoding: {exc}")
        self.events += len(events)
        if events:
            note = clamp_times(events, now)
            if note is not None:
                return events, self.problem(line, note)
        return events, None

    def feed_lines(
        self,
        lines: list[Line],
        now: float | None = None,
        mine: Callable[[str], bool] | None = None,
        reporter: bool = True,
    ) -> list[Event]:
        """The events of many lines, as :class:`~monitor.framing.LineSplitter`
        gives them with this decoder's ``max_line_bytes`` (``raw`` is None
        for a longer line; its newline may be kept), every bad line reported
        as :meth:`feed` and :meth:`oversized` do.

        This is the per-line loop of a scan, so it is written flat: a line
        ``orjson`` parses into an object, for a format already known, goes
        straight to the decoder (orjson skips white space around it as
        :meth:`feed` would); anything else takes :meth:`feed`.  ``now``
        (the time of records without one) is read once.  A decoder of one
        event a record (``decode_event``: the native format) read by this
        reader alone has a loop of its own, without the other cases' tests.

        With ``mine``, one of several readers of the same lines (a sharded
        scan's worker) decodes only what may be its own: a record whose
        session ``mine`` says is another reader's is skipped (that reader
        decodes it and reports its problems); the problems of the lines
        every reader decodes (no session to tell) are the ``reporter``'s."""
        if now is None:
            now = time.time()
        out: list[Event] = []
        decode_event = getattr(self.decoder, "decode_event", None)
        if mine is None and decode_event is not None and not self.unsettled:
            careful = self._event_lines(lines, now, decode_event, out)
        else:
            careful = self._any_lines(lines, now, mine, reporter, out)
        self.quiet = False
        self.lines += len(lines) - careful
        self.events += len(out)
        return out

    def _event_lines(
        self, lines: list[Line], now: float, decode_event: Callable[..., Event | None], out: list[Event]
    ) -> int:
        """:meth:`feed_lines` with ``decode_event`` and no other reader; how
        many lines took :meth:`_careful_line` (they count themselves)."""
        append = out.append
        loads, decode_error = _fast_loads, orjson.JSONDecodeError
        ts_min, ts_max = TS_MIN, TS_MAX
        careful = 0
        for lineno, raw, size in lines:
            if raw is not None:
                try:
                    record = loads(raw)
                except decode_error:
                    record = None  # perhaps invalid UTF-8 to repair: feed() sees to it
                if record.__class__ is dict:
                    try:
                        event = decode_event(record, lineno, now)
                    except Exception as exc:
                        self._undecodable(lineno, exc)
                    else:
                        if event is not None:
                            append(event)
                            if not ts_min <= event.ts <= ts_max:
                                self.problem(lineno, clamp_times([event], now) or "")
                    continue
            careful += 1
            self._careful_line(lineno, raw, size, now, out)
        return careful

    def _any_lines(
        self,
        lines: list[Line],
        now: float,
        mine: Callable[[str], bool] | None,
        reporter: bool,
        out: list[Event],
    ) -> int:
        """:meth:`feed_lines` for any decoder (one not known yet, too) and
        reader; how many lines took :meth:`_careful_line`."""
        append, extend = out.append, out.extend
        loads, decode_error = _fast_loads, orjson.JSONDecodeError
        decode = decode_event = session_key = None
        if self.decoder is not None and not self.unsettled:
            decode = self.decoder.decode
            decode_event = getattr(self.decoder, "decode_event", None)
            session_key = self.decoder.session_key
        shared = not reporter  # (with mine: decodes lines whose problems are not its to report)
        careful = 0
        for lineno, raw, size in lines:
            if raw is not None and decode is not None:
                try:
                    record = loads(raw)
                except decode_error:
                    record = None  # perhaps invalid UTF-8 to repair: feed() sees to it
                if record.__class__ is dict:
                    if mine is not None:
                        hint = record.get(session_key) if session_key is not None else None
                        if hint.__class__ is str and hint:
                            if not mine(hint):
                                self.passed += 1
                                continue
                            self.quiet = False
                        else:
                            self.quiet = shared
                    try:
                        if decode_event is not None:
                            event = decode_event(record, lineno, now)
                            if event is not None:
                                append(event)
                                if not TS_MIN <= event.ts <= TS_MAX:
                                    self.problem(lineno, clamp_times([event], now) or "")
                        else:
                            new = decode(record, lineno, now)
                            extend(new)
                            note = clamp_times(new, now) if new else None
                            if note is not None:
                                self.problem(lineno, note)
                    except Exception as exc:
                        self._undecodable(lineno, exc)
                    continue
            careful += 1
            if mine is not None:
                self.quiet = shared
            self._careful_line(lineno, raw, size, now, out)
            if decode is None and self.decoder is not None and not self.unsettled:
                decode = self.decoder.decode
                decode_event = getattr(self.decoder, "decode_event", None)
                session_key = self.decoder.session_key
        return careful

    def _undecodable(self, line: int, exc: Exception) -> None:
        """Report a record the decoder refused (:class:`RecordError`) or
        failed on: an adapter bug must not take the monitor down."""
        self.problem(
            line, str(exc) if isinstance(exc, RecordError) else f"{type(exc).__name__} while decoding: {exc}"
        )

    def _careful_line(self, lineno: int, raw: bytes | None, size: int, now: float, out: list[Event]) -> None:
        """A line :meth:`feed_lines` leaves to :meth:`feed` (or reports as
        too long), its events added to ``out`` (and counted with the others)."""
        if raw is None:
            self.oversized(lineno, size)
            return
        if raw[-1:] == b"\n":
            raw = raw[:-1]  # (feed() sizes a line without it)
        events = self.feed(raw, lineno, now)[0]
        self.events -= len(events)
        out.extend(events)

    def _settle(self, record: dict[str, Any]) -> None:
        """A file sniffed as native from a bare ``message`` record: the first record
        another format claims (one that ``takes_over_native``, whose messages read
        the same) hands the file to it; a native-only record, or enough records,
        settle it as native."""
        self.unsettled -= 1
        cls = sniff(record)
        if cls is not None and getattr(cls, "takes_over_native", False):
            self.decoder = cls(self.source, self.default_session)
            self.unsettled = 0
        elif cls is not None and not _native_lookalike(cls, record):
            self.unsettled = 0

    def feed_record(
        self, record: dict[str, Any], line: int | None, now: float, note: str | None = None
    ) -> tuple[list[Event], Problem | None]:
        if self.decoder is None:
            cls = sniff(record)
            if cls is None:
                kind = record.get("type")
                return [], self.problem(line, f"unrecognized record (type {kind!r}); no known format matches")
            self.decoder = cls(self.source, self.default_session)
            self.unsettled = _UNSETTLED if _native_lookalike(cls, record) else 0
        elif self.unsettled:
            self._settle(record)
        try:
            events = self.decoder.decode(record, line, now)
        except RecordError as exc:
            return [], self.problem(line, str(exc))
        except Exception as exc:  # an adapter bug must not take the monitor down
            return [], self.problem(line, f"{type(exc).__name__} while decoding: {exc}")
        if events:
            clamped = clamp_times(events, now)
            if clamped is not None:
                note = f"{note}; {clamped}" if note else clamped
        problem = self.problem(line, note) if note else None
        self.events += len(events)
        return events, problem
