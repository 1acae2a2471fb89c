"""Cline / Roo Code asks in ``ui_messages.json``: a task waiting for the person.

Cline keeps what its chat panel shows in ``tasks/<id>/ui_messages.json``, a
list of ``ClineMessage`` (``{ts, type: "ask" | "say", ask?, say?, text?,
partial?}``, ``ts`` in epoch milliseconds).  When the agent needs the person
it appends an ``ask`` record and waits for the answer (cline/cline
``apps/vscode/src/shared/ExtensionMessage.ts``, ``ClineAsk`` and ``TurnPhase``;
``apps/vscode/src/sdk/sdk-interaction-coordinator.ts`` awaits the approval or
question it appended; Roo Code's ``packages/types/src/message.ts`` sorts the same
asks as interactive, idle, resumable and non-blocking).  An ask that waits is a ``waiting`` event (why, and what
it asks, in :data:`WAITING_ASKS`), at the ask's time; the record after it (a
``say``, the answer, another ask) is a ``resolved`` ``waiting`` event at that
record's time.  ``command_output`` does not wait (the command runs; its button
only lets the agent go on meanwhile), nor does an ask still ``partial``
(streamed, not shown with its buttons yet).  An auto-approved call is a
``say``, not an ask, and waits for nobody.

The ``line`` of an event is the 1-based place of its record in the list, so
that the document follower (:mod:`monitor.sources.documents`) hands on each
once.  The session is the task's folder name, as for its history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem
from monitor.formats.cline import AGENT, UI

#: What is shown of what an ask asks (characters; as ``monitor.detect.input_wait.MAX_ASKS``).
MAX_ASKS = 300
#: The asks that wait for the person, and why (``waiting_why``).
WAITING_ASKS: dict[str, str] = {
    # TurnPhase "awaiting_approval": a tool, command, MCP, browser or subagent approval.
    "tool": "permission",
    "command": "permission",
    "browser_action_launch": "permission",
    "use_mcp_server": "permission",
    "use_subagents": "permission",
    # "awaiting_followup": a question, a plan or an answer to respond to.
    "followup": "question",
    "plan_mode_respond": "question",
    "act_mode_respond": "question",
    "new_task": "question",
    "condense": "question",
    "summarize_task": "question",
    "report_bug": "question",
    # "error" (retry?) and "resumable" (resume?): nothing goes on until the person says.
    "api_req_failed": "input",
    "mistake_limit_reached": "input",
    "resume_task": "input",
    "resume_completed_task": "input",
    "auto_approval_max_req_reached": "input",  # Roo Code: its auto-approval limit reached
    # "completed": the task is done; the agent waits for feedback or a new task.
    "completion_result": "idle",
}
#: The keys of a JSON ask text that say what it asks, in order of preference.
_SAYS = ("question", "command", "path", "url", "serverName", "prompts", "content")


def is_ui(path: Path | str) -> bool:
    """Whether ``path`` is a Cline task's ``ui_messages.json``."""
    return Path(path).name == UI


def session_of(path: Path) -> str:
    """The task's id (its folder's name), the session its history also names."""
    return path.parent.name or "cline"


def load(path: Path, session: str | None = None) -> tuple[list[Event], list[Problem]]:
    """The waits in one ``ui_messages.json``; ``OSError`` propagates."""
    source = str(path)
    raw = path.read_bytes()
    try:
        records = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return [], [Problem(source, None, f"invalid JSON: {exc}")]
    if not isinstance(records, list):
        return [], [
            Problem(source, None, f"expected a JSON list of UI messages, got {type(records).__name__}")
        ]
    return waits(records, source, session or session_of(path))


def waits(records: list[Any], source: str, session: str) -> tuple[list[Event], list[Problem]]:
    """A ``waiting`` event for each ask that waits, and a ``resolved`` one at the record after it."""
    events: list[Event] = []
    problems: list[Problem] = []
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            problems.append(Problem(source, index + 1, f"expected a UI message, got {type(record).__name__}"))
            continue
        if record.get("type") != "ask":
            continue
        why = WAITING_ASKS.get(str(record.get("ask")))
        if why is None or record.get("partial") is True:
            continue
        line = index + 1
        ts = _seconds(record.get("ts"))
        if ts is None:
            problems.append(Problem(source, line, f"ask {record.get('ask')!r}: ts is not a time"))
            continue
        asks = what_it_asks(str(record["ask"]), record.get("text"))
        events.append(_waiting(session, ts, source, line, why, asks))
        if index + 1 < len(records):
            after = records[index + 1]
            answered = _seconds(after.get("ts")) if isinstance(after, dict) else None
            events.append(_waiting(session, max(answered or ts, ts), source, line + 1, "resolved", ""))
    return events, problems


def what_it_asks(ask: str, text: Any) -> str:
    """What an ask asks, clipped: its question, command, path or server (from a JSON
    text), else its text; the ask's name when it has none."""
    shown = text if isinstance(text, str) else ""
    if shown.lstrip().startswith("{"):
        try:
            parsed = orjson.loads(shown)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            shown = _from_json(parsed)
    shown = " ".join(shown.split())
    return (shown or ask)[:MAX_ASKS]


def _from_json(parsed: dict[str, Any]) -> str:
    """The words of a JSON ask text (``ClineSayTool``, ``ClineAskQuestion``, an MCP use)."""
    parts: list[str] = []
    tool = parsed.get("tool")
    if isinstance(tool, str):
        parts.append(tool)
    for key in _SAYS:
        value = parsed.get(key)
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str)), None)
        if isinstance(value, str) and value.strip():
            parts.append(value)
            break  # (the first says it: a file's content after its path would only be clipped)
    return " ".join(parts)


def _waiting(session: str, ts: float, source: str, line: int, status: str, asks: str) -> Event:
    return Event(
        kind=Kind.WAITING,
        session=session,
        ts=ts,
        source=source,
        line=line,
        agent=AGENT,
        status=status,
        content=asks,
    )


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value) / 1000.0
