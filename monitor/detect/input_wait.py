"""Waiting for input: a session blocked on the person is neither working nor looping.

A session *waits for input* from a ``waiting`` event (a hook's permission
prompt, question or elicitation: :mod:`monitor.hooks`) or a call to a tool
that asks the person (:data:`ASK_TOOLS`, e.g. Claude Code's
``AskUserQuestion``, as transcripts record it), until the next thing it does:
a tool call, a tool result, a message, its end, or a ``waiting`` event whose
status is ``resolved``.  Only an event that happened at or after the wait
began ends it, so a transcript's copy of the call that asked, read late,
does not.

:func:`follow` is the one rule; the engine (:mod:`monitor.detect.engine`)
and the hub (:mod:`monitor.hub.core`) both apply it.  The engine also
:func:`unhold`\\ s the time waited: the call made after the person answered
does not count that time as a wait of its own (the ``waiting`` detector's
budget, the repeat detectors' 20 s gap rule), so waiting for a person is
never counted against a loop threshold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from monitor.events import TOOL_CALL, USAGE, WAITING, Event

if TYPE_CHECKING:
    from monitor.detect.base import SessionView

#: Tools whose call waits for the person until its result (lower case): Claude Code's
#: ``AskUserQuestion`` and ``ExitPlanMode`` (the plan waits for approval), Codex's
#: ``request_user_input``, Gemini CLI's ``ask_user``, Cline's ``ask_followup_question``,
#: OpenCode's ``question``.
ASK_TOOLS = frozenset(
    {"askuserquestion", "exitplanmode", "request_user_input", "ask_user", "ask_followup_question", "question"}
)
#: A ``waiting`` event with this status ends the wait (the person answered).
RESOLVED = "resolved"
#: What is shown of the question (characters).
MAX_ASKS = 300


class InputWait(NamedTuple):
    """A session's wait: since when (event time), why, and what it asks."""

    since: float
    why: str  # "permission" | "question" | "elicitation" | "idle" | "input"
    asks: str


def _asks(event: Event) -> str:
    if event.kind is TOOL_CALL:
        args = event.args or {}
        questions = args.get("questions")
        if isinstance(questions, list) and questions and isinstance(questions[0], dict):
            text = questions[0].get("question")
            if isinstance(text, str):
                return text[:MAX_ASKS]
        for key in ("question", "prompt", "message", "plan"):
            value = args.get(key)
            if isinstance(value, str):
                return value[:MAX_ASKS]
        return f"{event.tool}"
    return " ".join(event.content.split())[:MAX_ASKS]


#: :func:`asks_the_person` by tool name (names repeat; the engine asks for every call).
_ASKING: dict[str, bool] = {}
_ASKING_NAMES = 4096


def asks_the_person(event: Event) -> bool:
    """Whether ``event`` is a call to a tool that waits for the person's answer."""
    if event.kind is not TOOL_CALL:
        return False
    tool = event.tool or ""
    asking = _ASKING.get(tool)
    if asking is None:
        asking = tool.lower() in ASK_TOOLS
        if len(_ASKING) < _ASKING_NAMES:
            _ASKING[tool] = asking
    return asking


def follow(wait: InputWait | None, event: Event) -> InputWait | None:
    """The session's wait after ``event`` (``wait``: before it)."""
    kind = event.kind
    if kind is WAITING:
        if event.status == RESOLVED:
            return None if wait is None or event.ts >= wait.since else wait
        why = event.status or "input"
        asks = _asks(event)
        if wait is not None:
            # Two notices of one wait (a permission prompt reported by two hooks): the first
            # time and question stand (PermissionRequest names the call, its Notification
            # only the tool), a real reason over "idle".
            return InputWait(wait.since, wait.why if why == "idle" else why, wait.asks or asks)
        return InputWait(event.ts, why, asks)
    if wait is not None and kind is not USAGE and event.ts >= wait.since:
        wait = None  # the session moved on: the person answered
    if asks_the_person(event):
        return InputWait(event.ts, "question", _asks(event))
    return wait


def unhold(view: SessionView, wait: InputWait, now: float) -> None:
    """The wait is over at ``now``: the time it took is not the agent's, so the
    latest call's time moves on by it (what :mod:`~monitor.detect.analysis.waits`
    measures a gap from)."""
    held = now - wait.since
    if held > 0 and view.last_call_ts and view.last_call_ts <= wait.since:
        view.last_call_ts = min(view.last_call_ts + held, now)
