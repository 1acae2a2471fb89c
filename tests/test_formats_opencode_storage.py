"""OpenCode's older ``storage/`` folder followed by ``watch``, and errors OpenCode records on a message.

The folder is the real ``tests/fixtures/opencode/opencode.db`` written out as pre-1.x OpenCode laid it
out (:func:`tests.sqlitekit.storage_from`).  The message errors are shaped as OpenCode's
``MessageV2.Assistant.error`` (``packages/opencode/src/session/message-v2.ts``, anomalyco/opencode at
007a9409bafea06d6b9084ff1f6d1fe9f5e3a803: ``NamedError`` objects ``{name, data: {message, …}}``,
``APIError`` with ``statusCode`` / ``isRetryable``, ``MessageAbortedError``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from monitor.evaluate import scan_run
from monitor.events import Kind
from monitor.formats import documents
from monitor.scan import scan
from monitor.sources.files import FileSource, StartPolicy
from monitor.store import Store
from tests import sqlitekit
from tests.watchkit import follow, scanned

SESSION = "ses_04ca851f7ffevKrKMHW3RsPK1U"
MESSAGE = "msg_fb357c9b0001vCeyfeGDJFOYFA"  # an assistant message of the real session
LAST = "msg_fb3605bba001tG5tf65f4Cy0Si"  # its last message, the one a live agent adds parts to
API_ERROR = {
    "name": "APIError",
    "data": {"message": "Rate limit exceeded", "statusCode": 429, "isRetryable": True},
}
ABORTED = {"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}}


def _storage(tmp_path: Path) -> Path:
    return sqlitekit.storage_from(sqlitekit.OPENCODE, tmp_path / "opencode" / "storage")


def _write(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))  # (in place, as OpenCode's Storage.write does)


def _part(root: Path, message: str, part: str, data: dict[str, Any]) -> None:
    _write(
        root / "part" / message / f"{part}.json",
        {"id": part, "sessionID": SESSION, "messageID": message, **data},
    )


def _message(root: Path, message: str, data: dict[str, Any]) -> None:
    _write(root / "message" / SESSION / f"{message}.json", {"id": message, "sessionID": SESSION, **data})


def _tool(status: str, **state: Any) -> dict[str, Any]:
    return {
        "type": "tool",
        "tool": "bash",
        "callID": "call_new",
        "state": {
            "status": status,
            "input": {"command": "make test"},
            "time": {"start": 1785420900000},
            **state,
        },
    }


def _rows(store: Store) -> list[tuple[str, str | None, int | None]]:
    return [(row["type"], row["tool"], row["line"]) for row in store.events(SESSION)]


def _events(root: Path) -> list[tuple[str, str | None, int | None]]:
    events, problems = documents.load(root)
    assert problems == []
    return [(e.kind.value, e.tool, e.line) for e in events if e.session == SESSION]


def test_scan_watch_and_eval_agree_on_the_storage_folder(tmp_path: Path):
    root = _storage(tmp_path)
    detections, counts = scanned(tmp_path / "opencode")
    assert counts == {SESSION: 86}
    store = Store(tmp_path / "watch.db")
    store.start()
    try:
        asyncio.run(follow(root, store, lambda: store.count_events(SESSION) >= 86))
        assert store.count_events(SESSION) == 86
        assert store.session_ids() == [SESSION]
        assert _rows(store) == _events(root)  # the same events, in the same order, at the same lines
        assert [(r["detector"], r["line"]) for r in store.detections(SESSION)] == [
            (d, line) for _s, d, _level, line in detections
        ]
    finally:
        store.close()
    run = scan_run(str(tmp_path / "opencode"), None)
    assert run.unreadable == "" and run.hits == ()


def test_watch_feeds_new_parts_once_and_resumes_after_a_restart(tmp_path: Path):
    root = _storage(tmp_path)
    store = Store(tmp_path / "watch.db")
    store.start()

    def kinds() -> Counter[str]:
        return Counter(row["type"] for row in store.events(SESSION))

    try:
        asyncio.run(
            follow(
                root,
                store,
                lambda: store.count_events(SESSION) >= 86,
                then=[
                    (
                        lambda: _part(root, LAST, "prt_zzz_new", _tool("running")),
                        lambda: kinds()["tool_call"] >= 22,
                    ),
                    (
                        lambda: _part(
                            root,
                            LAST,
                            "prt_zzz_new",
                            _tool(
                                "completed",
                                output="1 failed",
                                title="make test",
                                metadata={"exit": 2},
                                time={"start": 1785420900000, "end": 1785420901000},
                            ),
                        ),
                        lambda: kinds()["tool_result"] >= 22,
                    ),
                ],
            )
        )
        assert (kinds()["tool_call"], kinds()["tool_result"], store.count_events(SESSION)) == (22, 22, 88)
        last = [row for row in store.events(SESSION) if row["type"] == "tool_result"][-1]
        assert last["is_error"] and last["call_id"] == "call_new"
        assert (last["line"], _events(root)[-1]) == (119, ("tool_result", "bash", 119))  # as scan counts it
        # A restart: nothing read twice, then only what came since.
        asyncio.run(follow(root, store, lambda: True))
        assert store.count_events(SESSION) == 88
        late = "msg_zzz_late"

        def fail() -> None:
            _message(
                root, late, {"role": "assistant", "time": {"created": 1785420902000}, "error": API_ERROR}
            )

        asyncio.run(
            follow(root, store, lambda: True, then=[(fail, lambda: store.count_events(SESSION) >= 89)])
        )
        asyncio.run(follow(root, store, lambda: True))
        rows = store.events(SESSION)
        assert len(rows) == 89 and Counter(r["type"] for r in rows)["session_start"] == 1
        assert (rows[-1]["type"], rows[-1]["role"], rows[-1]["content"]) == (
            "message",
            "system",
            "APIError: Rate limit exceeded",
        )
    finally:
        store.close()


def test_from_the_end_the_storage_folder_is_taken_as_read(tmp_path: Path):
    root = _storage(tmp_path)
    store = Store(tmp_path / "watch.db")
    store.start()
    try:
        asyncio.run(
            follow(
                root,
                store,
                lambda: True,
                start="end",
                then=[
                    (
                        lambda: _part(root, MESSAGE, "prt_zzz_new", _tool("running")),
                        lambda: store.count_events(SESSION) >= 2,
                    )
                ],
            )
        )
        assert [row["type"] for row in store.events(SESSION)] == ["session_start", "tool_call"]
    finally:
        store.close()


def test_a_storage_folder_beside_the_database_is_not_watched_twice(tmp_path: Path):
    root = _storage(tmp_path)
    sqlitekit.opencode_copy(root.parent)
    store = Store(tmp_path / "watch.db")
    store.start()
    try:
        asyncio.run(follow(root.parent, store, lambda: store.count_events(SESSION) >= 86))
        asyncio.run(follow(root.parent, store, lambda: True))
        assert store.count_events(SESSION) == 86
    finally:
        store.close()


# -- errors OpenCode records on a message -------------------------------------------------------


def test_message_errors_in_the_storage_folder_are_system_messages(tmp_path: Path):
    root = _storage(tmp_path)
    _message(root, "msg_zzz_a", {"role": "assistant", "time": {"created": 1785420900000}, "error": ABORTED})
    _part(
        root,
        "msg_zzz_a",
        "prt_zzz_a",
        _tool("error", error="Tool execution aborted", time={"start": 1, "end": 2}),
    )
    _message(root, "msg_zzz_b", {"role": "assistant", "time": {"created": 1785420901000}, "error": API_ERROR})
    events, problems = documents.load(root)
    assert problems == []
    tail = [(e.kind, e.role, e.content, e.meta.get("error"), e.line) for e in events[-3:]]
    assert tail == [
        (Kind.TOOL_RESULT, None, "Tool execution aborted", None, 119),
        (
            Kind.MESSAGE,
            "system",
            "MessageAbortedError: The operation was aborted.",
            "MessageAbortedError",
            119,
        ),
        (Kind.MESSAGE, "system", "APIError: Rate limit exceeded", "APIError", 119),
    ]
    report = scan([str(root.parent)])
    assert report.problems == [] and report.engine is not None
    assert report.engine.sessions[SESSION].events == 86 + 4


def test_message_errors_in_the_database_are_system_messages(tmp_path: Path):
    db = sqlitekit.opencode_copy(tmp_path / "oc")
    with sqlite3.connect(db) as connection:
        sqlitekit.add_message(
            connection,
            SESSION,
            "msg_zzz_a",
            {"role": "assistant", "time": {"created": 1}, "error": ABORTED},
            1,
        )
        sqlitekit.add_part(
            connection,
            SESSION,
            "msg_zzz_a",
            "prt_zzz_a",
            _tool("error", error="aborted", time={"start": 1, "end": 2}),
            2,
        )
        sqlitekit.add_part(connection, SESSION, MESSAGE, "prt_zzz_b", {"type": "step-start"}, 3)
    events, problems = documents.load(db)
    assert problems == []
    system = [(e.content, e.line) for e in events if e.kind is Kind.MESSAGE and e.role == "system"]
    assert system == [("MessageAbortedError: The operation was aborted.", 119)]
    assert [e.kind for e in events][-3:] == [Kind.TOOL_CALL, Kind.TOOL_RESULT, Kind.MESSAGE]


def test_odd_message_errors_are_read_without_a_traceback(tmp_path: Path):
    from monitor.formats.opencode import error_text

    assert error_text({"error": "boom"}) == "error: boom"
    assert (
        error_text({"error": {"name": "MessageOutputLengthError", "data": {}}}) == "MessageOutputLengthError"
    )
    assert error_text({"error": {"data": "x"}}) == "error"
    assert error_text({"error": None}) is None and error_text([1]) is None


class _Sink:
    """Collects what the source submits (no positions kept)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.problems: list[Any] = []

    async def submit(self, events, problems=()) -> None:
        self.events.extend(events)
        self.problems.extend(problems)


def test_bad_storage_files_are_one_line_each_and_never_stop_the_watch(tmp_path: Path):
    root = _storage(tmp_path)
    (root / "part" / MESSAGE / "prt_zzz_torn.json").write_text('{"id": "prt_zzz_torn", "type": "to')
    (root / "part" / MESSAGE / "prt_zzz_list.json").write_text("[1, 2]")
    _write(root / "part" / MESSAGE / "prt_zzz_nosession.json", {"id": "x", "type": "text", "text": "hi"})
    _write(root / "part" / MESSAGE / "prt_zzz_escape.json", {"id": "y", "sessionID": "../..", "type": "text"})
    (root / "part" / MESSAGE / "prt_zzz_bytes.json").write_bytes(b"\xff\xfe{")
    old = 1_700_000_000
    for path in (root / "part" / MESSAGE).glob("prt_zzz_*.json"):
        os.utime(path, (old, old))  # (left so: no writer is still at them)

    async def run() -> _Sink:
        sink = _Sink()
        files = FileSource([str(root)], sink, start=StartPolicy("start"))
        await files.start()
        try:
            await files.sync()
        finally:
            await files.stop()
        return sink

    sink = asyncio.run(run())
    reasons = sorted(p.reason.split(":")[0] for p in sink.problems)
    assert reasons == sorted(
        [
            "prt_zzz_torn.json",
            "prt_zzz_list.json",
            "prt_zzz_nosession.json",
            "prt_zzz_escape.json",
            "prt_zzz_bytes.json",
        ]
        + [
            "prt_zzz_torn.json",
            "prt_zzz_list.json",
            "prt_zzz_bytes.json",
        ]  # (read with their message, and alone)
    ), reasons
    seen = [(e.kind.value, e.tool, e.line) for e in sink.events if e.session == SESSION]
    scanned_ = [(e.kind.value, e.tool, e.line) for e in documents.load(root)[0] if e.session == SESSION]
    assert seen == scanned_ and len(seen) == 87  # the rest read as scan reads it (the text part too)
