"""SQLite databases of agents for the tests, written as the agents write them.

* OpenCode: the real ``tests/fixtures/opencode/opencode.db`` (copied before use),
  and :func:`add_part` inserting or updating a part as OpenCode's
  ``MessageV2.Event.PartUpdated`` projector does
  (``packages/opencode/src/session/projectors.ts``: ``insert … on conflict (id) do update set data``).
* Goose: the real, empty ``tests/fixtures/goose/sessions.db`` (schema version 5)
  and :func:`goose_session` filling it with Goose's own statements
  (block/goose ``crates/goose/src/session/session_manager.rs`` at commit
  0164300649cf5e4ab327105d9155779ab8bfde4b: ``create_session``, ``add_message``,
  ``replace_conversation``), the content serialized as its ``MessageContent``
  (``crates/goose/src/conversation/message.rs`` and ``tool_result_serde.rs``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
OPENCODE = FIXTURES / "opencode" / "opencode.db"
GOOSE = FIXTURES / "goose" / "sessions.db"


def opencode_copy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "opencode.db"
    shutil.copy(OPENCODE, target)
    return target


def opencode_parts(db: Path = OPENCODE) -> list[dict[str, Any]]:
    """Every part of an OpenCode database with its message, in rowid order."""
    uri = f"file:{db}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as connection:
        rows = connection.execute(
            "SELECT p.id, p.message_id, p.session_id, p.time_created, p.data, m.data FROM part p "
            "JOIN message m ON m.id = p.message_id ORDER BY p.rowid"
        ).fetchall()
    return [
        {
            "id": r[0],
            "message_id": r[1],
            "session_id": r[2],
            "time": r[3],
            "data": json.loads(r[4]),
            "message": json.loads(r[5]),
        }
        for r in rows
    ]


def add_part(
    connection: sqlite3.Connection, session: str, message: str, part: str, data: dict[str, Any], time_ms: int
) -> None:
    """A part inserted, or its data replaced, as OpenCode's projector writes it."""
    connection.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET data = excluded.data, time_updated = excluded.time_updated",
        (part, message, session, time_ms, time_ms, json.dumps(data)),
    )


def add_message(
    connection: sqlite3.Connection, session: str, message: str, data: dict[str, Any], time_ms: int
) -> None:
    connection.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET data = excluded.data",
        (message, session, time_ms, time_ms, json.dumps(data)),
    )


# -- Goose ------------------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_request(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "toolRequest",
        "id": call_id,
        "toolCall": {"status": "success", "value": {"name": name, "arguments": arguments}},
    }


def tool_response(call_id: str, output: str, is_error: bool = False) -> dict[str, Any]:
    value = {"content": [text(output)], "isError": is_error}
    return {"type": "toolResponse", "id": call_id, "toolResult": {"status": "success", "value": value}}


def goose_messages() -> list[tuple[str, list[dict[str, Any]]]]:
    """A Goose session stuck running the same failing test: (role, content) per message."""
    messages: list[tuple[str, list[dict[str, Any]]]] = [
        ("user", [text("The parser test fails; please fix it.")])
    ]
    for n in range(6):
        call = f"toolu_{n:02d}"
        messages.append(
            (
                "assistant",
                [
                    text("Let me run the tests again."),
                    tool_request(call, "developer__shell", {"command": "pytest -q tests/test_parser.py"}),
                ],
            )
        )
        messages.append(
            (
                "user",
                [
                    tool_response(
                        call, "FAILED tests/test_parser.py::test_quotes - AssertionError\n1 failed", False
                    )
                ],
            )
        )
    messages.append(
        (
            "assistant",
            [
                {
                    "type": "toolRequest",
                    "id": "toolu_bad",
                    "toolCall": {"status": "error", "error": "Tool not found: developer__shel"},
                }
            ],
        )
    )
    messages.append(
        (
            "user",
            [
                {
                    "type": "toolResponse",
                    "id": "toolu_bad",
                    "toolResult": {"status": "error", "error": "Tool not found"},
                }
            ],
        )
    )
    messages.append(
        ("assistant", [{"type": "thinking", "thinking": "hm", "signature": "s"}, text("I could not fix it.")])
    )
    return messages


def goose_session(
    db: Path, start: int = 1_764_694_735, messages: list[tuple[str, list[dict[str, Any]]]] | None = None
) -> str:
    """A session created and filled by Goose's statements; returns its id."""
    with sqlite3.connect(db) as connection:
        today = "20251202"
        (session,) = connection.execute(
            "INSERT INTO sessions (id, name, user_set_name, session_type, working_dir, extension_data) VALUES ("
            "? || '_' || CAST(COALESCE((SELECT MAX(CAST(SUBSTR(id, 10) AS INTEGER)) FROM sessions WHERE id LIKE ? || '_%'), 0) + 1 AS TEXT),"
            " ?, FALSE, ?, ?, '{}') RETURNING id",
            (today, today, "fix the parser", "user", "/home/me/parser"),
        ).fetchone()
        for offset, (role, content) in enumerate(messages if messages is not None else goose_messages()):
            goose_add(connection, session, role, content, start + offset)
    return str(session)


def goose_add(
    connection: sqlite3.Connection, session: str, role: str, content: list[dict[str, Any]], created: int
) -> None:
    """``SessionStorage::add_message``."""
    connection.execute(
        "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) VALUES (?, ?, ?, ?, ?)",
        (
            session,
            role,
            json.dumps(content),
            created,
            json.dumps({"userVisible": True, "agentVisible": True}),
        ),
    )
    connection.execute("UPDATE sessions SET updated_at = datetime('now') WHERE id = ?", (session,))


def goose_copy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "sessions.db"
    shutil.copy(GOOSE, target)
    return target


def storage_from(db: Path, root: Path) -> Path:
    """OpenCode's older ``storage/`` layout of the same sessions: one JSON file an object, its ids inside,
    where pre-1.x OpenCode's ``Session.updateMessage`` / ``updatePart`` (``packages/opencode/src/session/
    index.ts``) put them with ``Storage.write(["message", sessionID, id])``, ``(["part", messageID, id])``
    and the session under ``["session", projectID, id]``."""
    uri = f"file:{db}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as connection:
        for sid, project, title, directory, version, parent in connection.execute(
            "SELECT id, project_id, title, directory, version, parent_id FROM session"
        ):
            info = {
                "id": sid,
                "projectID": project,
                "title": title,
                "directory": directory,
                "version": version,
            }
            if parent:
                info["parentID"] = parent
            _write(root / "session" / project / f"{sid}.json", info)
        for mid, sid, data in connection.execute("SELECT id, session_id, data FROM message"):
            _write(root / "message" / sid / f"{mid}.json", {"id": mid, "sessionID": sid, **json.loads(data)})
        for pid, mid, sid, data in connection.execute("SELECT id, message_id, session_id, data FROM part"):
            _write(
                root / "part" / mid / f"{pid}.json",
                {"id": pid, "sessionID": sid, "messageID": mid, **json.loads(data)},
            )
    return root


def _write(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))
