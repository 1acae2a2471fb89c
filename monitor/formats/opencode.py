"""OpenCode sessions: its SQLite ``opencode.db``, and the older ``storage/`` JSON files.

OpenCode (1.x) keeps every session in ``~/.local/share/opencode/opencode.db``
(``$XDG_DATA_HOME/opencode``): tables ``session`` (``id``, ``parent_id``,
``title``, ``directory``, ``version``, …), ``message`` (``id``,
``session_id``, ``data``: ``{role, time, modelID, error?, …}`` as JSON) and
``part`` (``id``, ``message_id``, ``session_id``, ``time_created``, ``data``:
one part of a message as JSON).  A part is written when it starts and
updated in place as it goes on (a tool part ``pending`` → ``running`` →
``completed`` | ``error``).  Before 1.x the same objects were one JSON file
each: ``storage/session/<project>/<ses>.json``,
``storage/message/<ses>/<msg>.json``, ``storage/part/<msg>/<prt>.json``.

| part ``type``        | events                                                 |
|----------------------|--------------------------------------------------------|
| ``text`` (user)      | a user message (``synthetic``: a system message)       |
| ``text`` (assistant) | an assistant message, once it is finished              |
| ``tool``             | a tool call once ``running`` (``tool``, ``state.input``, id ``callID``); its result once ``completed`` (``state.output``; an error when ``metadata.exit`` ≠ 0) or ``error`` (``state.error``) |
| ``step-finish``      | usage (``tokens.input``, ``output``, ``cache.read``; ``cost``) |
| ``compaction``       | a compaction                                           |

An assistant message's own ``error`` (``{name, data: {message, …}}``:
``APIError``, ``MessageAbortedError``, ``ProviderAuthError``,
``MessageOutputLengthError``, ``ContextOverflowError``, ``UnknownError``;
``MessageV2.Assistant`` in OpenCode's ``packages/opencode/src/session/message-v2.ts``)
is what the agent got back instead of a response: a system message
(``"APIError: …"``, ``meta.error`` the name) after the message's parts.

``reasoning``, ``step-start``, ``snapshot``, ``patch``, ``file``, ``agent``,
``subtask`` and ``retry`` parts are skipped (counted).  Each session is its
own session (its ``parent_id``, a subagent's parent, kept).  The "line" of an
event is the part's ``rowid`` in the database (in ``storage/``, its 1-based
place in its session).  :class:`PartReader` remembers what it emitted for each
part, so a part read again (``watch`` polls the rows still going on) adds only
what is new.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import Problem
from monitor.formats.sqlite_db import load_rows

AGENT = "opencode"
#: Parts that carry nothing to detect.
_SKIPPED = frozenset({"reasoning", "step-start", "snapshot", "patch", "file", "agent", "subtask", "retry"})
#: Parts remembered as emitted (bounded: a database can hold every session a person ever ran).
_MEMORY = 50_000
#: Rows read per query.
BATCH = 2000

_PART_QUERY = (
    "SELECT p.rowid, p.id, p.session_id, p.time_created, p.data, m.data, p.message_id FROM part p "
    "LEFT JOIN message m ON m.id = p.message_id "
)


@dataclass(frozen=True, slots=True)
class Row:
    """One part as read, with its message's data."""

    line: int
    part_id: str
    session: str
    created_ms: int | None
    data: Any
    message: Any
    message_id: str = ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json(raw: Any) -> Any:
    if isinstance(raw, (bytes, str)):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
    return raw


class PartReader:
    """Turns OpenCode parts into events, each part's events once however often it is read."""

    def __init__(self, source: str):
        self.source = source
        #: Stages emitted per part id: "text", "call", "result", "usage", "other".
        self.done: dict[str, set[str]] = {}
        self.started: set[str] = set()
        self.sessions: dict[str, dict[str, Any]] = {}
        self.skipped: dict[str, int] = {}
        #: Messages whose own error was handed on (by message id).
        self.errors: set[str] = set()
        #: The message of the last part read (its error follows its last part) and that part's row.
        self.current: Row | None = None

    def message_error(
        self, session: str, message_id: str, message: Any, line: int | None, ts: float
    ) -> list[Event]:
        """A system message for the error recorded on the message itself, once per message."""
        text = error_text(message)
        if text is None or message_id in self.errors:
            return []
        self.errors.add(message_id)
        if len(self.errors) > _MEMORY:
            self.errors.pop()
        out: list[Event] = []
        if session not in self.started:
            self.started.add(session)
            out.append(self._start(session, ts, _dict(message)))
        name = _dict(_dict(message).get("error")).get("name")
        when = _number(_dict(_dict(message).get("time")).get("completed"))
        out.append(
            Event(
                kind=Kind.MESSAGE,
                session=session,
                ts=ts if when is None else when / 1000.0,
                source=self.source,
                line=line or None,
                role="system",
                content=text,
                meta={"error": name} if isinstance(name, str) else {},
            )
        )
        return out

    def read_in_order(self, row: Row) -> tuple[list[Event], list[Problem]]:
        """:meth:`read` for parts read in their messages' order (the database): the previous
        message's error, if it had one, comes once its last part has been read."""
        out = self.flush() if self.current is not None and self.current.message_id != row.message_id else []
        self.current = row
        new, bad = self.read(row)
        return out + new, bad

    def flush(self) -> list[Event]:
        """The error of the message of the last part read (when it has one)."""
        row = self.current
        if row is None or not row.message_id:
            return []
        ts = (row.created_ms or 0) / 1000.0
        return self.message_error(row.session, row.message_id, row.message, row.line, ts)

    def finished(self, part_id: str) -> bool:
        """Whether nothing more can come of this part."""
        return bool(self.done.get(part_id, set()) & {"text", "result", "usage", "other"})

    def read(self, row: Row) -> tuple[list[Event], list[Problem]]:
        """The new events of one part (read for the first time or again)."""
        data, message = _dict(row.data), _dict(row.message)
        if not data:
            return [], [Problem(self.source, row.line, f"part {row.part_id}: data is not a JSON object")]
        kind = data.get("type")
        done = self.done.setdefault(row.part_id, set())
        if len(self.done) > _MEMORY:
            self.done.pop(next(iter(self.done)))
        ts = (row.created_ms or 0) / 1000.0
        out: list[Event] = []
        if row.session not in self.started:
            self.started.add(row.session)
            out.append(self._start(row.session, ts, message))

        def event(kind: Kind, when: float = ts, **fields: Any) -> Event:
            return Event(kind=kind, session=row.session, ts=when, source=self.source, line=row.line, **fields)

        if kind == "text":
            out.extend(self._text(event, data, message, done))
        elif kind == "tool":
            out.extend(self._tool(event, data, done, ts))
        elif kind == "step-finish" and "usage" not in done:
            done.add("usage")
            out.append(_usage(event, data))
        elif kind == "compaction" and "other" not in done:
            done.add("other")
            out.append(event(Kind.COMPACTION))
        elif "other" not in done:
            done.add("other")
            what = kind if isinstance(kind, str) and kind in _SKIPPED else "unknown part"
            self.skipped[what] = self.skipped.get(what, 0) + 1
        return out, []

    def _start(self, session: str, ts: float, message: dict[str, Any]) -> Event:
        info = self.sessions.get(session, {})
        meta: dict[str, Any] = {}
        for key, name in (("title", "title"), ("directory", "cwd"), ("version", "version")):
            if isinstance(info.get(key), str):
                meta[name] = info[key]
        model = message.get("modelID")
        if isinstance(model, str):
            meta["model"] = model
        parent = info.get("parent_id")
        return Event(
            kind=Kind.SESSION_START,
            session=session,
            ts=ts,
            source=self.source,
            agent=AGENT,
            parent=parent if isinstance(parent, str) and parent else None,
            meta=meta,
        )

    def _text(
        self, event: Callable[..., Event], data: dict[str, Any], message: dict[str, Any], done: set[str]
    ) -> list[Event]:
        text = data.get("text")
        if "text" in done or not isinstance(text, str):
            return []
        role = message.get("role")
        if role == "assistant":
            over = _dict(data.get("time")).get("end") or _dict(message.get("time")).get("completed")
            if not over and not message.get("error"):
                return []  # still being written: read when it is finished
        done.add("text")
        if not text.strip() or data.get("ignored"):
            return []
        when = _number(_dict(data.get("time")).get("start"))
        role = "system" if data.get("synthetic") else ("assistant" if role == "assistant" else "user")
        kwargs = {"when": when / 1000.0} if when is not None else {}
        return [event(Kind.MESSAGE, role=role, content=text, **kwargs)]

    def _tool(
        self, event: Callable[..., Event], data: dict[str, Any], done: set[str], ts: float
    ) -> list[Event]:
        state = _dict(data.get("state"))
        status = state.get("status")
        name = data.get("tool") if isinstance(data.get("tool"), str) else "tool"
        call_id = str(data.get("callID") or data.get("id") or "")
        times = _dict(state.get("time"))
        out: list[Event] = []
        if "call" not in done and status in ("running", "completed", "error"):
            done.add("call")
            start = _number(times.get("start"))
            args = state.get("input") if isinstance(state.get("input"), dict) else {}
            out.append(
                event(
                    Kind.TOOL_CALL,
                    ts if start is None else start / 1000.0,
                    tool=name,
                    args=args,
                    call_id=call_id,
                )
            )
        if "result" not in done and status in ("completed", "error"):
            done.add("result")
            end = _number(times.get("end"))
            exit_code = _int(_dict(state.get("metadata")).get("exit"))
            content = state.get("output") if status == "completed" else state.get("error")
            meta: dict[str, Any] = {"status": status}
            if exit_code is not None:
                meta["exit_code"] = exit_code
            out.append(
                event(
                    Kind.TOOL_RESULT,
                    ts if end is None else end / 1000.0,
                    tool=name,
                    call_id=call_id,
                    content=content if isinstance(content, str) else orjson.dumps(content).decode(),
                    is_error=status == "error" or bool(exit_code),
                    meta=meta,
                )
            )
        return out


def error_text(message: Any) -> str | None:
    """``"<name>: <message>"`` of a message's own ``error`` (None: it has none)."""
    error = _dict(message).get("error")
    if not error:
        return None
    if not isinstance(error, dict):
        return f"error: {error}"
    name = error.get("name") if isinstance(error.get("name"), str) else "error"
    detail = _dict(error.get("data")).get("message")
    if not isinstance(detail, str) or not detail:
        detail = error.get("message") if isinstance(error.get("message"), str) else ""
    return f"{name}: {detail}" if detail else name


def _usage(event: Callable[..., Event], data: dict[str, Any]) -> Event:
    tokens = _dict(data.get("tokens"))
    cache = _dict(tokens.get("cache"))
    cached = _int(cache.get("read"))
    return event(
        Kind.USAGE,
        input_tokens=_int(tokens.get("input")),
        output_tokens=_int(tokens.get("output")),
        cost_usd=_number(data.get("cost")),
        meta={"cached_input_tokens": cached} if cached else {},
    )


# -- the database --------------------------------------------------------------------


def rows(cursor: Iterable[tuple[Any, ...]]) -> Iterator[Row]:
    """The :class:`Row` of each result row of :data:`_PART_QUERY`."""
    for line, part_id, session, created, data, message, message_id in cursor:
        yield Row(
            int(line), str(part_id), str(session), _int(created), _json(data), _json(message), str(message_id)
        )


def session_info(connection: sqlite3.Connection, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Title, folder, version and parent of the sessions ``ids`` (the columns this database has)."""
    have = {row[1] for row in connection.execute("PRAGMA table_info(session)")}
    wanted = [c for c in ("id", "parent_id", "title", "directory", "version") if c in have]
    ids = list(ids)
    if "id" not in wanted or not ids:
        return {}
    marks = ",".join("?" * len(ids))
    query = f"SELECT {', '.join(wanted)} FROM session WHERE id IN ({marks})"  # noqa: S608 (names checked)
    return {str(r[0]): dict(zip(wanted, r, strict=True)) for r in connection.execute(query, ids)}


def read_after(
    connection: sqlite3.Connection, reader: PartReader, after: int, limit: int = BATCH
) -> tuple[list[Row], int]:
    """The next parts after ``rowid`` ``after`` and the last rowid read."""
    found = list(
        rows(connection.execute(_PART_QUERY + "WHERE p.rowid > ? ORDER BY p.rowid LIMIT ?", (after, limit)))
    )
    _know_sessions(connection, reader, found)
    return found, max((r.line for r in found), default=after)


def read_lines(connection: sqlite3.Connection, reader: PartReader, lines: list[int]) -> list[Row]:
    """The parts of these rowids, read again (they were still going on)."""
    found: list[Row] = []
    for start in range(0, len(lines), 500):
        chunk = lines[start : start + 500]
        marks = ",".join("?" * len(chunk))
        query = _PART_QUERY + f"WHERE p.rowid IN ({marks}) ORDER BY p.rowid"
        found.extend(rows(connection.execute(query, chunk)))
    _know_sessions(connection, reader, found)
    return found


def _know_sessions(connection: sqlite3.Connection, reader: PartReader, found: list[Row]) -> None:
    new = {r.session for r in found} - set(reader.sessions)
    if new:
        reader.sessions.update(session_info(connection, new))
        for session in new:
            reader.sessions.setdefault(session, {})


def load_db(path: Path) -> tuple[list[Event], list[Problem]]:
    """Every event of an ``opencode.db`` (``scan``: one read of every part, in rowid order)."""
    reader = PartReader(str(path))
    return load_rows(
        path,
        lambda connection, after: read_after(connection, reader, after),
        reader.read_in_order,
        reader.flush,
    )


# -- the storage/ JSON files -----------------------------------------------------------


def storage_root(path: Path) -> Path | None:
    """The ``storage/`` folder of OpenCode's JSON layout, when ``path`` is it or holds it."""
    for folder in (path, path / "storage"):
        if (folder / "part").is_dir() and (folder / "message").is_dir() and (folder / "session").is_dir():
            return folder
    return None


def read_json(file: Path, problems: list[Problem], source: str) -> dict[str, Any] | None:
    """One ``storage/`` object (a problem, and None, when it is not one)."""
    try:
        value = orjson.loads(file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        problems.append(Problem(source, None, f"{file.name}: cannot be read as JSON ({exc})"))
        return None
    if not isinstance(value, dict):
        problems.append(Problem(source, None, f"{file.name}: expected an object"))
        return None
    return value


def session_files(root: Path) -> dict[str, dict[str, Any]]:
    """Title, folder, version and parent of every session of a ``storage/`` folder, by id."""
    found: dict[str, dict[str, Any]] = {}
    for file in sorted((root / "session").glob("*/*.json")):
        info = read_json(file, [], str(root))
        if info is not None and isinstance(info.get("id"), str):
            found[info["id"]] = {
                "title": info.get("title"),
                "directory": info.get("directory"),
                "version": info.get("version"),
                "parent_id": info.get("parentID"),
            }
    return found


def layout(root: Path, session: str) -> list[tuple[Path, list[Path]]]:
    """A session's message files in id order (OpenCode's ids ascend with time), each with its
    part files in id order: the n-th part file is the session's line n."""
    out = []
    for message_file in sorted((root / "message" / session).glob("*.json")):
        parts = root / "part" / message_file.stem
        out.append((message_file, sorted(parts.glob("*.json")) if parts.is_dir() else []))
    return out


def storage_row(
    part: dict[str, Any], message: dict[str, Any], part_file: Path, session: str, line: int
) -> Row:
    """The :class:`Row` of one ``storage/`` part (its time: its own start, else its message's)."""
    created = _int(_dict(part.get("time")).get("start")) or _int(_dict(message.get("time")).get("created"))
    return Row(line, part_file.stem, session, created, part, message, part_file.parent.name)


def message_time(message: dict[str, Any]) -> float:
    return (_int(_dict(message.get("time")).get("created")) or 0) / 1000.0


def load_storage(root: Path) -> tuple[list[Event], list[Problem]]:
    """Every event of a ``storage/`` folder: each session's messages and parts in id order;
    the line is the part's place in its session (see :func:`layout`)."""
    source = str(root)
    problems: list[Problem] = []
    reader = PartReader(source)
    reader.sessions.update(session_files(root))
    events: list[Event] = []
    for folder in sorted(p for p in (root / "message").iterdir() if p.is_dir()):
        session, line = folder.name, 0
        for message_file, part_files in layout(root, session):
            message = read_json(message_file, problems, source)
            if message is None:  # (whose parts they are is not known: not read, but counted)
                line += len(part_files)
                continue
            for part_file in part_files:
                line += 1
                part = read_json(part_file, problems, source)
                if part is not None:
                    new, bad = reader.read(storage_row(part, message, part_file, session, line))
                    events.extend(new)
                    problems.extend(bad)
            events.extend(
                reader.message_error(session, message_file.stem, message, line, message_time(message))
            )
    return events, problems


__all__ = [
    "AGENT",
    "PartReader",
    "Row",
    "error_text",
    "layout",
    "message_time",
    "read_json",
    "session_files",
    "storage_row",
    "load_db",
    "load_storage",
    "read_after",
    "read_lines",
    "storage_root",
]
