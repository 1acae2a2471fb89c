"""Trae Agent trajectories (``trajectories/trajectory_<YYYYMMDD_HHMMSS>.json``).

Trae Agent (``bytedance/trae-agent``) records a run as one JSON document,
rewritten after every step (``trae_agent/utils/trajectory_recorder.py``)::

    {"task", "start_time", "end_time", "provider", "model", "max_steps",
     "llm_interactions": [...], "success", "final_result", "execution_time",
     "agent_steps": [{"step_number", "timestamp", "state",
        "llm_response": {"content", "model", "finish_reason",
                         "usage": {"input_tokens", "output_tokens"},
                         "tool_calls": [{"call_id", "name", "arguments"}]},
        "tool_calls": [...], "tool_results": [{"call_id", "success",
                                               "result", "error"}],
        "llm_messages": [{"role", "content", "tool_result"?}],
        "reflection", "error"}]}

A step's ``llm_messages`` are what the harness sent back after the step (the
next model call's input): the tool results, and the harness's own feedback.

| step                                    | events                                   |
|-----------------------------------------|------------------------------------------|
| ``llm_response.content``                | an assistant message                     |
| ``llm_response.usage``                  | usage                                    |
| ``tool_calls[]`` (else the response's)  | a tool call each (``call_id``, ``name``, ``arguments``) |
| ``tool_results[]`` / a ``tool_result`` in ``llm_messages`` | the result of that call; an error when ``success`` is false or ``error`` is set |
| a ``user`` text in ``llm_messages``     | the harness's answer: the failed result of the step's unanswered call (``task_done`` refused: "ERROR! Your Patch is empty…"), else a system message |
| ``error``                               | a system message                         |

``reflection`` (the harness restating failed results) is skipped (counted).
The ``task`` is the user's message; ``success`` / ``final_result`` end the
session.  The ``line`` of an event is the **1-based index of its step in**
``agent_steps[]``; its time the step's ``timestamp``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem, RecordError
from monitor.formats.native import parse_ts

AGENT = "trae-agent"
#: Keys a Trae trajectory's first bytes hold (the recorder writes them in this order).
_HEAD_KEYS = (b'"task"', b'"start_time"', b'"provider"', b'"max_steps"')

_MakeEvent = Callable[..., Event]


def looks_like_trajectory(head: bytes) -> bool:
    """True when a document's first bytes are a Trae Agent trajectory's."""
    text = head.lstrip()
    return text.startswith(b"{") and all(key in text for key in _HEAD_KEYS)


def is_trajectory(document: Any) -> bool:
    """True for a parsed Trae Agent trajectory."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("agent_steps"), list)
        and "task" in document
        and ("llm_interactions" in document or "max_steps" in document)
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


class _Run:
    """The state of one trajectory being read: its clock and which calls were answered."""

    def __init__(self, source: str, session: str, base: float):
        self.source = source
        self.session = session
        self.ts = base
        self.answered: set[str] = set()
        self.skipped: dict[str, int] = {}
        #: The previous step's ``llm_messages``: a finishing step records them again.
        self.previous: Any = None

    def event(self, kind: Kind, line: int | None, **fields: Any) -> Event:
        return Event(kind=kind, session=self.session, ts=self.ts, source=self.source, line=line, **fields)

    def step(self, step: dict[str, Any], index: int) -> list[Event]:
        if step.get("timestamp") is not None:
            self.ts = parse_ts(step["timestamp"], self.ts, "timestamp")
        response = _dict(step.get("llm_response"))
        out: list[Event] = []
        text = _text(response.get("content")).strip()
        if text:
            out.append(self.event(Kind.MESSAGE, index, role="assistant", content=text))
        usage = _dict(response.get("usage"))
        spent_in, spent_out = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
        if spent_in or spent_out:
            meta = {"model": response["model"]} if isinstance(response.get("model"), str) else {}
            out.append(
                self.event(Kind.USAGE, index, input_tokens=spent_in, output_tokens=spent_out, meta=meta)
            )
        calls = step.get("tool_calls") or response.get("tool_calls") or []
        if not isinstance(calls, list):
            raise RecordError(f"tool_calls: expected a list, got {type(calls).__name__}")
        ids = [self._call(out, call, index, n) for n, call in enumerate(calls)]
        results = step.get("tool_results") or []
        for result in results if isinstance(results, list) else ():
            self._result(out, result, index)
        messages = step.get("llm_messages") or []
        # The step that finishes the run records the messages it was given, not new ones.
        stale, self.previous = messages == self.previous, messages
        for message in messages if isinstance(messages, list) and not stale else ():
            if not isinstance(message, dict):
                continue
            if isinstance(message.get("tool_result"), dict):
                self._result(out, message["tool_result"], index)
            elif message.get("role") == "user" and _text(message.get("content")).strip():
                self._feedback(out, _text(message["content"]), [i for i in ids if i is not None], index)
        if step.get("reflection"):
            self.skipped["reflection"] = self.skipped.get("reflection", 0) + 1
        if step.get("error"):
            out.append(self.event(Kind.MESSAGE, index, role="system", content=_text(step["error"])))
        return out

    def _call(self, out: list[Event], call: Any, index: int, n: int) -> str | None:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise RecordError("tool call: expected an object with a name")
        call_id = call.get("call_id") or call.get("id") or f"step-{index}-{n}"
        args = call.get("arguments")
        if isinstance(args, str):
            args = {"arguments": args}
        out.append(
            self.event(
                Kind.TOOL_CALL,
                index,
                tool=call["name"],
                args=args if isinstance(args, dict) else {},
                call_id=str(call_id),
            )
        )
        return str(call_id)

    def _result(self, out: list[Event], result: Any, index: int) -> None:
        if not isinstance(result, dict) or result.get("call_id") in (None, ""):
            raise RecordError("tool result: expected an object with a call_id")
        call_id = str(result["call_id"])
        if call_id in self.answered:
            return  # the same result in tool_results and llm_messages, or repeated by a later step
        self.answered.add(call_id)
        error = _text(result.get("error")).strip()
        content = "\n".join(t for t in (_text(result.get("result")), error) if t)
        failed = result.get("success") is False or bool(error)
        out.append(self.event(Kind.TOOL_RESULT, index, call_id=call_id, content=content, is_error=failed))

    def _feedback(self, out: list[Event], text: str, ids: list[str], index: int) -> None:
        """The harness's answer to a step: it refused the step's unanswered call, or nudged the agent."""
        pending = [i for i in ids if i not in self.answered]
        if pending:
            self.answered.add(pending[0])
            out.append(self.event(Kind.TOOL_RESULT, index, call_id=pending[0], content=text, is_error=True))
        else:
            out.append(self.event(Kind.MESSAGE, index, role="system", content=text))


def _opening(run: _Run, document: dict[str, Any]) -> list[Event]:
    meta = {k: document[k] for k in ("provider", "model") if isinstance(document.get(k), str)}
    when = document.get("start_time")
    if when:
        try:
            run.ts = parse_ts(when, run.ts, "start_time")
        except RecordError:
            pass
    out = [run.event(Kind.SESSION_START, None, agent=AGENT, meta=meta)]
    task = _text(document.get("task")).strip()
    if task:
        out.append(run.event(Kind.MESSAGE, None, role="user", content=task))
    return out


def load(document: Any, source: str, session: str, base: float) -> tuple[list[Event], list[Problem]]:
    """Every event of a Trae Agent trajectory, and what was wrong with it."""
    if not is_trajectory(document):
        return [], [
            Problem(source, None, 'not a Trae Agent trajectory (expected {"task", "agent_steps": [...]})')
        ]
    steps: list[Any] = document["agent_steps"]
    run = _Run(source, session, base - len(steps))
    events = _opening(run, document)
    problems: list[Problem] = []
    for index, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            problems.append(
                Problem(source, index, f"agent step: expected an object, got {type(step).__name__}")
            )
            continue
        try:
            events.extend(run.step(step, index))
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
    if document.get("end_time"):
        status = "success" if document.get("success") is True else "failed"
        events.append(run.event(Kind.SESSION_END, len(steps) or None, status=status))
    return events, problems
