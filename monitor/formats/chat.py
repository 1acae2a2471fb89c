"""Chat-message lists: OpenAI chat-completions and Anthropic Messages logs.

The lingua franca of home-made agents, LiteLLM logs and many frameworks is the
list of messages sent to the model.  Three containers are read:

* a JSON document ``{"messages": [...], ...}`` (mini-swe-agent's
  ``*.traj.json``; ``info``, ``instance_id`` and ``trajectory_format`` beside
  it) -- see :mod:`monitor.formats.documents`;
* a bare JSON array of messages;
* JSONL, one message a line (the ``chat`` line format, sniffed from a record
  with a ``role`` and no ``type``).

Two shapes of message, which may be mixed:

| message                                             | events                         |
|-----------------------------------------------------|--------------------------------|
| ``assistant`` ``tool_calls[{id, function{name, arguments}}]`` (arguments a JSON string) | ``tool_call`` each |
| ``tool`` with ``tool_call_id``                       | ``tool_result``                |
| ``assistant`` ``function_call`` / ``function`` (legacy OpenAI) | ``tool_call`` / ``tool_result`` |
| ``assistant`` content block ``tool_use{id, name, input}`` | ``tool_call``             |
| ``user`` content block ``tool_result{tool_use_id, content, is_error}`` | ``tool_result`` |
| text (a string, or ``text`` blocks)                  | ``message`` of that role       |

mini-swe-agent writes two shapes.  ``mini-swe-agent-1.1`` is the OpenAI one,
with ``tool`` messages whose text is ``<returncode>N</returncode><output>…``.
The classic ``mini-swe-agent-1`` has no ``tool_calls``: the action is the one
```bash fenced block of the assistant's text (after ``THOUGHT:``), and the
observation is the next ``user`` message starting ``<returncode>`` (its
text-based v2 fences the action as ```mswea_bash_command instead).  Both
become calls (tool ``bash``, args ``{"command": …}``) and results; the exit
status comes from ``<returncode>`` (``meta["exit_code"]``, ``is_error`` when
nonzero) and the result's text is what ``<output>`` held.  The harness's own
later ``user`` messages (format errors, timeouts) are ``system`` messages, not
the person: a timeout answers the pending call as a failed result.  So are
``user`` messages with an ``extra.interrupt_type`` (mini-swe-agent 2's
``FormatError`` …); its final ``exit`` message (the submission) is skipped.

Times come from ``timestamp`` / ``extra.timestamp`` (or the provider's
``extra.response.created``); a message without one keeps the previous time (the reader's clock until
a message has one).
Token counts come from ``usage`` / ``extra.response.usage``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
#: mini-swe-agent's action: exactly one such block is executed.
_BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"\s*<returncode>\s*(-?\d+)\s*</returncode>\s*", re.DOTALL)
_OUTPUT = re.compile(r"\A<output>\n?(.*?)\n?</output>\s*\Z", re.DOTALL)
_TIMEOUT = re.compile(r"\A\s*The last command <command>.*?</command> timed out", re.DOTALL)


def _dict(value: Any, default: dict[str, Any] | None = None) -> dict[str, Any]:
    """``value`` if it is an object, else ``default`` (an empty one)."""
    if isinstance(value, dict):
        return value
    return {} if default is None else default


#: ``event(kind, **fields)``: an Event of the record being decoded.
_MakeEvent = Callable[..., Event]


def content_text(value: Any) -> str:
    """The text of a message's content: a string, or the ``text`` of its blocks."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    text = value.get("text") if isinstance(value, dict) else None
    if isinstance(text, str):
        return text
    return str(value)


def observation(text: str) -> tuple[str, int | None]:
    """mini-swe-agent's ``<returncode>N</returncode><output>…</output>``: the
    output and the exit status (``None`` when the text is not of that shape)."""
    match = _RETURNCODE.match(text)
    if match is None:
        return text, None
    rest = text[match.end() :]
    inner = _OUTPUT.match(rest)
    return (inner.group(1) if inner else rest), int(match.group(1))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class ChatDecoder(RecordDecoder):
    """Decoder of chat messages, one record a message (a line, or a list item)."""

    name = "chat"
    #: A lone ```bash block in an assistant's text is an action (mini-swe-agent's);
    #: False for agents whose text only quotes commands.
    fenced_actions = True

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.session = default_session
        self.ts: float | None = None
        self.timed = False
        #: The classic mini-swe-agent call waiting for its observation.
        self.pending: str | None = None
        #: Seen a fenced action: later harness ``user`` messages are not the person.
        self.fenced = False
        self.tools: dict[str, str] = {}
        self.actions = 0

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        return (
            "type" not in record
            and record.get("role") in ROLES
            and ("content" in record or "tool_calls" in record)
        )

    def _time(self, record: dict[str, Any], now: float) -> float:
        extra = _dict(record.get("extra"))
        value = record.get("timestamp", extra.get("timestamp"))
        if value is None:
            response = extra.get("response")
            if isinstance(response, dict):
                value = response.get("created")
        if value is not None:
            self.ts = parse_ts(value, now, "timestamp")
            self.timed = True
        elif not self.timed:  # no time anywhere yet: the reader's clock
            self.ts = now
        return self.ts if self.ts is not None else now

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        role = record.get("role")
        if role == "exit" and "type" not in record:
            self.skip(
                "exit"
            )  # mini-swe-agent 2's last message: the submission (info.exit_status ends the run)
            return []
        if not isinstance(role, str) or role not in ROLES:
            raise RecordError(f"message: expected a role ({', '.join(sorted(ROLES))}), got {role!r}")
        ts = self._time(record, now)

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

        content = record.get("content")
        if role in ("tool", "function"):
            call_id = record.get("tool_call_id")
            if role == "function" and isinstance(record.get("name"), str):
                call_id = f"function:{record['name']}"  # the legacy function_call's answer
            if not isinstance(call_id, str) or not call_id:
                raise RecordError("tool message without tool_call_id")
            return [self._result(event, call_id, content_text(content), record.get("is_error"))]
        if role == "assistant":
            return self._assistant(event, record, content, line)
        if role == "user" and _dict(record.get("extra")).get("interrupt_type"):
            role = "harness"  # mini-swe-agent 2: its format errors and limits, not the person
        return self._user(event, role, content)

    def _result(self, event: _MakeEvent, call_id: str, text: str, is_error: Any = None) -> Event:
        output, code = observation(text)
        error = bool(is_error) if isinstance(is_error, bool) else code not in (None, 0)
        meta: dict[str, Any] = {} if code is None else {"exit_code": code}
        return event(
            Kind.TOOL_RESULT,
            call_id=call_id,
            content=output,
            is_error=error,
            tool=self.tools.pop(call_id, None),
            meta=meta,
        )

    def _assistant(
        self, event: _MakeEvent, record: dict[str, Any], content: Any, line: int | None
    ) -> list[Event]:
        out: list[Event] = []
        calls: list[Event] = []
        legacy = record.get("function_call")  # OpenAI's single call before tool_calls
        tool_calls = list(record.get("tool_calls") or ())
        if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
            tool_calls.append({"id": f"function:{legacy['name']}", "function": legacy})
        for call in tool_calls:
            if not isinstance(call, dict):
                continue
            calls.append(self._openai_call(event, call))
        texts: list[str] = []
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_use" and isinstance(block.get("name"), str):
                    self.actions += 1
                    call_id = str(block.get("id") or f"use-{self.actions}")
                    args = _dict(block.get("input"))
                    self.tools[call_id] = block["name"]
                    calls.append(event(Kind.TOOL_CALL, tool=block["name"], args=args, call_id=call_id))
                elif isinstance(block.get("text"), str):
                    texts.append(block["text"])
                else:
                    self.skip(f"assistant:{kind}")  # thinking, images, unknown blocks
        else:
            texts.append(content_text(content))
        text = "\n".join(t for t in texts if t)
        if not calls and not tool_calls and self.fenced_actions:
            actions = _BASH_BLOCK.findall(text)
            if len(actions) == 1:  # mini-swe-agent runs exactly one, else it answers a format error
                self.fenced = True
                command = actions[0].strip()
                self.actions += 1
                call_id = f"action-{self.actions}"
                self.pending = call_id
                self.tools[call_id] = "bash"
                text = _BASH_BLOCK.sub("", text).strip()
                calls.append(event(Kind.TOOL_CALL, tool="bash", args={"command": command}, call_id=call_id))
        if text.strip():
            out.append(event(Kind.MESSAGE, role="assistant", content=text))
        out.extend(calls)
        usage = self._usage(event, record)
        if usage is not None:
            out.append(usage)
        return out

    def _openai_call(self, event: _MakeEvent, call: dict[str, Any]) -> Event:
        """One of an assistant message's ``tool_calls`` (or its legacy ``function_call``)."""
        function = _dict(call.get("function"), call)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise RecordError("tool_calls: a call without function.name")
        raw = function.get("arguments")
        args: Any = raw
        if isinstance(raw, str):
            try:
                args = orjson.loads(raw) if raw.strip() else {}
            except orjson.JSONDecodeError:
                args = {"arguments": raw}
        if not isinstance(args, dict):
            args = {"arguments": args}
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        if call_id is None:
            self.actions += 1
            call_id = f"call-{self.actions}"
        self.tools[call_id] = name
        return event(Kind.TOOL_CALL, tool=name, args=args, call_id=call_id)

    def _usage(self, event: _MakeEvent, record: dict[str, Any]) -> Event | None:
        usage = record.get("usage")
        extra = record.get("extra")
        response = extra.get("response") if isinstance(extra, dict) else None
        if not isinstance(usage, dict) and isinstance(response, dict):
            usage = response.get("usage")
        if not isinstance(usage, dict):
            return None
        tokens_in = _number(usage.get("prompt_tokens", usage.get("input_tokens")))
        tokens_out = _number(usage.get("completion_tokens", usage.get("output_tokens")))
        cost = _number(usage.get("cost"))
        if tokens_in is None and tokens_out is None and cost is None:
            return None
        # The model and the cached part of the input (within prompt_tokens), to price it by.
        meta: dict[str, Any] = {}
        model = record.get("model") or (response.get("model") if isinstance(response, dict) else None)
        if isinstance(model, str) and model:
            meta["model"] = model
        details = usage.get("prompt_tokens_details")
        cached = _number(details.get("cached_tokens")) if isinstance(details, dict) else None
        if cached:
            meta["cached_input_tokens"] = int(cached)
        return event(
            Kind.USAGE,
            input_tokens=None if tokens_in is None else int(tokens_in),
            output_tokens=None if tokens_out is None else int(tokens_out),
            cost_usd=cost,
            meta=meta,
        )

    def _user(self, event: _MakeEvent, role: str, content: Any) -> list[Event]:
        out: list[Event] = []
        texts: list[str] = []
        if isinstance(content, list):
            for block in content:
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_result"
                    and block.get("tool_use_id")
                ):
                    out.append(
                        self._result(
                            event,
                            str(block["tool_use_id"]),
                            content_text(block.get("content")),
                            block.get("is_error"),
                        )
                    )
                elif isinstance(block, dict) and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif isinstance(block, str):
                    texts.append(block)
        else:
            texts.append(content_text(content))
        text = "\n".join(t for t in texts if t)
        if self.pending is not None and role == "user" and not out:
            if _RETURNCODE.match(text):
                out.append(self._result(event, self.pending, text))
                self.pending = None
                return out
            if _TIMEOUT.match(text):
                call_id, self.pending = self.pending, None
                return [self._result(event, call_id, text, True)]
        self.pending = None
        if text.strip():
            # After the first fenced action, mini-swe-agent's user turns are its harness talking.
            speaker = "system" if (role != "user" or self.fenced) else "user"
            out.append(event(Kind.MESSAGE, role=speaker, content=text))
        return out


register_line_format(ChatDecoder)
