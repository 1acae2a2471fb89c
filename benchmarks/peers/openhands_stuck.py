"""OpenHands' StuckDetector (openhands-sdk), unmodified, over runs exported by run_peers.py.

Runs under the peers' own Python (3.12+, `benchmarks/peers/setup.sh`), not loopwatch's.  Reads the
neutral event stream of run_peers.py on stdin (one JSON object a line: session, line, kind, tool, args,
text, is_error, role) and writes one JSON object a line for every event after which
`StuckDetector.is_stuck()` is true: {"session", "line"}.

The adapter is the only new code: each call becomes an `ActionEvent` whose action carries the tool name
and its arguments, each result an `ObservationEvent` with the result text, each message a `MessageEvent`.
The detector sees the window the SDK gives it (`active_branch(limit=20)`), as in a live conversation.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from openhands.sdk.conversation.stuck_detector import StuckDetector
from openhands.sdk.event import ActionEvent, MessageEvent, ObservationEvent
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.tool.schema import Action, Observation


class ToolAction(Action):
    """A tool call as the agent made it: the tool and its arguments (JSON text)."""

    tool: str
    arguments: str


class ToolObservation(Observation):
    """A tool's result: its text (in ``content``) and whether it failed (``is_error``)."""


class History:
    """The stand-in for ConversationState: only what StuckDetector reads."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def active_branch(self, limit: int | None = None) -> list[Any]:
        return self.events[-limit:] if limit else list(self.events)


def to_event(record: dict[str, Any], calls: dict[str, str]) -> Any | None:
    kind = record["kind"]
    if kind == "tool_call":
        call_id = record.get("id") or f"call-{record['line']}"
        arguments = json.dumps(record.get("args") or {}, sort_keys=True)
        calls[call_id] = record["tool"]
        return ActionEvent(
            thought=[TextContent(text=record.get("thought") or "")],
            action=ToolAction(tool=record["tool"], arguments=arguments),
            tool_name=record["tool"],
            tool_call_id=call_id,
            tool_call=MessageToolCall(
                id=call_id, name=record["tool"], arguments=arguments, origin="completion"
            ),
            llm_response_id=f"r-{record['line']}",
        )
    if kind == "tool_result":
        call_id = record.get("id") or ""
        tool = calls.get(call_id, record.get("tool") or "tool")
        observation = ToolObservation.from_text(
            record.get("text") or "", is_error=bool(record.get("is_error"))
        )
        return ObservationEvent(
            observation=observation, tool_name=tool, tool_call_id=call_id or "unknown", action_id="a"
        )
    if kind == "message" and record.get("role") in ("user", "assistant"):
        source = "user" if record["role"] == "user" else "agent"
        role = "user" if source == "user" else "assistant"
        message = Message(role=role, content=[TextContent(text=record.get("text") or "")])
        return MessageEvent(source=source, llm_message=message)
    return None


def main() -> int:
    histories: dict[str, History] = {}
    calls: dict[str, dict[str, str]] = {}
    for raw in sys.stdin:
        record = json.loads(raw)
        session = record["session"]
        history = histories.setdefault(session, History())
        event = to_event(record, calls.setdefault(session, {}))
        if event is None:
            continue
        history.events.append(event)
        if StuckDetector(history).is_stuck():  # type: ignore[arg-type]
            print(json.dumps({"session": session, "line": record["line"]}), flush=False)
    return 0


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    raise SystemExit(main())
