"""Cline and Roo Code task histories (``tasks/<id>/api_conversation_history.json``).

Cline (VS Code extension ``saoudrizwan.claude-dev``) and its fork Roo Code
keep a task in ``<globalStorage>/tasks/<id>/``: ``api_conversation_history.json``
is the list of Anthropic messages sent to the model (``{role, content: [blocks],
ts?, modelInfo?, metrics?}``), ``ui_messages.json`` what the chat panel showed
(``{ts, type: say | ask, say | ask, text, conversationHistoryIndex}``).

Tool calls are the assistant's ``tool_use`` blocks; Cline does not answer them
with ``tool_result`` blocks but with **user text** that starts
``[<tool> for '<target>'] Result:`` (``[<tool>] Result:`` without a target):

* such a block is the result of the oldest call of the assistant message before
  it still unanswered; when there is none (Cline's older XML tool calls, in the
  assistant's text) a call is made from the header (tool, ``{"target": …}``);
* it is an error when it says the tool failed (``The tool execution failed``,
  ``<error>``, ``[ERROR]``), the user denied it, or ``Command failed with exit
  code N`` (``meta["exit_code"]``, also from ``exit code 0``);
* what a person typed into a result (``<feedback>``, an ``<answer>`` to a
  question, a ``<user_message>``) is also a user message; command output
  that follows a result in the same message (``Command failed with exit
  code N``) belongs to it.

Other user text is the person's when Cline wraps it so (``<task>``,
``<feedback>``, ``<user_message>``, ``<answer>``, "The user has provided
feedback", "New instructions for task continuation"); Cline's own text
(``<environment_details>``, todo-list reminders) is skipped, and its harness
messages (``[ERROR] You did not use a tool``, ``[TASK RESUMPTION]``) are
system messages: they do not reset the detectors as a person's turn does.

Times come from each message's ``ts`` (epoch milliseconds); without one, from
``ui_messages.json`` beside the history: a message at index ``j`` is as old as
the first UI record whose ``conversationHistoryIndex`` is ``j - 1``.  Usage is
``metrics.tokens`` of an assistant message, else the ``api_req_started`` UI
record of that request (``tokensIn``, ``tokensOut``, ``cacheReads``, ``cost``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem, RecordError
from monitor.formats.chat import ChatDecoder

AGENT = "cline"
HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
#: ``[tool for 'target'] Result:`` (the target may hold quotes and brackets).
_HEADER = re.compile(r"\A\s*\[(?P<tool>[A-Za-z_][\w.:-]*)(?: for '(?P<target>.*?)')?\] Result:\s*", re.S)
_EXIT = re.compile(r"\A(?:Command failed with exit code|Command executed successfully \(exit code) (-?\d+)")
#: What a person typed, inside a result (a denial's feedback, a question's answer).
_FEEDBACK = re.compile(r"<(feedback|answer|user_message)>\s*(.*?)\s*</\1>", re.S)
_FAILED = (
    "The tool execution failed",
    "The user denied this operation",
    "<error>",
    "[ERROR]",
)
_PERSON = (
    "<task>",
    "<feedback>",
    "<user_message>",
    "<answer>",
    "The user has provided feedback",
    "The user provided the following feedback",
    "New instructions for task continuation",
    "New message to respond to",
)
#: Parameters Cline adds to every tool call for itself.
_OWN_ARGS = frozenset({"task_progress"})
_OWN = ("<environment_details>", "# TODO LIST", "# task_progress", "Files attached by the user")


def is_history(path: Path) -> bool:
    return path.name == HISTORY


def looks_like_cline(head: bytes) -> bool:
    """True for the first bytes of a Cline history under another name."""
    text = head.lstrip()
    return text.startswith(b"[") and b'"role"' in text and (b'"modelInfo"' in text or b"] Result:" in text)


def failed(text: str) -> tuple[bool, int | None]:
    """Whether a result's text says the tool failed, and its exit code."""
    match = _EXIT.match(text)
    code = int(match.group(1)) if match else None
    return (code is not None and code != 0) or text.startswith(_FAILED), code


class ClineDecoder(ChatDecoder):
    """Decoder of one Cline history, one API message a record."""

    name = "cline"
    fenced_actions = False

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        #: Calls of the last assistant message not answered yet, oldest first.
        self.unanswered: list[str] = []
        self.made = 0

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        role = record.get("role")
        if role not in ("user", "assistant"):
            raise RecordError(f"message: expected role user or assistant, got {role!r}")
        if record.get("ts") is not None and record.get("timestamp") is None:
            record = {**record, "timestamp": record["ts"]}
        if role == "assistant":
            events = super().decode(record, line, now)
            calls = [e for e in events if e.kind is Kind.TOOL_CALL]
            for call in calls:  # Cline's todo list rides along with every call: not an argument
                if call.args and _OWN_ARGS.intersection(call.args):
                    call.args = {k: v for k, v in call.args.items() if k not in _OWN_ARGS}
            self.unanswered = [e.call_id for e in calls if e.call_id]
            return events + self._metrics(record, events, line)
        ts = self._time(record, now)

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

        content = record.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise RecordError(f"content: expected text or a list of blocks, got {type(content).__name__}")
        return self._user_blocks(event, blocks)

    def _user_blocks(self, event: Any, blocks: list[Any]) -> list[Event]:
        out: list[Event] = []
        person: list[str] = []
        harness: list[str] = []
        last: Event | None = None  # the result just read: command output may follow it
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result" and block.get("tool_use_id"):
                call_id = str(block["tool_use_id"])
                if call_id in self.unanswered:
                    self.unanswered.remove(call_id)
                out.append(self._result(event, call_id, _text(block.get("content")), block.get("is_error")))
                continue
            text = block.get("text")
            if block.get("type") != "text" or not isinstance(text, str):
                self.skip(f"user:{block.get('type')}")
                continue
            header = _HEADER.match(text)
            if header is not None:
                out.extend(self._answer(event, header, text[header.end() :]))
                last = out[-1]
                feedback = _FEEDBACK.search(text)
                if feedback is not None and feedback.group(2):
                    person.append(feedback.group(2))
                continue
            if last is not None and _EXIT.match(text):  # e.g. attempt_completion's command
                error, code = failed(text)
                last.content = f"{last.content}\n{text}"
                last.is_error = last.is_error or error
                if code is not None:
                    last.meta = {**last.meta, "exit_code": code}
            elif text.lstrip().startswith(_PERSON):
                person.append(text)
            elif text.lstrip().startswith(_OWN):
                self.skip("user:cline-context")
            elif text.strip():
                harness.append(text)
            last = None
        if person:
            out.append(event(Kind.MESSAGE, role="user", content="\n".join(person)))
        if harness:
            out.append(event(Kind.MESSAGE, role="system", content="\n".join(harness)))
        return out

    def _answer(self, event: Any, header: re.Match[str], text: str) -> list[Event]:
        """The result a ``[tool …] Result:`` block gives (and its call, when none is waiting)."""
        out: list[Event] = []
        if self.unanswered:
            call_id = self.unanswered.pop(0)
        else:  # Cline's XML tool use: the call is in the assistant's text, named by the header
            self.made += 1
            call_id = f"cline-{self.made}"
            target = header.group("target")
            args = {} if target is None else {"target": target}
            self.tools[call_id] = header.group("tool")
            out.append(event(Kind.TOOL_CALL, tool=header.group("tool"), args=args, call_id=call_id))
        error, code = failed(text)
        meta: dict[str, Any] = {} if code is None else {"exit_code": code}
        tool = self.tools.pop(call_id, None)
        out.append(
            event(Kind.TOOL_RESULT, call_id=call_id, content=text, is_error=error, tool=tool, meta=meta)
        )
        return out

    def _metrics(self, record: dict[str, Any], events: list[Event], line: int | None) -> list[Event]:
        """Usage from Cline's ``metrics.tokens`` (when the message had no
        ``usage``): ``prompt`` is the input besides the ``cached`` part."""
        if any(e.kind is Kind.USAGE for e in events):
            return []
        metrics = record.get("metrics")
        tokens = metrics.get("tokens") if isinstance(metrics, dict) else None
        if not isinstance(tokens, dict):
            return []
        prompt, completion = _int(tokens.get("prompt")), _int(tokens.get("completion"))
        if prompt is None and completion is None:
            return []
        cost = metrics.get("cost") if isinstance(metrics, dict) else None
        cached = _int(tokens.get("cached"))
        return [
            Event(
                kind=Kind.USAGE,
                session=self.session,
                ts=self.ts if self.ts is not None else 0.0,
                source=self.source,
                line=line,
                input_tokens=None if prompt is None else prompt + (cached or 0),
                output_tokens=completion,
                cost_usd=float(cost)
                if isinstance(cost, (int, float)) and not isinstance(cost, bool)
                else None,
                meta={"cached_input_tokens": cached} if cached else {},
            )
        ]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def ui_facts(path: Path) -> tuple[dict[int, float], dict[int, dict[str, Any]], list[Problem]]:
    """From ``ui_messages.json`` beside a history: the time of each history
    index (epoch seconds) and the usage of each API request (by the index of
    the assistant message it produced)."""
    times: dict[int, float] = {}
    usage: dict[int, dict[str, Any]] = {}
    ui = path.with_name(UI)
    try:
        records = orjson.loads(ui.read_bytes()) if ui.is_file() else []
    except (OSError, orjson.JSONDecodeError) as exc:
        return times, usage, [Problem(str(ui), None, f"cannot be read as JSON ({exc}); times not used")]
    if not isinstance(records, list):
        return times, usage, [Problem(str(ui), None, "expected a JSON list of UI messages")]
    for record in records:
        if not isinstance(record, dict):
            continue
        index, ts = record.get("conversationHistoryIndex"), record.get("ts")
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(ts, (int, float)):
            continue
        times.setdefault(index + 1, float(ts) / 1000.0)
        if record.get("say") == "api_req_started" and isinstance(record.get("text"), str):
            try:
                request = orjson.loads(record["text"])
            except orjson.JSONDecodeError:
                continue
            if isinstance(request, dict):
                usage[index + 2] = request
    return times, usage, []


def usage_event(request: dict[str, Any], session: str, ts: float, source: str, line: int) -> Event | None:
    """The usage of one ``api_req_started`` record."""
    tokens_in, tokens_out = _int(request.get("tokensIn")), _int(request.get("tokensOut"))
    # Anthropic counts cache reads and writes apart from the input; loopwatch's input holds them.
    cached = _int(request.get("cacheReads")) or 0
    written = _int(request.get("cacheWrites")) or 0
    cost = request.get("cost")
    if tokens_in is None and tokens_out is None:
        return None
    return Event(
        kind=Kind.USAGE,
        session=session,
        ts=ts,
        source=source,
        line=line,
        input_tokens=(tokens_in or 0) + cached + written,
        output_tokens=tokens_out,
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
        meta={"cached_input_tokens": cached} if cached else {},
    )
