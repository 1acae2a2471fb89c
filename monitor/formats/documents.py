"""Whole-document formats (offline trajectories) for ``scan``.

A trajectory is one JSON document, not a line a record, so there are no file
lines to point at: the ``line`` of every event is the **1-based index of the
step** it came from (SWE-agent: the position in ``trajectory[]``; OpenHands:
the position in the event list).  Events from the task preamble (session
start, the task statement) have no step and carry ``line`` ``None``.

* **SWE-agent** ``.traj``: ``{"trajectory": [{"thought", "action",
  "observation", "execution_time"?}…], "history": […], "info": {…}}``.  Each
  step's thought is an assistant message, its action a tool call (tool = the
  command's first word, args ``{"command": action}``) and its observation the
  result.  The task statement is the first non-demonstration user message of
  ``history``; ``info.model_stats`` becomes a usage event and
  ``info.exit_status`` the session end.  A ``.traj`` whose ``trajectory`` is
  empty is read from ``history`` (assistant ``action`` entries and the
  ``observation`` messages after them).
* **OpenHands** event-list JSON (``[{"id", "timestamp", "source", "action" |
  "observation", "args" | "extras", "content", "cause"}…]``, or an object
  holding that list under ``history`` / ``trajectory``): tool actions
  (``run``, ``read``, ``edit``, ``browse``, ``mcp`` …) are tool calls, the
  observation whose ``cause`` is the action's ``id`` its result (an error
  when it is an ``error`` / ``user_rejected`` observation, ``success`` is
  false or the exit code is positive), ``message`` actions are user or
  assistant messages, an action's ``thought`` an assistant message,
  ``condensation`` a compaction and growth of ``llm_metrics`` usage.
* **Chat messages** (mini-swe-agent's ``*.traj.json``, any ``{"messages":
  [...]}`` document or bare JSON array of OpenAI / Anthropic messages): read
  by :class:`~monitor.formats.chat.ChatDecoder`, one message a step;
  ``instance_id``, ``trajectory_format`` and the model go to the session's
  meta, ``info.exit_status`` is the session end.  A message without a time
  is one second after the one before.

* **OpenHands V1** events (``kind``: ActionEvent, ObservationEvent, …), as a
  JSON list or a conversation folder ``<id>/events/event-*.json`` (one
  session, named by the conversation's id; the line is the event's place):
  :mod:`monitor.formats.openhands_v1`.
* **Cline / Roo Code** ``api_conversation_history.json`` (with
  ``ui_messages.json`` beside it): :mod:`monitor.formats.cline`.
* **Gemini CLI** chat documents: :mod:`monitor.formats.gemini`.
* **Vorflux** span exports (``{instance_id, total_spans, trajectory: [...]}``;
  the line is the entry's place in ``trajectory[]``): :mod:`monitor.formats.vorflux`.
* **Aider** ``.aider.chat.history.md`` (Markdown; the line is the file's):
  :mod:`monitor.formats.aider`.
* **OpenCode** ``opencode.db`` and its older ``storage/`` folder, **Goose**
  ``sessions.db`` (SQLite, read-only; many sessions in one file, the line is
  the row's id): :mod:`monitor.formats.opencode`, :mod:`monitor.formats.goose`.

One file is one session, named after the file (``scan`` makes the name unique
when two files share it: two runs of one task are never merged).

Bad input becomes a :class:`~monitor.formats.base.Problem`; nothing raises
except ``OSError`` for a file that cannot be read.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats import aider, cline, gemini, gemini_history, goose, opencode, sqlite_db, trae, vorflux
from monitor.formats.base import Problem, RecordError
from monitor.formats.chat import ROLES, ChatDecoder
from monitor.formats.compressed import plain_path, read_all, read_head
from monitor.formats.native import parse_ts
from monitor.formats.openhands_v1 import V1Reader, is_v1_event

#: Bytes read to decide whether a ``.json`` file is an OpenHands trajectory.
_PEEK_BYTES = 64 * 1024
#: The kinds of OpenHands V1 events that tell a V1 event list from other JSON.
_V1_KIND = re.compile(rb'"kind": ?"(?:ActionEvent|ObservationEvent|MessageEvent|SystemPromptEvent)"')
#: Stands for an event file of a conversation folder that could not be read.
_UNREADABLE = object()
#: One event of a V1 conversation folder: ``event-00012-<uuid>.json``.
_EVENT_FILE = re.compile(r"\Aevent-(\d+)(?:-[^/]*)?\.json\Z")
_OPENHANDS_TOOL_ACTIONS = frozenset(
    {
        "run",
        "run_ipython",
        "read",
        "write",
        "edit",
        "browse",
        "browse_interactive",
        "mcp",
        "call_tool_mcp",
        "delegate",
        "think",
        "task_tracking",
    }
)
#: Bookkeeping fields of OpenHands action args that are not the call's arguments.
_OPENHANDS_META_ARGS = frozenset(
    {
        "thought",
        "confirmation_state",
        "security_risk",
        "hidden",
        "blocking",
        "is_confirmed",
        "impl_source",
        "wait_for_response",
        "image_urls",
        "file_urls",
        "reasoning_content",
    }
)
_OPENHANDS_SKIPPED_OBSERVATIONS = frozenset(
    {
        "agent_state_changed",
        "null",
        "recall",
        "condense",
        "message",
        "chat",
        "loop_detection",
    }
)


# -- which files --------------------------------------------------------------


def _looks_like_openhands(head: bytes) -> bool:
    text = head.lstrip()
    if not text.startswith((b"[", b"{")):
        return False
    if (b'"kind":"' in text or b'"kind": "' in text) and _V1_KIND.search(text):
        return True  # V1: {"kind": "ActionEvent", ...}
    return (b'"action"' in text or b'"observation"' in text) and (
        b'"source"' in text or b'"args"' in text or b'"extras"' in text
    )


def events_dir(path: Path) -> Path | None:
    """The ``events/`` folder of an OpenHands V1 conversation, when ``path``
    is that folder or the conversation's (``<id>/events/event-*.json``)."""
    for folder in (path, path / "events"):
        if folder.name == "events" and folder.is_dir() and any(is_event_file(p) for p in folder.iterdir()):
            return folder
    return None


def event_number(path: Path) -> int:
    """The 1-based place of an event file in its conversation (``event-00002-…`` is 3)."""
    match = _EVENT_FILE.match(path.name)
    return int(match.group(1)) + 1 if match else 1


def is_event_file(path: Path) -> bool:
    """True for one event of a V1 conversation (``events/event-NNNNN-<id>.json``)."""
    return path.parent.name == "events" and _EVENT_FILE.match(path.name) is not None


def _looks_like_chat(head: bytes) -> bool:
    text = head.lstrip()
    if text.startswith(b"{"):
        return b'"messages"' in text and b'"role"' in text
    return text.startswith(b"[") and b'"role"' in text and not _looks_like_openhands(text)


#: The document formats, as ``--format`` names them.
DOCUMENT_FORMATS = (
    "aider",
    "chat",
    "cline",
    "gemini",
    "goose",
    "opencode",
    "openhands",
    "swe-agent",
    "trae",
    "vorflux",
)
#: The formats kept in a SQLite database (many sessions a file; ``watch`` polls their rows).
DATABASE_FORMATS = ("goose", "opencode")
#: The names a SQLite database of an agent may have.
_DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def kind_of(path: Path, named: bool = True) -> str | None:
    """The document format of ``path`` (from its name and first bytes), or
    ``None``; a compressed file by its decompressed bytes and its name
    without the compression suffix.  A pipe is not peeked at (its bytes
    would be gone): it is read as lines."""
    suffix = plain_path(path).suffix
    if suffix == ".traj":
        return "swe-agent"
    if path.suffix in _DATABASE_SUFFIXES:
        return sqlite_db.which(path)
    if path.is_dir() and opencode.storage_root(path) is not None:
        return "opencode"
    if suffix == ".md":
        return "aider" if _aider(path) else None
    if suffix != ".json":
        return "openhands" if events_dir(path) is not None else None
    try:
        head = read_head(path, _PEEK_BYTES, named) if _regular(path) or not named else b""
    except OSError:
        return None
    if vorflux.looks_like_export(head):
        return "vorflux"
    if trae.looks_like_trajectory(head):
        return "trae"
    if cline.is_history(path) or cline.looks_like_cline(head):
        return "cline"
    if head.lstrip().startswith(b"{") and b'"projectHash"' in head and b'"messages"' in head:
        return "gemini"
    if head.lstrip().startswith(b"{") and _looks_like_chat(head):
        return "chat"
    if gemini_history.looks_like_history(head):
        return "gemini"
    if _mini_swe_agent(path, head):
        return "chat"
    if _looks_like_openhands(head):
        return "openhands"
    return "chat" if _looks_like_chat(head) else None


def _mini_swe_agent(path: Path, head: bytes) -> bool:
    """A mini-swe-agent ``<instance>.traj.json`` whose ``info`` (the submission's diff in it)
    fills the first bytes, so that its ``messages`` come later."""
    text = head.lstrip()
    return plain_path(path).name.endswith(".traj.json") and text.startswith(b"{") and b'"info"' in text[:64]


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (a pipe named on the command line is not peeked at)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _aider(path: Path) -> bool:
    try:
        return aider.is_history(plain_path(path), read_head(path, 256))
    except OSError:
        return False


def _vorflux_instance(path: Path) -> str | None:
    """The ``instance_id`` of a Vorflux span export (its session), else None."""
    try:
        return vorflux.instance_of(read_head(path, 1024))
    except OSError:
        return None


def claims(path: Path) -> bool:
    """True when ``path`` is a whole-document trajectory this module reads."""
    return kind_of(path) is not None


def name_of(path: Path) -> str:
    return kind_of(path) or "openhands"


def session_of(path: Path) -> str:
    """The session a document's events belong to: its name without the
    extensions (an OpenHands conversation folder: the conversation's id)."""
    plain = plain_path(path)
    folder = events_dir(path) if plain.suffix != ".json" else None
    if folder is not None:
        return folder.parent.name or "openhands"
    if plain.suffix in _DATABASE_SUFFIXES:
        return plain.stem  # (a database's events carry their own sessions)
    if plain.suffix == ".md":
        return aider.session_base(plain)
    if cline.is_history(plain) and path.parent.name:
        return path.parent.name  # tasks/<id>/api_conversation_history.json: the task's id
    instance = _vorflux_instance(path) if plain.suffix == ".json" else None
    if instance is not None:
        return instance
    name = plain.name
    for suffix in (".traj.json", ".json", ".traj"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name or "trajectory"


def load(
    path: Path, session: str | None = None, fmt: str | None = None, named: bool = True
) -> tuple[list[Event], list[Problem]]:
    """Every event of a trajectory document, and what was wrong with it.

    ``fmt`` forces one of :data:`DOCUMENT_FORMATS`; ``session`` names the
    session (default: :func:`session_of`)."""
    if fmt == "aider" or (fmt is None and plain_path(path).suffix == ".md" and _aider(path)):
        try:
            return aider.load(path, session)
        except OSError:
            raise
        except Exception as exc:  # an adapter bug must cost one file, not the scan or the monitor
            return [], [Problem(str(path), None, f"{type(exc).__name__} while decoding: {exc}")]
    if fmt in DATABASE_FORMATS or (fmt is None and _database(path) is not None):
        return _load_database(path, fmt or _database(path))
    source = str(path)
    folder = events_dir(path) if plain_path(path).suffix != ".json" else None
    read = _read_document(path, folder, source, named)
    if isinstance(read, Problem):
        return [], [read]
    document, raw, early = read
    session = session or session_of(path)
    try:
        base = os.stat(path).st_mtime
    except OSError:
        base = 0.0
    loader = _loader_for(path, folder, document, raw, fmt)
    try:
        events, problems = loader(document, source, session, base)
    except RecordError as exc:
        return [], [*early, Problem(source, None, str(exc))]
    except Exception as exc:  # an adapter bug must cost one file, not the scan or the monitor
        return [], [*early, Problem(source, None, f"{type(exc).__name__} while decoding: {exc}")]
    return events, early + problems


def opencode_storage(path: Path) -> Path | None:
    """OpenCode's ``storage/`` folder when ``path`` is it or holds it."""
    return opencode.storage_root(path) if path.is_dir() else None


def _database(path: Path) -> str | None:
    """The database format of ``path`` (a SQLite file, or OpenCode's ``storage/`` folder), or None."""
    if path.suffix in _DATABASE_SUFFIXES:
        return sqlite_db.which(path)
    return "opencode" if path.is_dir() and opencode.storage_root(path) is not None else None


def _load_database(path: Path, fmt: str | None) -> tuple[list[Event], list[Problem]]:
    """An agent's database: every session in it (the sessions are the database's, not the file's)."""
    try:
        if path.is_dir():
            root = opencode.storage_root(path)
            if root is None:
                return [], [
                    Problem(str(path), None, "not an OpenCode storage/ folder (session/, message/, part/)")
                ]
            return opencode.load_storage(root)
        if not sqlite_db.is_sqlite(sqlite_db.head_of(path)):
            return [], [Problem(str(path), None, "not a SQLite database")]
        return goose.load_db(path) if fmt == "goose" else opencode.load_db(path)
    except OSError:
        raise
    except Exception as exc:  # an adapter bug must cost one file, not the scan or the monitor
        return [], [Problem(str(path), None, f"{type(exc).__name__} while decoding: {exc}")]


def _read_document(
    path: Path, folder: Path | None, source: str, named: bool = True
) -> tuple[Any, bytes, list[Problem]] | Problem:
    """The parsed document (an OpenHands conversation folder's events, or the file's JSON), its raw
    bytes and the problems met on the way; a :class:`Problem` when it cannot be parsed at all.
    ``OSError`` propagates: the caller reports unreadable paths."""
    if folder is not None:
        document, early = _read_events_dir(folder, source)
        return document, b"", early
    raw, damage = read_all(path, named)
    if damage is not None:  # a compressed document cut short cannot be parsed
        return Problem(source, None, damage)
    try:
        return orjson.loads(raw), raw, []
    except orjson.JSONDecodeError as exc:
        return Problem(source, None, f"invalid JSON: {exc}")


def _loader_for(
    path: Path, folder: Path | None, document: Any, raw: bytes, fmt: str | None
) -> Callable[..., tuple[list[Event], list[Problem]]]:
    """Which reader a document goes to: the one ``fmt`` names, else the one its name and shape say."""
    plain = plain_path(path)
    traj = plain.suffix == ".traj"
    if fmt == "vorflux" or (fmt is None and vorflux.is_export(document)):
        return vorflux.load
    if fmt == "trae" or (fmt is None and trae.is_trajectory(document)):
        return trae.load
    if gemini_history.contents(document) is not None and fmt in (None, "gemini"):
        return gemini_history.load
    if fmt == "cline" or (
        fmt is None
        and folder is None
        and (cline.is_history(plain) or cline.looks_like_cline(raw[:_PEEK_BYTES]))
    ):
        return _load_cline
    if fmt == "gemini" or (fmt is None and gemini.is_chat(document)):
        return _load_gemini
    if fmt == "chat" or (fmt is None and chat_messages(document) is not None and not traj):
        return _load_chat
    swe = isinstance(document, dict) and "trajectory" in document and _is_swe_agent(document)
    if fmt == "swe-agent" or traj or (fmt is None and swe):
        return _load_swe_agent
    return _load_openhands


def _read_events_dir(folder: Path, source: str) -> tuple[list[Any], list[Problem]]:
    """The events of a V1 conversation folder, in their order; a file that
    is not a JSON object is reported at its place (its 1-based index)."""
    files = sorted(
        (p for p in folder.iterdir() if is_event_file(p)),
        key=lambda p: (int(_EVENT_FILE.match(p.name).group(1)), p.name),  # type: ignore[union-attr]
    )
    items: list[Any] = []
    problems: list[Problem] = []
    for index, file in enumerate(files, start=1):
        try:
            items.append(orjson.loads(file.read_bytes()))
        except (OSError, orjson.JSONDecodeError) as exc:
            problems.append(Problem(source, index, f"{file.name}: cannot be read as JSON ({exc})"))
            items.append(_UNREADABLE)
    return items, problems


# -- chat messages -------------------------------------------------------------


def chat_messages(document: Any) -> list[Any] | None:
    """The message list of a chat document (``{"messages": [...]}`` or a bare
    array of ``{"role": …}`` objects), or ``None``."""
    if isinstance(document, dict):
        messages = document.get("messages")
    elif isinstance(document, list):
        messages = document
    else:
        return None
    if not isinstance(messages, list):
        return None
    head = [m for m in messages[:5] if isinstance(m, dict)]
    if not head or not all(
        isinstance(m.get("role"), str) and m["role"] in ROLES and "type" not in m for m in head
    ):
        return None
    return messages


def _load_chat(document: Any, source: str, session: str, base: float) -> tuple[list[Event], list[Problem]]:
    messages = chat_messages(document)
    if messages is None:
        return [], [
            Problem(
                source,
                None,
                'not a chat document (expected {"messages": [...]} or a JSON array of messages with a role)',
            )
        ]
    info = _dict(document.get("info")) if isinstance(document, dict) else {}
    meta: dict[str, Any] = {}
    agent = "chat"
    if isinstance(document, dict):
        for key in ("instance_id", "trajectory_format"):
            if isinstance(document.get(key), str):
                meta[key] = document[key]
        if str(document.get("trajectory_format", "")).startswith("mini-swe-agent"):
            agent = "mini-swe-agent"
    config = _dict(info.get("config"))
    model = _dict(config.get("model"))
    if isinstance(model.get("model_name"), str):
        meta["model"] = model["model_name"]
    decoder = ChatDecoder(source, session)
    problems: list[Problem] = []
    events: list[Event] = []
    start = base - len(messages)
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            problems.append(
                Problem(source, index, f"message: expected an object, got {type(message).__name__}")
            )
            continue
        try:
            events.extend(decoder.decode(message, index, start + index))
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
    first = events[0].ts if events else base
    opening = Event(
        kind=Kind.SESSION_START, session=session, ts=first, source=source, line=None, agent=agent, meta=meta
    )
    status = info.get("exit_status")
    if isinstance(status, str) and status:
        last = events[-1] if events else opening
        events.append(
            Event(
                kind=Kind.SESSION_END,
                session=session,
                ts=last.ts,
                source=source,
                line=len(messages) or None,
                status=status,
            )
        )
    return [opening, *events], problems


# -- Cline / Roo Code -------------------------------------------------------------


def _load_cline(document: Any, source: str, session: str, base: float) -> tuple[list[Event], list[Problem]]:
    if not isinstance(document, list):
        return [], [
            Problem(source, None, f"Cline history: expected a JSON list, got {type(document).__name__}")
        ]
    path = Path(source)
    times, usage, problems = cline.ui_facts(path) if cline.is_history(path) else ({}, {}, [])
    decoder = cline.ClineDecoder(source, session)
    events: list[Event] = []
    model: str | None = None
    start = base - len(document)
    for index, message in enumerate(document, start=1):
        if not isinstance(message, dict):
            problems.append(
                Problem(source, index, f"message: expected an object, got {type(message).__name__}")
            )
            continue
        if message.get("ts") is None and message.get("timestamp") is None and index - 1 in times:
            message = {**message, "timestamp": times[index - 1]}
        info = message.get("modelInfo")
        if model is None and isinstance(info, dict) and isinstance(info.get("modelId"), str):
            model = info["modelId"]
        try:
            new = decoder.decode(message, index, start + index)
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
            continue
        request = usage.get(index - 1)
        if request is not None and message.get("role") == "assistant":
            # The UI's record of the request has its cost too: it wins over metrics.tokens.
            spent = cline.usage_event(request, session, new[-1].ts if new else start + index, source, index)
            if spent is not None:
                new = [e for e in new if e.kind is not Kind.USAGE] + [spent]
        events.extend(new)
    opening = Event(
        kind=Kind.SESSION_START,
        session=session,
        ts=events[0].ts if events else base,
        source=source,
        line=None,
        agent=cline.AGENT,
        meta={"model": model} if model else {},
    )
    return [opening, *events], problems


# -- Gemini CLI -------------------------------------------------------------------


def _load_gemini(document: Any, source: str, session: str, base: float) -> tuple[list[Event], list[Problem]]:
    if not gemini.is_chat(document):
        return [], [
            Problem(source, None, "not a Gemini CLI chat (expected sessionId, projectHash and messages)")
        ]
    decoder = gemini.GeminiDecoder(source, session)
    problems: list[Problem] = []
    try:
        events = [decoder.header(document, None, base)]
    except RecordError as exc:
        problems.append(Problem(source, None, str(exc)))
        events = [decoder.header({}, None, base)]
    for index, message in enumerate(document["messages"], start=1):
        if not isinstance(message, dict):
            problems.append(
                Problem(source, index, f"message: expected an object, got {type(message).__name__}")
            )
            continue
        try:
            events.extend(decoder.decode(message, index, base))
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
    return events, problems


# -- SWE-agent ------------------------------------------------------------------


def _is_swe_agent(document: dict[str, Any]) -> bool:
    steps = document.get("trajectory")
    return isinstance(steps, list) and all(
        isinstance(s, dict) and "observation" in s and "action" in s and "source" not in s for s in steps[:3]
    )


def _tool_of(command: str) -> str:
    words = command.split()
    return words[0] if words else "command"


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # newer SWE-agent: content blocks
        return "\n".join(v.get("text", "") if isinstance(v, dict) else str(v) for v in value)
    return str(value)


def _load_swe_agent(
    document: Any, source: str, session: str, base: float
) -> tuple[list[Event], list[Problem]]:
    problems: list[Problem] = []
    if not isinstance(document, dict):
        return [], [
            Problem(source, None, f"SWE-agent trajectory: expected an object, got {type(document).__name__}")
        ]
    steps = document.get("trajectory")
    history = document.get("history")
    info = _dict(document.get("info"))
    if steps is None:
        steps = []
    if not isinstance(steps, list):
        return [], [Problem(source, None, f"trajectory: expected a list, got {type(steps).__name__}")]
    history = history if isinstance(history, list) else []

    durations = [s.get("execution_time") for s in steps if isinstance(s, dict)]
    total = sum(d for d in durations if isinstance(d, (int, float)) and not isinstance(d, bool))
    clock = [base - max(total, float(len(steps)))]

    def event(kind: Kind, line: int | None, **fields: Any) -> Event:
        return Event(kind=kind, session=session, ts=clock[0], source=source, line=line, **fields)

    meta: dict[str, Any] = {}
    if isinstance(document.get("environment"), str):
        meta["environment"] = document["environment"]
    events = [event(Kind.SESSION_START, None, agent="swe-agent", meta=meta)]
    events.extend(_swe_task(event, history))

    if steps:
        events.extend(_swe_steps(event, steps, _role_tasks(history, len(steps)), clock, problems, source))
    else:
        events.extend(_swe_history(event, history, clock, problems, source))

    last = len(steps) or None
    events.extend(_swe_usage(event, info, last))
    status = info.get("exit_status")
    if isinstance(status, str) and status:
        events.append(event(Kind.SESSION_END, last, status=status))
    return events, problems


def _swe_task(event: Callable[..., Event], history: list[Any]) -> list[Event]:
    """The task: the user's messages in the history before the first reply (no demonstrations)."""
    found: list[Event] = []
    for entry in history:
        if not isinstance(entry, dict):
            continue
        role = entry.get("role")
        if role == "assistant":
            break
        if (
            role == "user"
            and not entry.get("is_demo")
            and entry.get("message_type") in (None, "user", "task")
        ):
            text = _text(entry.get("content"))
            if text.strip():
                found.append(event(Kind.MESSAGE, None, role="user", content=text))
    return found


def _swe_steps(
    event: Callable[..., Event],
    steps: list[Any],
    handoffs: dict[int, str],
    clock: list[float],
    problems: list[Problem],
    source: str,
) -> list[Event]:
    """The events of ``trajectory``'s steps, each role's task (``handoffs``) before its first."""
    out: list[Event] = []
    for index, step in enumerate(steps, start=1):
        if index in handoffs:
            out.append(event(Kind.MESSAGE, index, role="user", content=handoffs[index]))
        if not isinstance(step, dict):
            problems.append(
                Problem(source, index, f"trajectory step: expected an object, got {type(step).__name__}")
            )
            continue
        spent = step.get("execution_time")
        clock[0] += spent if isinstance(spent, (int, float)) and not isinstance(spent, bool) else 1.0
        out.extend(
            _swe_step(
                event,
                index,
                step.get("thought"),
                step.get("action"),
                step.get("observation"),
                problems,
                source,
            )
        )
    return out


def _role_tasks(history: list[Any], steps: int) -> dict[int, str]:
    """Where a multi-agent run on SWE-agent (CodeR: history entries name their ``agent``)
    hands the work to another role, the task that role is given (the last user message,
    not a demonstration, before the stint's first reply), by the step it precedes: the
    new role starts from a fresh context, as after a person's message.  Nothing when
    the history's replies do not match the steps one to one, or name no roles."""
    tasks: dict[int, str] = {}
    step = 0
    agent: Any = None
    task: str | None = None
    opening = False  # a stint begun, its first reply not yet made
    for entry in history:
        if not isinstance(entry, dict):
            continue
        if entry.get("agent") != agent:
            agent, task, opening = entry.get("agent"), None, True
        role = entry.get("role")
        if role == "user" and opening and step and not entry.get("is_demo"):
            task = _text(entry.get("content"))  # (the first stint's task is the run's: _swe_task)
        elif role == "assistant":
            step += 1
            if task:
                tasks[step] = task
            task, opening = None, False
    if step != steps or agent is None:
        return {}
    return tasks


def _swe_usage(event: Callable[..., Event], info: dict[str, Any], last: int | None) -> list[Event]:
    """The run's token and cost totals (``info.model_stats``), as one usage event."""
    found: list[Event] = []
    stats = info.get("model_stats")
    if isinstance(stats, dict):

        def number(key: str) -> Any:
            value = stats.get(key)
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        sent, received, cost = number("tokens_sent"), number("tokens_received"), number("instance_cost")
        if sent is not None or received is not None or cost is not None:
            found.append(
                event(
                    Kind.USAGE,
                    last,
                    input_tokens=None if sent is None else int(sent),
                    output_tokens=None if received is None else int(received),
                    cost_usd=None if cost is None else float(cost),
                )
            )
    return found


def _swe_step(
    event: Callable[..., Event],
    index: int,
    thought: Any,
    action: Any,
    observation: Any,
    problems: list[Problem],
    source: str,
) -> list[Event]:
    out: list[Event] = []
    thought_text = _text(thought).strip()
    if thought_text:
        out.append(event(Kind.MESSAGE, index, role="assistant", content=thought_text))
    if action is None or (isinstance(action, str) and not action.strip()):
        return out
    if not isinstance(action, str):
        problems.append(Problem(source, index, f"action: expected text, got {type(action).__name__}"))
        return out
    command = action.strip()
    call_id = f"step-{index}"
    out.append(
        event(Kind.TOOL_CALL, index, tool=_tool_of(command), args={"command": command}, call_id=call_id)
    )
    if observation is not None:
        out.append(event(Kind.TOOL_RESULT, index, call_id=call_id, content=_text(observation)))
    return out


def _swe_history(
    event: Callable[..., Event], history: list[Any], clock: list[float], problems: list[Problem], source: str
) -> list[Event]:
    """Steps rebuilt from ``history`` when ``trajectory`` is empty."""
    out: list[Event] = []
    pending: tuple[int, Any, Any] | None = None
    seen_assistant = False
    for index, entry in enumerate(history, start=1):
        if not isinstance(entry, dict):
            continue
        if entry.get("role") == "assistant" and entry.get("action") is not None:
            if pending:
                out.extend(_swe_step(event, *pending, None, problems, source))
            seen_assistant = True
            clock[0] += 1.0
            pending = (index, entry.get("thought"), entry.get("action"))
        elif seen_assistant and entry.get("role") == "user" and pending:
            out.extend(
                _swe_step(event, pending[0], pending[1], pending[2], entry.get("content"), problems, source)
            )
            pending = None
    if pending:
        out.extend(_swe_step(event, *pending, None, problems, source))
    return out


# -- OpenHands ------------------------------------------------------------------


def _openhands_events(document: Any) -> list[Any] | None:
    if isinstance(document, list):
        return document
    if is_v1_event(document) and document.get("kind") not in ("", None):
        return [document]  # one event file of a V1 conversation
    if isinstance(document, dict):
        for key in ("history", "trajectory", "events"):
            events = document.get(key)
            if isinstance(events, list):
                return events
    return None


def _load_openhands(
    document: Any, source: str, session: str, base: float
) -> tuple[list[Event], list[Problem]]:
    items = _openhands_events(document)
    if items is None:
        return [], [
            Problem(
                source,
                None,
                "not an OpenHands event list (expected a JSON list of events, or an object with 'history')",
            )
        ]
    problems: list[Problem] = []
    events: list[Event] = []
    state = {"ts": base, "tokens_in": 0, "tokens_out": 0, "cost": 0.0}
    start = Event(
        kind=Kind.SESSION_START, session=session, ts=base, source=source, line=None, agent="openhands"
    )
    events.append(start)
    v1 = V1Reader(source, session)
    for index, item in enumerate(items, start=1):
        if item is _UNREADABLE:
            continue  # reported by _read_events_dir
        if not isinstance(item, dict):
            problems.append(Problem(source, index, f"expected an event object, got {type(item).__name__}"))
            continue
        try:
            if is_v1_event(item):
                events.extend(v1.decode(item, index, state["ts"]))
                state["ts"] = v1.ts if v1.ts is not None else state["ts"]
            else:
                events.extend(_openhands_event(item, index, source, session, state))
        except RecordError as exc:
            problems.append(Problem(source, index, str(exc)))
    if len(events) > 1:
        start.ts = events[1].ts
    return events, problems


def _openhands_event(
    item: dict[str, Any], index: int, source: str, session: str, state: dict[str, Any]
) -> list[Event]:
    if item.get("timestamp") is not None:
        state["ts"] = parse_ts(item.get("timestamp"), state["ts"], "timestamp")
    ts = state["ts"]

    def event(kind: Kind, **fields: Any) -> Event:
        return Event(kind=kind, session=session, ts=ts, source=source, line=index, **fields)

    out: list[Event] = []
    for key in ("action", "observation"):
        if key in item and not isinstance(item[key], str):
            raise RecordError(f"{key}: expected a name, got {type(item[key]).__name__}")
    if "action" in item:
        action = item.get("action")
        args = _dict(item.get("args"))
        origin = item.get("source")
        if action == "message":
            text = _text(args.get("content", item.get("message")))
            if origin in ("user", "agent") and text.strip():
                out.append(
                    event(Kind.MESSAGE, role="user" if origin == "user" else "assistant", content=text)
                )
        elif action == "condensation":
            out.append(event(Kind.COMPACTION))
        elif action == "finish":
            text = _text(args.get("final_thought") or args.get("thought") or item.get("message"))
            if text.strip():
                out.append(event(Kind.MESSAGE, role="assistant", content=text))
        elif action in _OPENHANDS_TOOL_ACTIONS or isinstance(item.get("tool_call_metadata"), dict):
            out += _openhands_call(item, action, args, event, index)
        # system, recall, change_agent_state, null, …: nothing to detect
        out.extend(_openhands_usage(item, event, state))
        return out
    if "observation" in item:
        return _openhands_observation(item, event)
    raise RecordError("event has neither 'action' nor 'observation'")


def _openhands_call(
    item: dict[str, Any], action: Any, args: dict[str, Any], event: Callable[..., Event], index: int
) -> list[Event]:
    """A tool action: its thought (if any) as a message, then the call."""
    out: list[Event] = []
    thought = _text(args.get("thought")).strip()
    if thought:
        out.append(event(Kind.MESSAGE, role="assistant", content=thought))
    metadata = item.get("tool_call_metadata")
    tool = metadata.get("function_name") if isinstance(metadata, dict) else None
    if not isinstance(tool, str) or not tool:
        tool = str(action)
    call_args = {k: v for k, v in args.items() if k not in _OPENHANDS_META_ARGS}
    if action != tool:
        call_args.setdefault("action", action)
    meta = {}
    if isinstance(metadata, dict) and isinstance(metadata.get("tool_call_id"), str):
        meta["tool_call_id"] = metadata["tool_call_id"]
    out.append(
        event(
            Kind.TOOL_CALL,
            tool=tool,
            args=call_args,
            call_id=f"oh-{item.get('id', index)}",
            meta=meta,
        )
    )
    return out


def _openhands_observation(item: dict[str, Any], event: Callable[..., Event]) -> list[Event]:
    """An observation: the result of the call it names as its cause (an error with none is a message)."""
    out: list[Event] = []
    observation = item.get("observation")
    cause = item.get("cause")
    if observation in _OPENHANDS_SKIPPED_OBSERVATIONS:
        return out
    content = _text(item.get("content", item.get("message")))
    extras = _dict(item.get("extras"))
    is_error = observation in ("error", "user_rejected") or item.get("success") is False
    metadata = extras.get("metadata")
    exit_code = metadata.get("exit_code") if isinstance(metadata, dict) else extras.get("exit_code")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code > 0:
        is_error = True
    if cause is None:
        if observation == "error" and content.strip():
            out.append(event(Kind.MESSAGE, role="system", content=content))
        return out
    out.append(
        event(
            Kind.TOOL_RESULT,
            call_id=f"oh-{cause}",
            content=content,
            is_error=is_error,
            meta={} if not isinstance(exit_code, int) else {"exit_code": exit_code},
        )
    )
    return out


#: One V0 event (for the evaluation output reader, :mod:`monitor.formats.openhands_eval`).
openhands_event = _openhands_event


def _openhands_usage(item: dict[str, Any], event: Callable[..., Event], state: dict[str, Any]) -> list[Event]:
    """A usage event when the accumulated token counts or cost grew."""
    metrics = item.get("llm_metrics")
    if not isinstance(metrics, dict):
        return []
    usage = metrics.get("accumulated_token_usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens_in = usage.get("prompt_tokens")
    tokens_out = usage.get("completion_tokens")
    cost = metrics.get("accumulated_cost")
    tokens_in = tokens_in if isinstance(tokens_in, int) else state["tokens_in"]
    tokens_out = tokens_out if isinstance(tokens_out, int) else state["tokens_out"]
    cost = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else state["cost"]
    if (tokens_in, tokens_out, cost) == (state["tokens_in"], state["tokens_out"], state["cost"]):
        return []
    delta = event(
        Kind.USAGE,
        input_tokens=max(tokens_in - state["tokens_in"], 0),
        output_tokens=max(tokens_out - state["tokens_out"], 0),
        cost_usd=max(cost - state["cost"], 0.0),
    )
    state.update(tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
    return [delta]
