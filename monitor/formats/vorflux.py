"""Vorflux span exports: one run's spans as one JSON document (``<instance_id>.json[.gz]``).

The Vorflux agent's SWE-bench runs are published as one document a run::

    {"instance_id", "session_id", "total_spans", "trajectory_entries",
     "trajectory": [
        {"type": "llm_call", "timestamp", "task_prompt"?: [{role, content}],
         "output": {"content", "tool_calls": [{"id", "type": "function",
                    "function": {"name", "arguments"}}]}},
        {"type": "tool_call", "timestamp", "tool", "arguments",
         "result": {"stdout", "stderr", "exitCode", …} | "text" | {…}},
        {"type": "judge_call", …}, …]}

A ``tool_call`` entry is a tool that ran: a call and its result (an error when
``exitCode`` is not 0, or the text result begins ``Error:``).  Spans of parallel
subagents interleave, and the executed tool's name and argument keys may differ
from what the model asked for (``read`` {file_path} runs as ``read_text_file``
{filePath}), so an ``llm_call``'s requested call is matched to the first later,
unclaimed ``tool_call`` entry with the same argument values; only a request no
entry answers (``add_task``, ``mark_todo_done`` …: tools the harness handles
itself) is a call of its own, without a result.  Each call is counted once.
A span's call carries the reply it ran for (``meta["reply"]``, that
``llm_call``'s place): calls one reply made together are one round.
A ``tool_call`` entry no reply asked for is the harness's own (a hook it runs
between the model's steps): its events carry ``meta["harness"] = True``, and
the detectors do not take it for the agent acting (:func:`_harness`); a call
recognised as the harness's once is the harness's each time it runs.
In an export whose replies record no requests, a reply's calls the harness
handles itself (dispatching subagents, waiting for them, todo lists) leave no
trace: its message carries ``meta["calls_unrecorded"] = True`` (no evidence
that it made no call).
Between two replies the harness may act on its own: run its hooks (the
``tool_call`` entries above) or review the reply (a ``judge_call``).  It has
then ended the agent's turn and started another: the next reply's message
carries ``meta["resumed"] = True`` (it answers the harness, as a reply after a
user turn answers the user).
An ``llm_call``'s ``content`` is an assistant message, the ``user`` messages of
its ``task_prompt`` before the first reply the task.  ``judge_call`` entries are
the harness grading replies and are skipped (counted).  The ``line`` of an event
is the **1-based position of its entry in** ``trajectory[]``; its time the
entry's ``timestamp``.  The session is the run's ``instance_id``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem, RecordError
from monitor.formats.native import parse_ts

AGENT = "vorflux"
#: The top-level keys of a span export's first bytes (``instance_id`` … ``trajectory``).
_HEAD = re.compile(rb'\A\s*\{\s*"instance_id"\s*:\s*"((?:[^"\\]|\\.){1,200})"[^\[]*?"total_spans"')
#: The text of a tool's error result.
_ERROR_TEXT = ("Error:", "error:")


def looks_like_export(head: bytes) -> bool:
    """True when a document's first bytes are a Vorflux span export's."""
    return _HEAD.match(head) is not None and b'"trajectory"' in head


def instance_of(head: bytes) -> str | None:
    """The ``instance_id`` a span export's first bytes name, if they do."""
    match = _HEAD.match(head)
    if match is None:
        return None
    try:
        value = orjson.loads(b'"' + match.group(1) + b'"')
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) and value.strip() else None


def is_export(document: Any) -> bool:
    """True for a parsed Vorflux span export."""
    return (
        isinstance(document, dict)
        and "total_spans" in document
        and "instance_id" in document
        and isinstance(document.get("trajectory"), list)
    )


def _values(args: Any) -> tuple[str, ...] | None:
    """What a requested and an executed call share: their argument values (keys are renamed)."""
    if not isinstance(args, dict):
        return None
    try:
        return tuple(sorted(orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode() for v in args.values()))
    except TypeError:
        return None


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments")
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"arguments": raw}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {} if raw is None else {"arguments": raw}


def _requests(entry: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """An ``llm_call``'s requested tool calls: (id, name, arguments)."""
    output = entry.get("output")
    calls = output.get("tool_calls") if isinstance(output, dict) else None
    found: list[tuple[str, str, dict[str, Any]]] = []
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]:
            ident = call.get("id") if isinstance(call.get("id"), str) else ""
            found.append((ident, function["name"], _arguments(function)))
    return found


def _key(tool: Any, args: Any) -> tuple[str, ...] | None:
    """What pairs a request with the span that ran it: the argument values;
    for a call without arguments (``list-git-repositories``, ``list_tasks``),
    the tool's name, which then is all that tells two such calls apart."""
    values = _values(args)
    if values == () and isinstance(tool, str):
        return ("\x00tool", tool)
    return values


def _pair(trajectory: list[Any]) -> tuple[dict[int, str], set[tuple[int, int]], dict[int, int]]:
    """Which ``tool_call`` entries answer which requests: the request's id by
    entry index, the (llm entry, request) places no entry answers, and the
    reply (``llm_call`` entry) each entry ran for."""
    waiting: dict[tuple[str, ...], list[int]] = {}
    for index, entry in enumerate(trajectory, start=1):
        if isinstance(entry, dict) and entry.get("type") == "tool_call":
            key = _key(entry.get("tool"), entry.get("arguments"))
            if key is not None:
                waiting.setdefault(key, []).append(index)
    answered: dict[int, str] = {}
    replies: dict[int, int] = {}
    alone: set[tuple[int, int]] = set()
    for index, entry in enumerate(trajectory, start=1):
        if not isinstance(entry, dict) or entry.get("type") != "llm_call":
            continue
        for place, (ident, name, args) in enumerate(_requests(entry)):
            queue = waiting.get(_key(name, args) or ())
            hit = next((i for i in queue or () if i > index and i not in answered), None)
            if hit is None:
                alone.add((index, place))
            else:
                answered[hit] = ident or f"span-{hit}"
                replies[hit] = index
    _reply_before(trajectory, replies)
    return answered, alone, replies


def _reply_before(trajectory: list[Any], replies: dict[int, int]) -> None:
    """In an export whose replies record no requests, each span's reply is the
    ``llm_call`` before it: the spans between two replies are one reply's calls."""
    if replies:
        return
    reply = 0
    for index, entry in enumerate(trajectory, start=1):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "llm_call":
            reply = index
        elif kind == "tool_call" and reply:
            replies[index] = reply


def _harness(trajectory: list[Any], answered: dict[int, str]) -> set[int]:
    """The ``tool_call`` entries the harness ran by itself, not at a reply's request.

    When the export records the replies' requests, an entry no request
    matched.  When it records none, only what shows without them: the same
    call run twice among the spans after one reply, before the next (a model
    asks for a call once per reply; a harness re-runs its hook).  A call
    recognised as the harness's anywhere in the export is the harness's
    everywhere in it, each time it runs (the hook run once between two
    replies too), except where a recorded request asked for it."""
    recorded = any(isinstance(e, dict) and e.get("type") == "llm_call" and _requests(e) for e in trajectory)
    found: set[int] = set()
    spans: dict[bytes, list[int]] = {}  # every call's spans, by tool and arguments
    since_reply: dict[bytes, int] = {}  # the calls run since the last reply: the first span of each
    for index, entry in enumerate(trajectory, start=1):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "llm_call":
            since_reply.clear()  # a reply between: the same call again is the model's
        if kind != "tool_call":
            continue
        key = orjson.dumps(
            [entry.get("tool"), entry.get("arguments")], option=orjson.OPT_SORT_KEYS, default=str
        )
        spans.setdefault(key, []).append(index)
        if recorded:
            if index not in answered:
                found.add(index)
            continue
        first = since_reply.setdefault(key, index)
        if first != index:
            found.update((first, index))
    for indices in spans.values():
        if len(indices) > 1 and not found.isdisjoint(indices):
            found.update(index for index in indices if index not in answered)
    return found


def _result(value: Any) -> tuple[str, bool, dict[str, Any]]:
    """A tool's output, whether it failed, and its exit code as meta."""
    if isinstance(value, str):
        return value, value.lstrip().startswith(_ERROR_TEXT), {}
    if not isinstance(value, dict):
        return ("" if value is None else orjson.dumps(value).decode()), False, {}
    code = value.get("exitCode")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    meta: dict[str, Any] = {} if code is None else {"exit_code": code}
    if "stdout" in value or "stderr" in value:
        parts = [value.get(k) for k in ("stdout", "stderr", "output")]
        text = "\n".join(p for p in parts if isinstance(p, str) and p)
    elif isinstance(value.get("output"), str):
        text = value["output"]
    else:
        text = orjson.dumps(value, default=str).decode()
    failed = (code is not None and code != 0) or value.get("status") in ("failed", "error")
    return text, failed, meta


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _task(entry: dict[str, Any], event: Callable[..., Event]) -> list[Event]:
    """The task: the ``user`` messages of a ``task_prompt`` before its first reply."""
    prompt = entry.get("task_prompt")
    found: list[Event] = []
    for message in prompt if isinstance(prompt, list) else ():
        if not isinstance(message, dict) or message.get("role") not in ("user", "system"):
            break
        text = _text(message.get("content"))
        if message.get("role") == "user" and text.strip():
            found.append(event(Kind.MESSAGE, role="user", content=text))
    return found


class _Run:
    """The state of reading one export: its session, clock and pairing."""

    def __init__(self, source: str, session: str, trajectory: list[Any], base: float):
        self.source = source
        self.session = session
        self.ts = base
        self.answered, self.alone, self.replies = _pair(trajectory)
        self.harness = _harness(trajectory, self.answered)
        #: Whether the replies record their requests: when none does, a reply's calls the
        #: harness handles itself (``add_task``, ``wait_any_task_result`` …) leave no trace.
        self.requests = any(
            isinstance(e, dict) and e.get("type") == "llm_call" and _requests(e) for e in trajectory
        )
        self.told = False
        self.skipped: dict[str, int] = {}
        #: Whether a reply was given, and the harness acted on its own since the latest one.
        self.replied = False
        self.harness_acted = False

    def event(self, kind: Kind, line: int | None, **fields: Any) -> Event:
        return Event(kind=kind, session=self.session, ts=self.ts, source=self.source, line=line, **fields)

    def entry(self, entry: dict[str, Any], index: int) -> list[Event]:
        """The events of one trajectory entry."""
        kind = entry.get("type")
        if not isinstance(kind, str):
            raise RecordError(f"trajectory entry: expected a type, got {type(kind).__name__}")
        if entry.get("timestamp") is not None:
            self.ts = parse_ts(entry["timestamp"], self.ts, "timestamp")

        def event(kind: Kind, **fields: Any) -> Event:
            return self.event(kind, index, **fields)

        if kind == "tool_call":
            self.harness_acted = self.harness_acted or index in self.harness
            return self._tool(entry, index, event)
        if kind != "llm_call":
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            self.harness_acted = self.harness_acted or kind == "judge_call"
            return []
        resumed = self.replied and self.harness_acted
        self.replied, self.harness_acted = True, False
        out = [] if self.told else _task(entry, event)
        self.told = self.told or bool(out)
        output = entry.get("output")
        text = _text(output.get("content")) if isinstance(output, dict) else ""
        if text.strip():
            meta: dict[str, Any] = {} if self.requests else {"calls_unrecorded": True}
            if resumed:
                meta["resumed"] = True
            out.append(event(Kind.MESSAGE, role="assistant", content=text.strip(), meta=meta))
        for place, (ident, name, args) in enumerate(_requests(entry)):
            if (index, place) in self.alone:
                out.append(
                    event(Kind.TOOL_CALL, tool=name, args=args, call_id=ident or f"llm-{index}-{place}")
                )
        return out

    def _tool(self, entry: dict[str, Any], index: int, event: Callable[..., Event]) -> list[Event]:
        tool = entry.get("tool")
        if not isinstance(tool, str) or not tool:
            raise RecordError(f"tool_call: expected a tool name, got {type(tool).__name__}")
        args = entry.get("arguments")
        args = args if isinstance(args, dict) else ({} if args is None else {"arguments": args})
        call_id = self.answered.get(index, f"span-{index}")
        content, failed, meta = _result(entry.get("result"))
        mark: dict[str, Any] = {"harness": True} if index in self.harness else {}
        if mark:
            meta["harness"] = True
        elif index in self.replies:
            mark["reply"] = self.replies[index]  # calls of one reply are one round
            mark["asked"] = self.replies[index]  # the line it was asked at, before its own
        return [
            event(Kind.TOOL_CALL, tool=tool, args=args, call_id=call_id, meta=mark),
            event(Kind.TOOL_RESULT, tool=tool, call_id=call_id, content=content, is_error=failed, meta=meta),
        ]


def load(document: Any, source: str, session: str, base: float) -> tuple[list[Event], list[Problem]]:
    """Every event of a span export, and what was wrong with it."""
    if not is_export(document):
        return [], [
            Problem(
                source,
                None,
                'not a Vorflux span export (expected {"instance_id", "total_spans", "trajectory": [...]})',
            )
        ]
    trajectory: list[Any] = document["trajectory"]
    first = next((e.get("timestamp") for e in trajectory if isinstance(e, dict) and e.get("timestamp")), None)
    run = _Run(source, session, trajectory, base)
    try:
        run.ts = parse_ts(first, base, "timestamp")
    except RecordError:
        pass
    meta = {
        k: document[k]
        for k in ("instance_id", "session_id", "total_spans")
        if isinstance(document.get(k), (str, int))
    }
    events = [run.event(Kind.SESSION_START, None, agent=AGENT, meta=meta)]
    problems: list[Problem] = []
    for index, entry in enumerate(trajectory, start=1):
        if not isinstance(entry, dict):
            problems.append(
                Problem(source, index, f"trajectory entry: expected an object, got {type(entry).__name__}")
            )
            continue
        try:
            events.extend(run.entry(entry, index))
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
    return events, problems
