"""The full-text index written once per batch (schema v10): a real v9 database
file (indexed by the old per-row trigger) is upgraded and keeps its search; new
events, retention and duplicates keep the index exact.  Real files in tmp_path."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlite_utils import Database

from monitor.events import Event, Kind
from monitor.store import Store
from monitor.store.schema import FTS_INDEX_NEW, latest_version, migrate
from monitor.store.search import search

NOW = 1_750_000_000.0
DAY = 86400.0


def result(session: str, seq: int, ts: float, content: str) -> Event:
    event = Event(Kind.TOOL_RESULT, session, ts, source=f"/logs/{session}.jsonl", line=seq, content=content)
    event.seq = seq
    return event


def call(session: str, seq: int, ts: float, cmd: str) -> Event:
    event = Event(Kind.TOOL_CALL, session, ts, tool="bash", args={"cmd": cmd}, call_id=f"c{seq}")
    event.seq = seq
    return event


def integrity(path: Path) -> None:
    """FTS5's own check that the index matches the events table (raises if not)."""
    with sqlite3.connect(str(path)) as conn:
        conn.execute("INSERT INTO events_fts(events_fts, rank) VALUES ('integrity-check', 1)")


def triggers(path: Path) -> set[str]:
    with sqlite3.connect(str(path)) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}


def test_a_v9_database_is_upgraded_and_finds_old_and_new_events(tmp_path: Path):
    path = tmp_path / "old.db"
    old = Database(sqlite3.connect(str(path)))
    migrate(old, upto=9)
    old.execute("INSERT INTO sessions (id, agent, events, last_seen) VALUES ('old', 'codex', 2, ?)", [NOW])
    old.execute(
        "INSERT INTO events (session, seq, ts, type, tool, args, content, content_length) VALUES "
        "('old', 1, ?, 'tool_call', 'bash', '{\"cmd\": \"make deploy\"}', NULL, 0), "
        "('old', 2, ?, 'tool_result', NULL, NULL, 'ModuleNotFoundError: no module named yaml', 41)",
        [NOW, NOW + 1],
    )
    old.conn.commit()
    old.close()
    assert "events_ai" in triggers(path)  # what v9 indexed new rows with

    with Store(path) as store:
        assert [(h["session"], h["seq"]) for h in store.search_events("ModuleNotFoundError yaml")] == [
            ("old", 2)
        ]
        store.add_events([result("new", 1, NOW + 2, "ModuleNotFoundError: no module named requests")])
        store.add_events([call("new", 2, NOW + 3, "pip install requests"), result("new", 3, NOW + 4, "ok")])
        store.flush()
        hits = store.search_events("ModuleNotFoundError")
        assert [(h["session"], h["seq"]) for h in hits] == [("new", 1), ("old", 2)]
        assert [h["seq"] for h in store.search_events("pip install")] == [2]
        assert [h["seq"] for h in store.search_events("named requests")] == [1]
        sessions, _ = search(store, "module named")
        assert [row["id"] for row in sessions] == ["new", "old"]

    with sqlite3.connect(str(path)) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == latest_version()
    assert "events_ai" not in triggers(path)
    assert {"events_ad", "events_au"} <= triggers(path)  # retention's deletes still leave the index
    integrity(path)


def test_retention_and_many_batches_keep_the_index_exact(tmp_path: Path):
    path = tmp_path / "x.db"
    with Store(path, batch_size=7, flush_ms=10_000) as store:
        store.add_events([result("a", i, NOW - 10 * DAY + i, f"old output {i}") for i in range(1, 30)])
        store.add_events([result("b", i, NOW + i, f"new output {i}") for i in range(1, 30)])
        store.flush()
        assert len(store.search_events("output", limit=None)) == 58
    integrity(path)
    with Store(path, retention_days=5, clock=lambda: NOW) as store:
        store.flush()  # the start-up prune
        assert {h["session"] for h in store.search_events("output", limit=None)} == {"b"}
        assert store.search_events("old") == []
    integrity(path)


def test_the_batch_statement_indexes_only_rows_after_the_given_id(tmp_path: Path):
    """Rows refused as duplicates (INSERT OR IGNORE) take no new id: indexing
    ``id > MAX(id)`` read before the insert cannot index a row twice."""
    path = tmp_path / "x.db"
    with Store(path) as store:
        store.add_events([result("a", 1, NOW, "first words")])
        store.flush()
    conn = sqlite3.connect(str(path))
    with conn:
        last = conn.execute("SELECT MAX(id) FROM events").fetchone()[0]
        conn.execute(
            "INSERT OR IGNORE INTO events (session, seq, ts, type, content) VALUES "
            "('a', 1, ?, 'tool_result', 'first words again'), ('a', 2, ?, 'tool_result', 'second words')",
            [NOW, NOW + 1],
        )
        conn.execute(FTS_INDEX_NEW, [last])
    conn.close()
    integrity(path)
    with Store(path) as store:
        assert [h["seq"] for h in store.search_events("words", limit=None)] == [2, 1]
        assert store.search_events("again") == []
