"""Agent spans besides GenAI ``execute_tool``: Claude Code's and OpenInference's.

* **Claude Code** (``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1``, ``OTEL_TRACES_EXPORTER``):
  a ``claude_code.tool`` span per call (``tool_name``, ``tool_use_id``; with
  ``OTEL_LOG_TOOL_DETAILS=1`` ``full_command`` / ``file_path`` and, under
  detailed tracing, ``tool_input``) whose ``tool.output`` span event holds
  the output (``output`` for Bash, MCP and web tools, ``content`` for Read and
  Write, ``diff`` for Edit; ``OTEL_LOG_TOOL_CONTENT=1``).  The call's failure
  is on its child ``claude_code.tool.execution`` span (``success``,
  ``error``), which ends first: failed children are remembered by call id
  until their parent comes (:class:`FailedCalls`).  Session: ``session.id``.
* **OpenInference** (Arize Phoenix's conventions): a span with
  ``openinference.span.kind`` ``TOOL`` is a call (``tool.name``,
  ``input.value`` as its arguments, ``output.value`` as its result, an ERROR
  status as a failure); an ``LLM`` span's plain-text output messages
  (``llm.output_messages.<i>.message.role`` / ``.message.content``) are
  assistant messages.  Session: ``session.id``, else the trace.

Each function returns the native records of one span ([] for a span that is
no agent event); :mod:`monitor.formats.otlp` decodes and orders them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

CLAUDE_TOOL = "claude_code.tool"
CLAUDE_EXECUTION = "claude_code.tool.execution"
#: What Claude Code writes in place of content it was not allowed to log.
REDACTED = "<REDACTED>"
_STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR
#: Failed executions remembered until their ``claude_code.tool`` span comes.
MAX_FAILED = 4096


class FailedCalls:
    """Call ids whose ``claude_code.tool.execution`` span failed, with why (bounded)."""

    def __init__(self, size: int = MAX_FAILED):
        self.size = size
        self.why: OrderedDict[str, str] = OrderedDict()

    def note(self, attrs: dict[str, Any]) -> None:
        call_id = attrs.get("tool_use_id") or attrs.get("gen_ai.tool.call.id")
        if not call_id or str(attrs.get("success", "")).lower() != "false":
            return
        why = attrs.get("error") or attrs.get("error_class") or "failed"
        self.why[str(call_id)] = str(why)
        if len(self.why) > self.size:
            self.why.popitem(last=False)

    def pop(self, call_id: str) -> str | None:
        return self.why.pop(call_id, None)


def _plain(value: Any) -> str | None:
    """Logged text, None when absent or redacted."""
    if isinstance(value, str) and value and value != REDACTED:
        return value
    return None


def _claude_args(attrs: dict[str, Any], output: dict[str, Any]) -> Any:
    """A Claude Code tool span's arguments: ``tool_input``, else what the details name."""
    raw = _plain(attrs.get("tool_input"))
    if raw is not None:
        return raw
    args: dict[str, Any] = {}
    command = _plain(attrs.get("full_command")) or _plain(output.get("bash_command"))
    if command is not None:
        args["command"] = command
    path = _plain(attrs.get("file_path")) or _plain(output.get("file_path"))
    if path is not None:
        args["file_path"] = path
    return args


def claude_tool(
    span: Any, attrs: dict[str, Any], session: str, failed: FailedCalls, event_attrs: Any
) -> list[dict[str, Any]]:
    """A ``claude_code.tool`` span as a call and its result."""
    tool = attrs.get("tool_name")
    if not isinstance(tool, str) or not tool:
        return []
    call_id = str(attrs.get("tool_use_id") or attrs.get("gen_ai.tool.call.id") or span.span_id.hex())
    output: dict[str, Any] = {}
    for event in span.events:
        if event.name == "tool.output":
            output = event_attrs(event.attributes)
            break
    content = next(
        (
            text
            for text in (
                _plain(output.get("output")),
                _plain(output.get("content")),
                _plain(output.get("diff")),
                _plain(attrs.get("new_context")),
            )
            if text is not None
        ),
        None,
    )
    error = failed.pop(call_id)
    common = {"session": session, "id": call_id}
    return [
        {
            "type": "tool_call",
            **common,
            "ts": span.start_time_unix_nano / 1e9,
            "name": tool,
            "args": _claude_args(attrs, output),
        },
        {
            "type": "tool_result",
            **common,
            "ts": (span.end_time_unix_nano or span.start_time_unix_nano) / 1e9,
            "content": content if content is not None else (error or ""),
            "is_error": error is not None,
        },
    ]


def openinference(span: Any, attrs: dict[str, Any], session: str) -> list[dict[str, Any]]:
    """An OpenInference TOOL span as a call and its result, an LLM span as its messages."""
    kind = attrs.get("openinference.span.kind")
    end = (span.end_time_unix_nano or span.start_time_unix_nano) / 1e9
    if kind == "LLM":
        return [
            {"type": "message", "session": session, "ts": end, "role": "assistant", "content": text}
            for text in _llm_output(attrs)
        ]
    if kind != "TOOL":
        return []
    tool = attrs.get("tool.name")
    if not isinstance(tool, str) or not tool:
        return []
    call_id = str(attrs.get("tool_call.id") or span.span_id.hex())
    failed = span.status.code == _STATUS_ERROR
    output = attrs.get("output.value")
    content = output if isinstance(output, str) else ("" if output is None else str(output))
    common = {"session": session, "id": call_id}
    return [
        {
            "type": "tool_call",
            **common,
            "ts": span.start_time_unix_nano / 1e9,
            "name": tool,
            "args": attrs.get("input.value"),
        },
        {
            "type": "tool_result",
            **common,
            "ts": end,
            "content": content or (span.status.message if failed else ""),
            "is_error": failed,
        },
    ]


def _llm_output(attrs: dict[str, Any]) -> list[str]:
    """The plain-text assistant output messages of an OpenInference LLM span, in order."""
    texts = []
    for index in range(64):  # a response has a few messages; the bound keeps a hostile span cheap
        prefix = f"llm.output_messages.{index}.message."
        role = attrs.get(prefix + "role")
        if role is None:
            break
        text = _plain(attrs.get(prefix + "content"))
        if role == "assistant" and text is not None:
            texts.append(text)
    if not texts and attrs.get("output.mime_type") == "text/plain":
        text = _plain(attrs.get("output.value"))
        if text is not None:
            texts.append(text)
    return texts


def is_agent_span(span: Any, attrs: dict[str, Any]) -> bool:
    """Whether this module reads ``span`` (Claude Code's tool span, an OpenInference span)."""
    return span.name == CLAUDE_TOOL or "openinference.span.kind" in attrs


__all__ = ["CLAUDE_EXECUTION", "CLAUDE_TOOL", "FailedCalls", "claude_tool", "is_agent_span", "openinference"]
