"""OpenHands V1 events (the software-agent-sdk): one typed event a JSON object.

OpenHands V1 keeps a conversation as ``~/.openhands/conversations/<id>/events/
event-NNNNN-<uuid>.json``, one event a file (``base_state.json`` beside
``events/`` holds the conversation's settings); its API and the evaluation
harness give the same events as a JSON list.  Every event has ``kind``,
``id``, ``timestamp`` and ``source`` (``user`` / ``agent`` / ``environment``):

| ``kind``                 | events                                               |
|--------------------------|------------------------------------------------------|
| ``MessageEvent``         | a ``user`` or ``assistant`` message (``llm_message.content`` text) |
| ``ActionEvent``          | its ``thought`` text an assistant message, then a tool call: tool ``tool_name``, args ``action`` without its ``kind``, id ``tool_call_id`` |
| ``ObservationEvent``     | the result of the call ``tool_call_id``: ``observation.content`` text (or ``output``); an error when ``is_error`` / ``error`` or a positive ``exit_code`` (or ``metadata.exit_code``) |
| ``UserRejectObservation`` | a failed result of that call (the user refused it)  |
| ``AgentErrorEvent``      | a failed result of its call, else a system message   |
| ``Condensation``         | a compaction                                         |

``SystemPromptEvent``, ``ConversationStateUpdateEvent``, ``PauseEvent``,
``CondensationRequest`` and unknown kinds carry nothing to detect and are
counted as skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.events import Event, Kind
from monitor.formats.base import RecordError
from monitor.formats.chat import content_text
from monitor.formats.native import parse_ts

AGENT = "openhands"
#: Kinds read as a tool result.
_RESULT_KINDS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})
#: Kinds known to carry nothing a detector uses.
_QUIET_KINDS = frozenset(
    {
        "SystemPromptEvent",
        "ConversationStateUpdateEvent",
        "PauseEvent",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "TokenEvent",
    }
)
#: Tool names remembered for their results (bounded: a conversation can be endless).
_TOOL_MEMORY = 1024


def is_v1_event(item: Any) -> bool:
    """True for an OpenHands V1 event: an object whose ``kind`` names it and
    whose ``action`` / ``observation`` (if any) are objects, not V0's names."""
    return (
        isinstance(item, dict)
        and isinstance(item.get("kind"), str)
        and not isinstance(item.get("action"), str)
        and not isinstance(item.get("observation"), str)
    )


def blocks_text(value: Any) -> str:
    """The text of V1 content: a string, the ``text`` of its blocks, or of a content object."""
    if isinstance(value, dict):
        return blocks_text(value.get("content", value.get("text")))
    return content_text(value)


def _positive_code(observation: dict[str, Any]) -> int | None:
    """The observation's exit code (its own or its ``metadata``'s), if any."""
    for value in (observation.get("exit_code"), _get(observation.get("metadata"), "exit_code")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


class V1Reader:
    """Decodes the events of one V1 conversation, in order."""

    def __init__(self, source: str, session: str, skipped: dict[str, int] | None = None):
        self.source = source
        self.session = session
        self.ts: float | None = None
        self.skipped: dict[str, int] = {} if skipped is None else skipped
        self._tools: dict[str, str] = {}

    def _skip(self, what: str) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + 1

    def decode(self, item: dict[str, Any], line: int | None, now: float) -> list[Event]:
        """The events of one V1 event object; :class:`RecordError` if it is invalid."""
        kind = item.get("kind")
        if not isinstance(kind, str):
            raise RecordError("OpenHands event without a kind")
        if item.get("timestamp") is not None:
            self.ts = parse_ts(item.get("timestamp"), now, "timestamp")
        ts = self.ts if self.ts is not None else now

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

        if kind == "MessageEvent":
            return self._message(event, item)
        if kind == "ActionEvent":
            return self._action(event, item)
        if kind in _RESULT_KINDS:
            return self._result(event, kind, item)
        if kind == "Condensation":
            return [event(Kind.COMPACTION)]
        self._skip(kind if kind in _QUIET_KINDS else f"unknown:{kind[:40]}")
        return []

    def _message(self, event: Callable[..., Event], item: dict[str, Any]) -> list[Event]:
        message = item.get("llm_message")
        if not isinstance(message, dict):
            raise RecordError("MessageEvent: llm_message is not an object")
        text = blocks_text(message.get("content"))
        if not text.strip():
            return []
        origin = item.get("source")
        role = {"user": "user", "agent": "assistant"}.get(origin if isinstance(origin, str) else "", "system")
        return [event(Kind.MESSAGE, role=role, content=text)]

    def _action(self, event: Callable[..., Event], item: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        thought = blocks_text(item.get("thought")).strip()
        if thought:
            out.append(event(Kind.MESSAGE, role="assistant", content=thought))
        action = item.get("action")
        tool = item.get("tool_name")
        call_id = item.get("tool_call_id")
        if not isinstance(tool, str) or not tool:
            tool = action.get("kind") if isinstance(action, dict) else None
        if not isinstance(tool, str) or not tool:
            raise RecordError("ActionEvent: no tool_name")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"oh-{item.get('id')}"
        args = {k: v for k, v in action.items() if k != "kind"} if isinstance(action, dict) else {}
        if len(self._tools) >= _TOOL_MEMORY:
            self._tools.pop(next(iter(self._tools)))
        self._tools[call_id] = tool
        out.append(event(Kind.TOOL_CALL, tool=tool, args=args, call_id=call_id))
        return out

    def _result(self, event: Callable[..., Event], kind: str, item: dict[str, Any]) -> list[Event]:
        call_id = item.get("tool_call_id")
        observation = item.get("observation")
        observation = observation if isinstance(observation, dict) else {}
        if kind == "ObservationEvent":
            content = blocks_text(observation.get("content"))
            if not content and isinstance(observation.get("output"), str):
                content = observation["output"]
            code = _positive_code(observation)
            error = bool(observation.get("is_error")) or bool(observation.get("error"))
            is_error = error or (code is not None and code > 0)
        else:  # a rejection, or the agent's own error: the call failed
            content = blocks_text(item.get("rejection_reason") or item.get("error"))
            code, is_error = None, True
        if not isinstance(call_id, str) or not call_id:
            if kind == "AgentErrorEvent" and content.strip():
                return [event(Kind.MESSAGE, role="system", content=content)]
            raise RecordError(f"{kind}: no tool_call_id")
        meta: dict[str, Any] = {} if code is None else {"exit_code": code}
        return [
            event(
                Kind.TOOL_RESULT,
                call_id=call_id,
                content=content,
                is_error=is_error,
                tool=self._tools.pop(call_id, None),
                meta=meta,
            )
        ]
