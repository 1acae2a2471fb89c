"""OpenTelemetry records of coding agents → native events.

These kinds of agent telemetry are recognised; everything else in a request
(other services' logs and spans, metrics-like events) is ignored, not an error:

* **Claude Code log events** (``CLAUDE_CODE_ENABLE_TELEMETRY=1``,
  ``OTEL_LOGS_EXPORTER=otlp``): ``event.name`` ``user_prompt`` → a user
  message (the text only with ``OTEL_LOG_USER_PROMPTS=1``), ``tool_result`` →
  a call and its result (arguments from ``tool_input`` / ``tool_parameters``
  with ``OTEL_LOG_TOOL_DETAILS=1``; Claude logs no tool output, so the result
  is the ``error`` text or empty, and ``success`` says whether it failed),
  ``api_request`` → usage, ``compaction`` → a compaction; a failed call
  (``success`` ``"false"``) is a failure even when only ``error_type`` is
  logged (``error`` needs ``OTEL_LOG_TOOL_DETAILS=1``), its content then the
  error category; ``assistant_response``, ``api_error``,
  ``api_retries_exhausted``, ``subagent_completed``: see
  :mod:`monitor.formats.otlp_claude`.  Session: ``session.id``; order:
  ``event.sequence``.
* **Codex log events** (``[otel]`` in its config): ``codex.user_prompt``,
  ``codex.tool_result`` (``tool_name``, ``call_id``, ``arguments``,
  ``output``, ``success``); session: ``conversation.id``.
* **GenAI ``execute_tool`` spans** (OpenTelemetry GenAI semantic
  conventions): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the opt-in
  ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``, an ERROR
  status as a failed call; session: ``gen_ai.conversation.id`` (else the trace).
* **Claude Code's ``claude_code.tool`` spans and OpenInference spans**: see
  :mod:`monitor.formats.otlp_spans`.
* **Waits for the person**: Claude Code's and Codex's ``tool_decision`` events
  decided by the user, Claude Code's ``claude_code.tool.blocked_on_user``
  spans: see :mod:`monitor.formats.otlp_waits`.

The trace a session's records were last seen in is remembered
(:attr:`OtlpAdapter.traces`, bounded), so a detection exported about that
session can be put on its trace (:mod:`monitor.otlp_export`).

A session id shaped like a UUID (Claude Code's and Codex's are) is globally
unique and kept as it is, so a session seen over OTLP, through a hook and in
a transcript is one session (their tool-call ids match, and the engine counts
each call once).  Any other id is qualified by where it came from:
``<service.name>@<host.name>/<id>``.

The messages are the official ``opentelemetry-proto`` ones; this module never
touches the network (see :mod:`monitor.sources.otlp`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from monitor.events import Event
from monitor.formats import otlp_claude, otlp_spans, otlp_waits
from monitor.formats.base import Problem, RecordError
from monitor.formats.native import NativeDecoder

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
#: Sessions whose ``session_start`` was sent (least recently seen dropped first).
MAX_KNOWN_SESSIONS = 10_000
#: Records remembered per generation to drop resent ones (see RecentIds).
RECENT_RECORDS = 100_000
#: Characters kept of one argument or output value.
MAX_VALUE = 100_000
_STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain Python value."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def attributes(pairs: Iterable[Any]) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE]


def _arguments(value: Any) -> dict[str, Any]:
    """Tool arguments: an object, or a JSON string of one (as agents log them)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"input": _text(value)}
        except RecursionError:
            raise RecordError("tool arguments nested too deep") from None
    if isinstance(value, dict):
        return value
    return {} if value is None else {"input": value}


def _truthy(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _number(value: Any) -> float | None:
    """A number attribute; None when absent or not numeric.  ``"inf"``/``"nan"``
    make the record bad (a count or a price that is no number)."""
    try:
        number = float(value) if value is not None and value != "" else None
    except (TypeError, ValueError, OverflowError):
        return None
    if number is not None and not math.isfinite(number):
        raise RecordError(f"not a finite number: {value!r}")
    return number


class Where:
    """The service and host a batch came from."""

    __slots__ = ("service", "host", "source")

    def __init__(self, resource: dict[str, Any], peer: str):
        self.service = str(resource.get("service.name") or "unknown_service")
        self.host = str(resource.get("host.name") or peer)
        self.source = f"otlp:{self.service}@{self.host}"

    def session(self, raw: Any) -> str | None:
        if raw is None or raw == "":
            return None
        raw = str(raw)
        return raw if _UUID.match(raw) else f"{self.service}@{self.host}/{raw}"


def _usage_record(attrs: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The native usage record of a Claude Code ``api_request`` log record."""
    # Claude Code counts cache reads and writes apart from input; the
    # event model counts them within it (see monitor/cost.py).
    read, write = _int(attrs.get("cache_read_tokens")), _int(attrs.get("cache_creation_tokens"))
    tokens_in = _int(attrs.get("input_tokens"))
    if tokens_in is not None and (read or write):
        tokens_in += (read or 0) + (write or 0)
    usage = {
        "type": "usage",
        **base,
        "input_tokens": tokens_in,
        "output_tokens": _int(attrs.get("output_tokens")),
        "cost_usd": _number(attrs.get("cost_usd")),
    }
    if read:
        usage["cache_read_input_tokens"] = read
    if write:
        usage["cache_creation_input_tokens"] = write
    if isinstance(attrs.get("model"), str) and attrs["model"]:
        usage["model"] = attrs["model"]
    return usage


def _tool_records(attrs: dict[str, Any], base: dict[str, Any], nanos: int) -> list[dict[str, Any]]:
    """The native call and result of a ``tool_result`` log record (one record holds both)."""
    tool = attrs.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise RecordError("tool_result without tool_name")
    call_id = attrs.get("tool_use_id") or attrs.get("call_id") or attrs.get("gen_ai.tool.call.id")
    if not call_id:
        # No id logged: the record's own place in the session identifies the call.
        call_id = f"otlp-{attrs.get('event.sequence', nanos)}"
    raw_args = next(
        (
            attrs[key]
            for key in ("tool_input", "tool_parameters", "arguments")
            if attrs.get(key) not in (None, "")
        ),
        None,
    )
    success = _truthy(attrs.get("success"))
    output = attrs.get("output")
    # ``error`` needs OTEL_LOG_TOOL_DETAILS=1; ``error_type`` (the category) is always there.
    error = attrs.get("error") or attrs.get("error_type")
    content = _text(output) if output not in (None, "") else _text(error)
    return [
        {"type": "tool_call", **base, "id": str(call_id), "name": tool, "args": _arguments(raw_args)},
        {
            "type": "tool_result",
            **base,
            "id": str(call_id),
            "content": content,
            "is_error": success is False or (success is None and bool(error)),
        },
    ]


#: (sort key, the native records of one log record or span, where it came from).
_Keyed = tuple[tuple[Any, ...], list[dict[str, Any]], Where]


class RecentIds:
    """The records taken lately, to drop an exporter's resend of a batch it
    saw no answer for: between ``size`` and ``2 × size`` of the latest kept
    (two generations of 8-byte digests: ~15 MB at the default)."""

    def __init__(self, size: int = RECENT_RECORDS):
        self.size = size
        self.current: set[int] = set()
        self.previous: set[int] = set()

    def seen(self, key: bytes) -> bool:
        """Whether ``key`` was seen lately; remembers it either way."""
        digest = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
        if digest in self.current or digest in self.previous:
            return True
        if len(self.current) >= self.size:
            self.previous, self.current = self.current, set()
        self.current.add(digest)
        return False


class OtlpAdapter:
    """Turns export requests into events; remembers which sessions it announced
    and which records it took lately (a resent batch is taken once)."""

    def __init__(self, peer: str = "unknown"):
        self.peer = peer
        self.known: OrderedDict[str, None] = OrderedDict()
        self.ignored = 0  # records that were no agent event
        self.duplicates = 0  # records resent: taken the first time only
        self.recent = RecentIds()
        #: Per session, the (trace id, span id) its records came with lately (hex).
        self.traces: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.failed = otlp_spans.FailedCalls()

    # -- logs -----------------------------------------------------------------------------

    def logs(self, request: Any) -> tuple[list[Event], int, list[Problem]]:
        """(events, rejected records, problems) of an ``ExportLogsServiceRequest``."""
        records: list[_Keyed] = []
        rejected = 0
        problems: list[Problem] = []
        for resource_logs in request.resource_logs:
            where = Where(attributes(resource_logs.resource.attributes), self.peer)
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    name = ""
                    try:
                        attrs = attributes(record.attributes)
                        name = (
                            attrs.get("event.name")
                            or record.event_name
                            or (
                                record.body.string_value
                                if record.body.WhichOneof("value") == "string_value"
                                else ""
                            )
                        )
                        native = self._log_record(str(name), attrs, record, where)
                        if native:
                            self._trace(native[0]["session"], record.trace_id, record.span_id)
                            order = (
                                native[0]["session"],
                                _number(attrs.get("event.sequence")) or 0.0,
                                record.time_unix_nano or record.observed_time_unix_nano,
                            )
                    except BAD_RECORD as exc:
                        rejected += 1
                        problems.append(Problem(where.source, None, f"{name or 'log record'}: {_why(exc)}"))
                        continue
                    if not native:
                        self.ignored += 1
                        continue
                    if self.recent.seen(where.source.encode() + record.SerializeToString()):
                        self.duplicates += 1
                        continue
                    records.append((order, native, where))
        records.sort(key=lambda item: item[0])
        events, bad = self._decode(records, problems)
        return events, rejected + bad, problems

    def _log_record(
        self, name: str, attrs: dict[str, Any], record: Any, where: Where
    ) -> list[dict[str, Any]]:
        short = name.rsplit(".", 1)[-1] if name.startswith(("claude_code.", "codex.")) else name
        agent = "codex" if name.startswith("codex.") or "conversation.id" in attrs else "claude-code"
        wanted = (
            ("user_prompt", "tool_result", *otlp_waits.CODEX_EVENTS)
            if agent == "codex"
            else (
                "user_prompt",
                "tool_result",
                "api_request",
                "compaction",
                otlp_waits.DECISION,
                *otlp_claude.EVENTS,
            )
        )
        if short not in wanted:
            return []
        if agent == "codex":
            raw_session = attrs.get("conversation.id") or attrs.get("session.id")
        else:
            raw_session = attrs.get("session.id") or attrs.get("conversation.id")
        session = where.session(raw_session)
        if session is None:
            raise RecordError("no session.id / conversation.id attribute")
        nanos = record.time_unix_nano or record.observed_time_unix_nano
        stamp = attrs.get("event.timestamp")
        ts: Any = stamp if isinstance(stamp, str) and stamp else (nanos / 1e9 if nanos else None)
        base = {"session": session, "ts": ts}
        if short == "user_prompt":
            prompt = attrs.get("prompt")
            return [
                {
                    "type": "message",
                    **base,
                    "role": "user",
                    "content": prompt if isinstance(prompt, str) else "",
                }
            ]
        if short == "api_request":
            return [_usage_record(attrs, base)]
        if short == "compaction":
            return [{"type": "compaction", **base}]
        if short in otlp_claude.EVENTS:
            return otlp_claude.records(short, attrs, base)
        if short == otlp_waits.DECISION:
            return otlp_waits.decision_records(attrs, base)
        if short in otlp_waits.CODEX_EVENTS:
            return otlp_waits.elicitation_records(short, attrs, base)
        return _tool_records(attrs, base, nanos)

    # -- spans ------------------------------------------------------------------------------

    def spans(self, request: Any) -> tuple[list[Event], int, list[Problem]]:
        """(events, rejected spans, problems) of an ``ExportTraceServiceRequest``."""
        records: list[_Keyed] = []
        rejected = 0
        problems: list[Problem] = []
        self._note_failures(request)
        for resource_spans in request.resource_spans:
            where = Where(attributes(resource_spans.resource.attributes), self.peer)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    try:
                        native = self._span(span, where)
                    except BAD_RECORD as exc:
                        rejected += 1
                        problems.append(Problem(where.source, None, f"span {span.name[:80]!r}: {_why(exc)}"))
                        continue
                    if not native:
                        self.ignored += 1
                        continue
                    self._trace(native[0]["session"], span.trace_id, span.span_id)
                    ids = span.trace_id + span.span_id  # unique per span, by the specification
                    if self.recent.seen(b"span:" + ids if len(ids) == 24 else span.SerializeToString()):
                        self.duplicates += 1
                        continue
                    records.append(((native[0]["session"], native[0]["ts"]), native, where))
        records.sort(key=lambda item: item[0])
        events, bad = self._decode(records, problems)
        return events, rejected + bad, problems

    def _note_failures(self, request: Any) -> None:
        """Remember the failed ``claude_code.tool.execution`` spans of a request
        first: their parent ``claude_code.tool`` span may come before them in it."""
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if span.name == otlp_spans.CLAUDE_EXECUTION:
                        try:
                            self.failed.note(attributes(span.attributes))
                        except BAD_RECORD:
                            pass  # its parent then counts as a success: the span is not the call

    def _trace(self, session: str, trace_id: bytes, span_id: bytes) -> None:
        if len(trace_id) != 16 or not any(trace_id):
            return
        self.traces[session] = (trace_id.hex(), span_id.hex() if len(span_id) == 8 else "")
        self.traces.move_to_end(session)
        if len(self.traces) > MAX_KNOWN_SESSIONS:
            self.traces.popitem(last=False)

    def _span(self, span: Any, where: Where) -> list[dict[str, Any]]:
        """A GenAI ``execute_tool`` span as a call and its result, Claude Code's and
        OpenInference's spans as :mod:`monitor.formats.otlp_spans` reads them; [] for other spans."""
        attrs = attributes(span.attributes)
        if attrs.get("gen_ai.operation.name") != "execute_tool" and not (
            span.name.startswith("execute_tool") and "gen_ai.tool.name" in attrs
        ):
            if span.name != otlp_waits.CLAUDE_BLOCKED and not otlp_spans.is_agent_span(span, attrs):
                return []
            session = where.session(attrs.get("session.id") or span.trace_id.hex())
            if session is None:
                raise RecordError("no session.id and no trace id")
            if span.name == otlp_waits.CLAUDE_BLOCKED:
                return otlp_waits.blocked_records(span, attrs, session)
            if span.name == otlp_spans.CLAUDE_TOOL:
                native = otlp_spans.claude_tool(span, attrs, session, self.failed, attributes)
            else:
                native = otlp_spans.openinference(span, attrs, session)
            for item in native:
                if item["type"] == "tool_call":
                    item["args"] = _arguments(item["args"])
                elif item["type"] in ("tool_result", "message"):
                    item["content"] = _text(item["content"])
            return native
        tool = attrs.get("gen_ai.tool.name")
        if not isinstance(tool, str) or not tool:
            raise RecordError("no gen_ai.tool.name")
        session = where.session(attrs.get("gen_ai.conversation.id") or span.trace_id.hex())
        call_id = str(attrs.get("gen_ai.tool.call.id") or span.span_id.hex())
        start = span.start_time_unix_nano / 1e9
        end = (span.end_time_unix_nano or span.start_time_unix_nano) / 1e9
        failed = span.status.code == _STATUS_ERROR or bool(attrs.get("error.type"))
        result = attrs.get("gen_ai.tool.call.result")
        content = (
            _text(result) if result is not None else (span.status.message or _text(attrs.get("error.type")))
        )
        common = {"session": session, "id": call_id}
        return [
            {
                "type": "tool_call",
                **common,
                "ts": start,
                "name": tool,
                "args": _arguments(attrs.get("gen_ai.tool.call.arguments")),
            },
            {"type": "tool_result", **common, "ts": end, "content": content, "is_error": failed},
        ]

    # -- shared ------------------------------------------------------------------------------

    def _decode(self, records: list[_Keyed], problems: list[Problem]) -> tuple[list[Event], int]:
        """Native records → events, a record (a call and its result) at a time:
        one that does not decode is dropped whole and counted, its neighbours kept."""
        events: list[Event] = []
        bad = 0
        decoders: dict[str, NativeDecoder] = {}
        now = time.time()
        for _order, native, where in records:
            decoder = decoders.get(where.source)
            if decoder is None:
                decoder = decoders[where.source] = NativeDecoder(where.source, "otlp")
            session = native[0]["session"]
            decoded: list[Event] = []
            try:
                for item in native:
                    decoded.extend(decoder.decode(item, None, now))
            except BAD_RECORD as exc:
                bad += 1
                problems.append(Problem(where.source, None, f"{item.get('type')}: {_why(exc)}"))
                continue
            if session not in self.known:
                decoded[:0] = self._announce(session, native[0]["ts"], where, decoder, now)
            else:
                self.known.move_to_end(session)
            events.extend(decoded)
        return events, bad

    def _announce(
        self, session: str, ts: Any, where: Where, decoder: NativeDecoder, now: float
    ) -> list[Event]:
        """The ``session_start`` of a session this adapter has not announced yet."""
        self.known[session] = None
        if len(self.known) > MAX_KNOWN_SESSIONS:
            self.known.popitem(last=False)
        service = where.service
        agent = (
            "codex"
            if service.startswith("codex")
            else ("claude-code" if service.startswith("claude") else service)
        )
        start = {
            "type": "session_start",
            "session": session,
            "ts": ts,
            "agent": agent,
            "meta": {"origin": "otlp", "service": service, "host": where.host},
        }
        try:
            return decoder.decode(start, None, now)
        except BAD_RECORD:
            return []


#: What one bad record may raise while it is read (never the whole request's loss).
BAD_RECORD = (RecordError, ValueError, TypeError, OverflowError, RecursionError, KeyError)


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    if isinstance(exc, RecordError):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _int(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


__all__ = ["OtlpAdapter", "any_value", "attributes"]
