"""OpenCode (opencode.db, storage/) and Goose (sessions.db): SQLite sessions read read-only.

The OpenCode database is real (tests/fixtures/opencode, OpenCode v1.16.0); the
Goose one is a real, empty Goose database filled with Goose's own statements
(tests/sqlitekit.py).  Both are written by another connection while ``watch``
reads them.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from pathlib import Path

from monitor.config import build_config
from monitor.evaluate import scan_run
from monitor.events import Kind
from monitor.formats import documents
from monitor.hub import Hub
from monitor.scan import scan
from monitor.sources.files import FileSource, StartPolicy
from monitor.store import Store
from tests import sqlitekit
from tests.formatkit import counts
from tests.watchkit import follow, scanned, scanned_all, watched

SESSION = "ses_04ca851f7ffevKrKMHW3RsPK1U"
DEADLINE = 30.0


def test_the_real_opencode_database_is_read_and_left_as_it_was():
    path = sqlitekit.OPENCODE
    before = sorted(p.name for p in path.parent.iterdir())
    assert documents.kind_of(path) == "opencode"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 8,
        "assistant_messages": 9,
        "tool_calls": 21,
        "tool_results": 21,
        "usage": 26,
    }
    start = events[0]
    assert (start.session, start.agent, start.meta["version"], start.meta["cwd"]) == (
        SESSION,
        "opencode",
        "v1.16.0",
        "/workspace",
    )
    failed = [
        (e.line, e.tool, e.meta["exit_code"]) for e in events if e.kind is Kind.TOOL_RESULT and e.is_error
    ]
    assert failed == [(105, "bash", 1)]  # `bash sync-sessions.sh`: "sessions.db not found", exit 1
    first = next(e for e in events if e.kind is Kind.TOOL_CALL)
    assert (first.line, first.tool, first.args, first.call_id) == (
        4,
        "glob",
        {"pattern": "**/SPEC.md"},
        "call_00_ogBTAQ4ZyUfdr0B5Q8mX2762",
    )
    assert sorted(p.name for p in path.parent.iterdir()) == before  # no -shm or -wal left beside it


def test_scan_watch_and_eval_agree_on_opencode(tmp_path: Path):
    db = sqlitekit.opencode_copy(tmp_path / "oc")
    assert watched(db, tmp_path) == scanned(db) == ([], {SESSION: 86})
    run = scan_run(str(db), None)
    assert run.unreadable == "" and run.hits == () and run.units == 118


def test_the_storage_folder_reads_as_the_database(tmp_path: Path):
    root = sqlitekit.storage_from(sqlitekit.OPENCODE, tmp_path / "opencode" / "storage")
    assert documents.kind_of(root) == "opencode"
    report = scan([str(tmp_path / "opencode")])
    assert report.formats == {str(root): "opencode"} and report.problems == []
    events, _ = documents.load(root)
    db_events, _ = documents.load(sqlitekit.OPENCODE)

    def same(evs):
        return [(e.kind, e.role, e.tool, e.call_id, e.content, e.is_error) for e in evs]

    assert same(events) == same(db_events)


def _goose(tmp_path: Path) -> tuple[Path, str]:
    db = sqlitekit.goose_copy(tmp_path / "goose")
    return db, sqlitekit.goose_session(db)


def test_goose_sessions(tmp_path: Path):
    db, session = _goose(tmp_path)
    assert session == "20251202_2"  # (the real database holds 20251202_1, with no messages)
    assert documents.kind_of(db) == "goose"
    events, problems = documents.load(db)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 1,
        "assistant_messages": 7,
        "tool_calls": 7,
        "tool_results": 7,
    }
    assert events[0].meta == {"title": "fix the parser", "cwd": "/home/me/parser", "type": "user"}
    call = next(e for e in events if e.kind is Kind.TOOL_CALL)
    assert (call.line, call.tool, call.args) == (
        2,
        "developer__shell",
        {"command": "pytest -q tests/test_parser.py"},
    )
    errors = [(e.line, e.content) for e in events if e.kind is Kind.TOOL_RESULT and e.is_error]
    assert errors == [(15, "Tool not found")]
    report = scan([str(db)])
    assert any(d.session == session for d in report.detections)  # the same failing test, six times


def test_scan_watch_and_eval_agree_on_goose(tmp_path: Path):
    db, session = _goose(tmp_path)
    found = scanned(db)
    assert found[0] and watched(db, tmp_path) == found
    run = scan_run(str(db), None)
    hits = sorted((h.detector, h.line) for h in run.hits)
    every = scanned_all(db)[0]
    assert hits == sorted((d, line) for _s, d, level, line in every if level != "notice")


def _kinds(store: Store, session: str) -> Counter[str]:
    return Counter(row["type"] for row in store.events(session))


def test_watch_follows_a_wal_database_being_written_without_locking_it(tmp_path: Path):
    db = sqlitekit.opencode_copy(tmp_path / "oc")
    writer = sqlite3.connect(db, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store = Store(tmp_path / "watch.db")
    store.start()
    try:
        asyncio.run(follow(db, store, lambda: store.count_events(SESSION) >= 86))
        message = "msg_fb357c9b0001vCeyfeGDJFOYFA"
        running = {
            "type": "tool",
            "tool": "bash",
            "callID": "call_new",
            "state": {
                "status": "running",
                "input": {"command": "make test"},
                "time": {"start": 1785420900000},
            },
        }
        sqlitekit.add_part(writer, SESSION, message, "prt_zzz_new", running, 1785420900000)
        writer.execute("BEGIN IMMEDIATE")  # a write transaction held open while watch reads
        writer.execute("UPDATE session SET title = 'busy' WHERE id = ?", (SESSION,))
        asyncio.run(follow(db, store, lambda: _kinds(store, SESSION)["tool_call"] >= 22))
        writer.execute("COMMIT")  # never blocked by the reader
        done = dict(
            running,
            state=dict(
                running["state"],
                status="completed",
                output="1 failed",
                metadata={"exit": 2},
                time={"start": 1785420900000, "end": 1785420901000},
            ),
        )
        sqlitekit.add_part(writer, SESSION, message, "prt_zzz_new", done, 1785420901000)
        asyncio.run(follow(db, store, lambda: _kinds(store, SESSION)["tool_result"] >= 22))
        kinds = _kinds(store, SESSION)
        assert (kinds["tool_call"], kinds["tool_result"], store.count_events(SESSION)) == (22, 22, 88)
        last = [row for row in store.events(SESSION) if row["type"] == "tool_result"][-1]
        assert last["is_error"] and last["line"] == 119
    finally:
        writer.close()
        store.close()


def test_watch_resumes_a_database_after_a_restart(tmp_path: Path):
    db, session = _goose(tmp_path)
    store = Store(tmp_path / "watch.db")
    store.start()
    try:
        asyncio.run(follow(db, store, lambda: store.count_events(session) >= 23))
        first = store.count_events(session)
        with sqlite3.connect(db) as connection:
            sqlitekit.goose_add(
                connection, session, "user", [sqlitekit.text("Try the other quote style.")], 1_764_694_800
            )
        asyncio.run(follow(db, store, lambda: store.count_events(session) > first))
        assert store.count_events(session) == first + 1  # only the new message: nothing read twice
    finally:
        store.close()


def test_a_rewritten_goose_conversation_is_not_read_twice(tmp_path: Path):
    db, session = _goose(tmp_path)
    store = Store(tmp_path / "watch.db")
    store.start()

    def rewrite() -> (
        None
    ):  # replace_conversation: every row deleted and inserted again (new ids), then one more
        with sqlite3.connect(db) as connection:
            rows = connection.execute(
                "SELECT role, content_json, created_timestamp FROM messages ORDER BY id"
            ).fetchall()
            connection.execute("DELETE FROM messages WHERE session_id = ?", (session,))
            for role, content, created in rows:
                connection.execute(
                    "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) "
                    "VALUES (?, ?, ?, ?, '{}')",
                    (session, role, content, created),
                )
            sqlitekit.goose_add(
                connection, session, "user", [sqlitekit.text("Stop and explain.")], 1_764_694_900
            )

    try:
        asyncio.run(
            follow(
                db,
                store,
                lambda: store.count_events(session) >= 23,
                then=[(rewrite, lambda: store.count_events(session) >= 24)],
            )
        )
        assert store.count_events(session) == 24
    finally:
        store.close()


def test_from_the_end_reads_only_new_rows(tmp_path: Path):
    db, session = _goose(tmp_path)
    store = Store(tmp_path / "watch.db")
    store.start()
    try:
        asyncio.run(follow(db, store, lambda: bool(store.file_positions()), start="end"))
        assert store.count_events(session) == 0
        with sqlite3.connect(db) as connection:
            sqlitekit.goose_add(connection, session, "user", [sqlitekit.text("New question.")], 1_764_695_000)
        asyncio.run(follow(db, store, lambda: store.count_events(session) > 0, start="end"))
        assert _kinds(store, session) == Counter({"message": 1})  # (its start was before the watch began)
    finally:
        store.close()


def test_bad_databases_are_one_line_each(tmp_path: Path):
    text_file = tmp_path / "a" / "opencode.db"
    text_file.parent.mkdir()
    text_file.write_text("not a database\n")
    torn = tmp_path / "b" / "opencode.db"
    torn.parent.mkdir()
    torn.write_bytes(sqlitekit.OPENCODE.read_bytes()[:150_000])
    other = tmp_path / "c" / "app.db"
    other.parent.mkdir()
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    for path in (text_file, torn, other):
        report = scan([str(path)])
        assert report.files == 1 and report.engine is not None
        for problem in report.problems:
            assert "\n" not in str(problem) and "Traceback" not in str(problem)
        assert report.problems, path
    assert "not a supported format" in str(scan([str(other)]).problems[0])


def test_a_locked_database_is_one_line_and_read_once_it_is_free(tmp_path: Path):
    db, session = _goose(tmp_path)  # Goose's copy is in rollback-journal mode: a writer locks readers out
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        report = scan([str(db)])
        assert [p.reason for p in report.problems] == [
            "database is locked by its writer (database is locked); read again on the next poll"
        ]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert scan([str(db)]).problems == []


def _homes(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def test_the_agent_flags_add_each_default_location(tmp_path: Path, monkeypatch):
    import argparse

    from monitor.commands.watch import _agent_locations

    home = _homes(tmp_path, monkeypatch)
    flags = ("claude", "codex", "gemini", "opencode", "goose", "cursor", "copilot", "aider")
    directories, paths = _agent_locations(argparse.Namespace(**dict.fromkeys(flags, True)))
    assert directories == [
        str(home / ".claude" / "projects"),
        str(home / ".codex" / "sessions"),
        str(home / ".cursor" / "projects"),
        str(home / ".copilot" / "session-state"),
    ]
    assert paths == [
        f"{home}/.gemini/tmp/*/chats/session-*.json",
        f"{home}/.gemini/tmp/*/chats/session-*.jsonl",
        str(home / ".local" / "share" / "opencode" / "opencode.db"),
        str(home / ".local" / "share" / "goose" / "sessions" / "sessions.db"),
        str(tmp_path / ".aider.chat.history.md"),
    ]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    _directories, paths = _agent_locations(
        argparse.Namespace(**dict(dict.fromkeys(flags, False), opencode=True))
    )
    assert paths == [str(tmp_path / "data" / "opencode" / "opencode.db")]


def test_watch_with_the_flags_reads_what_is_in_their_locations(tmp_path: Path, monkeypatch):
    """--opencode and --gemini (a format another reader reads) in one watcher, from their default places."""
    import argparse
    import shutil

    from monitor.commands.watch import _agent_locations

    home = _homes(tmp_path, monkeypatch)
    sqlitekit.opencode_copy(home / ".local" / "share" / "opencode")
    chats = home / ".gemini" / "tmp" / "project" / "chats"
    chats.mkdir(parents=True)
    shutil.copy(
        sqlitekit.FIXTURES / "gemini-cli" / "gemini-cli-pomodoro-timer.json", chats / "session-1.json"
    )
    flags = dict.fromkeys(
        ("claude", "codex", "gemini", "opencode", "goose", "cursor", "copilot", "aider"), False
    )
    directories, paths = _agent_locations(argparse.Namespace(**dict(flags, opencode=True, gemini=True)))
    store = Store(tmp_path / "watch.db")
    store.start()

    async def run() -> None:
        hub = Hub(build_config({}), store)
        await hub.start()
        files = FileSource(paths, hub, start=StartPolicy("start"), directories=directories)
        await files.start()
        try:
            async with asyncio.timeout(DEADLINE):
                while len(store.session_ids()) < 2:
                    await files.sync()
                    await hub.join()
                    await asyncio.sleep(0.02)  # polling the store, bounded by the deadline
        finally:
            await files.stop()
            await hub.stop()

    try:
        asyncio.run(run())
        assert sorted(store.session_ids()) == sorted(["session-1", SESSION])
        assert store.count_events(SESSION) == 86
    finally:
        store.close()


def test_doctor_lists_every_agent_location(tmp_path: Path, monkeypatch):
    from monitor.commands.doctor import check_paths

    home = _homes(tmp_path, monkeypatch)
    sqlitekit.opencode_copy(home / ".local" / "share" / "opencode")
    db = sqlitekit.goose_copy(home / ".local" / "share" / "goose" / "sessions")
    sqlitekit.goose_session(db)
    lines = {check.what: [] for check in check_paths([])}
    for check in check_paths([]):
        lines[check.what].append(f"{check.status} {check.detail}")
    assert list(lines) == [
        "Claude Code transcripts",
        "Codex rollouts",
        "Gemini CLI chats",
        "OpenCode sessions",
        "Goose sessions",
        "Cursor agent transcripts",
        "Copilot CLI sessions",
        "Aider chat history",
    ]
    assert lines["OpenCode sessions"] == [
        f"OK {home}/.local/share/opencode/opencode.db: opencode (1 session(s), 118 parts) "
        "(watched with `watch --opencode`)"
    ]
    assert (
        lines["Goose sessions"][0].startswith("OK ")
        and "goose (1 session(s), 16 messages)" in lines["Goose sessions"][0]
    )
    assert lines["Cursor agent transcripts"][0].startswith("-- ")
    (named,) = [c for c in check_paths([str(db)]) if c.what == "watched path"]
    assert (named.status, named.detail) == ("OK", f"{db}: goose (1 session(s), 16 messages)")
    other = tmp_path / "app.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    (named,) = [c for c in check_paths([str(other)]) if c.what == "watched path"]
    assert (named.status, named.detail) == ("FIX", f"{other}: not a format loopwatch reads")


def test_by_default_only_recent_rows_are_read(tmp_path: Path):
    """The real database's rows are from July 2026: by default (recent) watch starts after them."""
    db = sqlitekit.opencode_copy(tmp_path / "oc")
    store = Store(tmp_path / "watch.db")
    store.start()

    def write() -> None:
        import time

        with sqlite3.connect(db) as writer:
            message = "msg_fb357c9b0001vCeyfeGDJFOYFA"
            at = int(time.time() * 1000)
            sqlitekit.add_part(
                writer, SESSION, message, "prt_zzz_now", {"type": "compaction", "auto": True}, at
            )

    try:
        asyncio.run(
            follow(
                db,
                store,
                lambda: bool(store.file_positions()) or store.count_events(SESSION) > 0,
                start="recent",
                then=[(write, lambda: store.count_events(SESSION) > 0)],
            )
        )
        assert _kinds(store, SESSION) == Counter({"session_start": 1, "compaction": 1})
    finally:
        store.close()


def test_a_folder_holding_a_database_is_scanned(tmp_path: Path):
    db = sqlitekit.opencode_copy(tmp_path / "share" / "opencode")
    (db.parent / "log").mkdir()
    report = scan([str(tmp_path / "share")])
    assert report.formats == {str(db): "opencode"} and report.events == 86


def test_a_wal_database_in_a_read_only_folder_is_read_without_its_shm(tmp_path: Path):
    import os

    import pytest

    from monitor.formats.sqlite_db import open_readonly

    if os.geteuid() == 0:
        pytest.skip("root can write any folder")
    db = sqlitekit.opencode_copy(tmp_path / "ro")
    with sqlite3.connect(db) as writer:  # (the last connection closing merges and removes its -wal)
        writer.execute("SELECT count(*) FROM part").fetchone()
    db.parent.chmod(0o555)
    try:
        connection = open_readonly(db)
        assert connection.execute("SELECT count(*) FROM part").fetchone() == (118,)
        connection.close()
        assert sorted(p.name for p in db.parent.iterdir()) == ["opencode.db"]
    finally:
        db.parent.chmod(0o755)
