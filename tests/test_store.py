"""The SQLite store: schema and migrations, batching, bounded content, actions
committed before they run, retention, concurrent readers, back-pressure and a
SIGKILL mid-write.  Real database files in tmp_path, real subprocesses."""

from __future__ import annotations

import hashlib
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlite_utils import Database

from monitor.detect.base import Detection
from monitor.events import Event, EventRef, Kind, Level
from monitor.identity import current_user, owner_stamp
from monitor.store import Store, StoreError
from monitor.store import schema as store_schema
from monitor.store.schema import latest_version, migrate

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_750_000_000.0
DAY = 86400.0


def call(session: str, seq: int, ts: float, **fields) -> Event:
    event = Event(
        Kind.TOOL_CALL,
        session,
        ts,
        source=f"/logs/{session}.jsonl",
        line=seq,
        tool=fields.pop("tool", "bash"),
        args=fields.pop("args", {"cmd": "ls"}),
        call_id=f"c{seq}",
        **fields,
    )
    event.seq = seq
    return event


def calls(session: str, count: int, start_ts: float = NOW, first_seq: int = 1) -> list[Event]:
    return [call(session, first_seq + i, start_ts + i) for i in range(count)]


def connect(path: Path) -> sqlite3.Connection:
    """A second, independent connection (what sqlite3/Datasette would open)."""
    return sqlite3.connect(str(path), timeout=10)


def count(path: Path, sql: str, params=()) -> int:
    with connect(path) as conn:
        return conn.execute(sql, params).fetchone()[0]


def poll(predicate, what: str, deadline: float = 20.0):
    """Wait until ``predicate()`` is truthy; fail after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "loopwatch.db"


@pytest.fixture
def store(db_path: Path):
    s = Store(db_path, batch_size=100, flush_ms=50)
    s.start()
    yield s
    s.close()


# -- schema and migrations -------------------------------------------------------------


def test_new_database_has_latest_schema_wal_and_private_mode(store: Store, db_path: Path):
    """A fresh file gets every migration recorded, WAL mode, and mode 0600."""
    with connect(db_path) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version ORDER BY 1")]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert versions == list(range(1, latest_version() + 1))
    assert {"sessions", "events", "detections", "actions", "schema_version"} <= tables
    assert mode == "wal"
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600


def test_old_version_database_is_migrated_keeping_its_rows(db_path: Path):
    """A database left at schema v1 (with data) is upgraded on open; old rows stay
    readable and new events continue the session's numbering."""
    db_path.parent.mkdir(parents=True)
    old = Database(db_path)
    migrate(old, upto=1)
    old.execute(
        "INSERT INTO sessions (id, agent, first_seen, last_seen, events) VALUES ('old', 'codex', ?, ?, 2)",
        [NOW, NOW + 1],
    )
    for seq in (1, 2):
        old.execute(
            "INSERT INTO events (session, seq, ts, type, tool, args, content_length) "
            "VALUES ('old', ?, ?, 'tool_call', 'bash', '{\"cmd\": \"ls\"}', 0)",
            [seq, NOW + seq - 1],
        )
    old.close()
    assert count(db_path, "SELECT MAX(version) FROM schema_version") == 1

    with Store(db_path) as s:
        assert count(db_path, "SELECT MAX(version) FROM schema_version") == latest_version()
        assert count(db_path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_ts'") == 1
        assert s.get_session("old")["agent"] == "codex"
        assert [e.args for e in s.iter_events("old")] == [{"cmd": "ls"}] * 2
        s.add_events(calls("old", 1))  # a new monitor run numbers from 1 again
        s.flush()
        assert [e["seq"] for e in s.events("old")] == [1, 2, 3]


def test_v5_database_gets_session_owners_and_a_detectable_full_text_index(db_path: Path):
    """v6: sessions name their watcher; a v5 session left ``live`` by a watcher
    that is gone reads ``stopped`` (and is marked so at start); the full-text
    index keeps its rows and is the one sqlite-utils finds."""
    db_path.parent.mkdir(parents=True)
    old = Database(db_path)
    migrate(old, upto=5)
    old.execute(
        "INSERT INTO sessions (id, status, first_seen, last_seen) VALUES "
        "('was-live', 'live', ?, ?), ('done', 'ended', ?, ?)",
        [NOW, NOW, NOW, NOW],
    )
    old.execute(
        "INSERT INTO events (session, seq, ts, type, tool, args, content, content_length) "
        "VALUES ('was-live', 1, ?, 'tool_call', 'bash', '{\"cmd\": \"pytest -x\"}', '', 0)",
        [NOW],
    )
    old.close()
    with Store(db_path) as s:
        assert s.stopped_sessions == 1
        assert {row["id"]: row["status"] for row in s.list_sessions()} == {
            "was-live": "stopped",
            "done": "ended",
        }
        assert [hit["seq"] for hit in s.search_events("pytest")] == [1]
        s.add_events(calls("new", 2))
        s.flush()
    check = Database(db_path)
    assert "owner" in check["sessions"].columns_dict
    assert check["events"].detect_fts() == "events_fts"
    assert [row["session"] for row in check["events"].search("pytest", columns=["session"])] == ["was-live"]
    owners = dict(check.execute("SELECT id, owner FROM sessions").fetchall())
    assert owners["new"] == owner_stamp() and owners["was-live"] is None
    check.close()


def test_a_default_database_that_recorded_nothing_is_not_left_behind(tmp_path: Path):
    """``discard_if_unused``: a file this run created and left empty is removed at
    close; one that recorded something, or that existed before, stays."""
    empty = tmp_path / "empty" / "loopwatch.db"
    with Store(empty, discard_if_unused=True):
        assert empty.exists()
    assert not list(empty.parent.glob("loopwatch.db*"))
    used = tmp_path / "used" / "loopwatch.db"
    with Store(used, discard_if_unused=True) as s:
        s.add_events(calls("s", 1))
    assert count(used, "SELECT COUNT(*) FROM events") == 1
    with Store(used, discard_if_unused=True):
        pass  # existed before this run: kept even though this run recorded nothing
    assert used.exists()


def test_migrations_run_in_order_and_only_once(db_path: Path, monkeypatch):
    """A migration added later is applied on the next open, once, after the others."""
    with Store(db_path):
        pass
    applied: list[int] = []
    later = latest_version() + 1

    def added(db):
        applied.append(later)
        db.execute("ALTER TABLE sessions ADD COLUMN note TEXT")

    extended = [*store_schema.MIGRATIONS, store_schema.Migration(later, "sessions.note", added)]
    monkeypatch.setattr(store_schema, "MIGRATIONS", extended)
    for _ in range(2):
        s = Store(db_path)
        s.start()
        s.close()
    assert applied == [later]
    with connect(db_path) as conn:
        rows = conn.execute("SELECT version, description FROM schema_version ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == list(range(1, later + 1)) and rows[-1][1] == "sessions.note"


def test_newer_or_foreign_database_is_refused(tmp_path: Path):
    """A file from a newer loopwatch, or another application's database, is not touched."""
    newer = tmp_path / "newer.db"
    with Store(newer):
        pass
    with connect(newer) as conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 0, 'future')")
    with pytest.raises(StoreError, match="newer than this loopwatch"):
        Store(newer).start()
    with pytest.raises(StoreError, match="newer than this loopwatch"):
        Store(newer).list_sessions()

    foreign = tmp_path / "foreign.db"
    with connect(foreign) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError, match="not a loopwatch database"):
        Store(foreign).start()
    with connect(foreign) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["customers"]


# -- writes ------------------------------------------------------------------------------


def test_rows_are_committed_in_batches_of_batch_size(db_path: Path):
    """1,000 events with batch_size 100 (and a long flush_ms) take exactly 10
    transactions, plus one at the flush for the session row they update."""
    with Store(db_path, batch_size=100, flush_ms=60_000) as s:
        s.add_events(calls("s", 1000))
        s.flush()
        assert s.stats.transactions == 10 + 1
        assert s.get_session("s")["events"] == 1000
        assert s.stats.events == 1000
    assert count(db_path, "SELECT COUNT(*) FROM events") == 1000


def test_flush_ms_commits_a_partial_batch_without_flush(db_path: Path):
    """Fewer rows than batch_size become visible to another connection after flush_ms."""
    with Store(db_path, batch_size=10_000, flush_ms=20) as s:
        s.add_events(calls("s", 5))
        poll(lambda: count(db_path, "SELECT COUNT(*) FROM events") == 5, "the timed commit")


def test_content_is_bounded_with_full_length_and_hash(store: Store):
    """A 100k-character result keeps its head and tail (what detectors read), its
    full length and a hash of all of it; long args strings are clipped; text with
    undecodable bytes (lone surrogates) is stored instead of failing the batch."""
    content = "HEAD" + "x" * 100_000 + "TAIL"
    result = Event(Kind.TOOL_RESULT, "s", NOW, content=content, call_id="c1")
    result.seq = 1
    big_args = call("s", 2, NOW + 1, args={"text": "y" * 50_000})
    odd = Event(Kind.MESSAGE, "s", NOW + 2, role="user", content="bad \udcff byte")
    odd.seq = 3
    store.add_events([result, big_args, odd])
    store.flush()
    rows = store.events("s")
    stored = rows[0]
    assert stored["content_length"] == len(content)
    assert stored["content_hash"] == hashlib.blake2b(content.encode(), digest_size=16).hexdigest()
    assert len(stored["content"]) < 4100 and "characters omitted" in stored["content"]
    rebuilt = next(store.iter_events("s"))
    assert rebuilt.content[:2000] == content[:2000] and rebuilt.content[-2000:] == content[-2000:]
    assert len(rows[1]["args"]["text"]) == 4000
    assert rows[2]["content"] == "bad \ufffd byte"
    assert store.stats.failed == 0


def test_events_round_trip_through_iter_events(store: Store):
    """Every field the engine reads comes back from the store unchanged."""
    start = Event(
        Kind.SESSION_START,
        "s",
        NOW,
        source="/l.jsonl",
        line=1,
        agent="codex",
        pid=42,
        parent="p",
        meta={"cwd": "/w"},
    )
    result = Event(
        Kind.TOOL_RESULT,
        "s",
        NOW + 1,
        source="/l.jsonl",
        line=3,
        content="boom",
        call_id="c1",
        tool="bash",
        args={"cmd": "make"},
        is_error=True,
    )
    usage = Event(Kind.USAGE, "s", NOW + 2, input_tokens=10, output_tokens=5, cost_usd=0.25)
    end = Event(Kind.SESSION_END, "s", NOW + 3, status="error")
    for seq, event in enumerate([start, result, usage, end], 1):
        event.seq = seq
    store.add_events([start, result, usage, end])
    store.flush()
    fields = (
        "kind",
        "session",
        "ts",
        "source",
        "line",
        "agent",
        "role",
        "content",
        "call_id",
        "tool",
        "args",
        "is_error",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "status",
        "pid",
        "parent",
        "meta",
        "seq",
    )
    for original, rebuilt in zip([start, result, usage, end], store.iter_events("s", page_size=3)):
        assert [getattr(rebuilt, f) for f in fields] == [getattr(original, f) for f in fields]
    session = store.get_session("s")
    assert (session["agent"], session["pid"], session["status"], session["events"]) == (
        "codex",
        42,
        "ended",
        4,
    )


def test_sessions_merge_events_detections_and_hub_updates(store: Store):
    """The session row follows its events and detections; the hub's upserts (with
    the contract's key names) win for what they set, and the peak level never drops."""
    store.add_events(calls("s", 3))
    detection = Detection(
        "exact_repeat",
        Level.CRITICAL,
        0.9,
        "same call 3 times",
        "bash:ls",
        count=3,
        evidence=(EventRef(3, "tool_call", "/logs/s.jsonl", 3, "bash"),),
        session="s",
        source="/logs/s.jsonl",
        line=3,
        ts=NOW + 2,
        seq=3,
    )
    store.add_detections([detection])
    store.flush()
    row = store.get_session("s")
    assert (row["peak"], row["level"], row["detections"], row["detector"]) == (
        "critical",
        "critical",
        1,
        "exact_repeat",
    )
    # After an ack the hub reports a lower level: the final level drops, the peak stays.
    store.upsert_session(
        {
            "id": "s",
            "kind": "socket",
            "level": Level.NONE,
            "status": "idle",
            "first_ts": NOW - 10,
            "events": 1,
            "similarity": (0.5,),
        }
    )
    store.flush()
    row = store.get_session("s")
    assert (row["origin"], row["level"], row["peak"], row["status"]) == (
        "socket",
        "watching",
        "critical",
        "idle",
    )
    assert (row["first_seen"], row["last_seen"], row["events"]) == (NOW - 10, NOW + 2, 3)
    assert store.detections("s")[0]["evidence"][0]["line"] == 3
    with pytest.raises(ValueError):
        store.upsert_session({"agent": "no id"})


def test_one_merged_session_row_is_what_upserting_each_update_in_turn_gives(tmp_path: Path):
    """The writer writes one row per session: what its committed rows said
    with the hub's update merged in.  For random updates that is exactly the
    row upserting each of them in turn gives (the first source stays, counts
    add up, the peak never drops, the latest level wins)."""
    import random

    from monitor.store.sessions import SESSION_UPSERT, session_update, session_values
    from monitor.store.transactions import merged as _merged

    rng = random.Random(7)
    db = Database(sqlite3.connect(str(tmp_path / "m.db")))
    migrate(db)
    for trial in range(300):
        updates = []
        for _ in range(rng.randrange(1, 5)):
            update = {"id": "s"}
            for key, values in (
                ("source", ["/a.jsonl", "/b.jsonl", "socket:1"]),
                ("agent", ["x", "y"]),
                ("status", ["live", "ended", "idle"]),
                ("detector", ["exact_repeat", "cycle"]),
                ("reason", ["r1", "r2"]),
            ):
                if rng.random() < 0.5:
                    update[key] = rng.choice(values)
            if rng.random() < 0.6:
                update["first_seen"] = NOW + rng.randrange(10)
                update["last_seen"] = update["first_seen"] + rng.randrange(10)
            if rng.random() < 0.5:
                update["level"] = rng.choice(list(Level))
            update = session_update(update)
            if rng.random() < 0.5:
                update["events"] = rng.randrange(100)
            if rng.random() < 0.3:
                update["detections"] = rng.randrange(1, 4)
            updates.append(update)
        start = (
            [{"id": "s", "source": "/first.jsonl", "events": 3, "detections": 1}] if trial % 3 == 0 else []
        )
        rows = []
        for merged in (False, True):
            db.execute("DELETE FROM sessions")
            for update in start:
                db.conn.execute(SESSION_UPSERT, session_values(update))
            if merged:
                combined = {}
                for update in updates:
                    combined = _merged(combined, {"s": update})
                db.conn.execute(SESSION_UPSERT, session_values(combined["s"]))
            else:
                for update in updates:
                    db.conn.execute(SESSION_UPSERT, session_values(update))
            rows.append(db.execute("SELECT * FROM sessions").fetchall())
        assert rows[0] == rows[1], updates


def test_the_session_row_keeps_every_event_and_the_hubs_update(db_path: Path):
    """Events of many sessions and the hub's updates for them, written in one
    go: every event row, and one session row per session with its count, its
    first source and the hub's level."""
    with Store(db_path, batch_size=50, flush_ms=60_000) as s:
        for n in range(40):
            s.add_events([call(f"s{n}", seq, NOW + seq) for seq in range(1, 1 + n % 7 + 1)])
            s.upsert_session(
                {
                    "id": f"s{n}",
                    "kind": "file",
                    "source": "/elsewhere.jsonl",
                    "level": Level.WARN,
                    "last_ts": NOW + 100,
                    "events": 999,
                }
            )
        s.flush()
        sessions = {row["id"]: row for row in s.list_sessions(limit=100)}
    assert count(db_path, "SELECT COUNT(*) FROM events") == sum(n % 7 + 1 for n in range(40))
    assert len(sessions) == 40
    for n in range(40):
        row = sessions[f"s{n}"]
        assert (row["events"], row["source"], row["level"], row["peak"], row["last_seen"]) == (
            n % 7 + 1,
            f"/logs/s{n}.jsonl",
            "warn",
            "warn",
            NOW + 100,
        )


def test_numbering_continues_across_restarts_and_engine_resets(db_path: Path):
    """(session, seq) stays unique and ordered when the engine numbers from 1 again
    (a monitor restart, or a session closed and seen again); detections follow."""
    with Store(db_path) as s:
        s.add_events(calls("s", 3))
        s.add_events(calls("s", 2, start_ts=NOW + 10))  # engine restarted the session
        s.flush()
    with Store(db_path) as s:
        s.add_events(calls("s", 2, start_ts=NOW + 20))
        s.add_detections(
            [Detection("exact_repeat", Level.WARN, 1, "m", "p", session="s", ts=NOW + 21, seq=2)]
        )
        s.flush()
        assert [e["seq"] for e in s.events("s")] == [1, 2, 3, 4, 5, 6, 7]
        assert [e["ts"] for e in s.events("s")] == sorted(e["ts"] for e in s.events("s"))
        assert s.detections("s")[0]["seq"] == 7
        assert s.stats.duplicates == 0


def test_writes_need_a_started_open_store(db_path: Path):
    """Writing before start() or after close() is an error, not a silent loss."""
    s = Store(db_path)
    with pytest.raises(StoreError, match="start"):
        s.add_events(calls("s", 1))
    s.start()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.begin_action("ack", "s", None, "me")


# -- actions -----------------------------------------------------------------------------


def test_action_row_is_committed_before_the_action_runs(store: Store, db_path: Path):
    """begin_action returns only once another connection can read the pending row;
    finish_action likewise for the outcome."""
    seen_during_action: list[tuple] = []

    def carry_out_kill(action_id: int) -> None:
        with connect(db_path) as other:
            seen_during_action.append(
                other.execute(
                    "SELECT kind, session, outcome, who FROM actions WHERE id = ?", [action_id]
                ).fetchone()
            )

    action_id = store.begin_action("kill", "s", None, "")
    carry_out_kill(action_id)
    store.finish_action(action_id, "refused", "pid 1 is never killed")
    assert seen_during_action == [("kill", "s", "pending", current_user())]
    with connect(db_path) as other:
        outcome, detail, finished = other.execute(
            "SELECT outcome, detail, finished_ts FROM actions WHERE id = ?", [action_id]
        ).fetchone()
    assert (outcome, detail) == ("refused", "pid 1 is never killed") and finished is not None
    with pytest.raises(ValueError, match="outcome"):
        store.finish_action(action_id, "maybe")
    with pytest.raises(StoreError, match="no action"):
        store.finish_action(action_id + 100, "delivered")


# -- retention ---------------------------------------------------------------------------


def test_retention_prunes_old_events_on_start_and_on_demand(db_path: Path):
    """Events older than retention_days go at start (and on prune()); sessions,
    detections and actions stay, and numbering does not reuse pruned seqs."""
    with Store(db_path) as s:  # retention off: keeps everything
        s.add_events(calls("old", 3, start_ts=NOW - 10 * DAY))
        s.add_events(calls("new", 3, start_ts=NOW - 1 * DAY))
        s.add_detections(
            [Detection("exact_repeat", Level.WARN, 1, "m", "p", session="old", ts=NOW - 10 * DAY, seq=3)]
        )
        s.begin_action("ack", "old", None, "me")
    clock = [NOW]
    with Store(db_path, retention_days=5, clock=lambda: clock[0]) as s:
        s.flush()  # the start-up prune is queued first, so it is done now
        assert (s.count_events("old"), s.count_events("new")) == (0, 3)
        assert s.stats.pruned == 3
        assert s.get_session("old")["events"] == 3
        assert len(s.detections("old")) == 1 and len(s.actions("old")) == 1
        clock[0] = NOW + 5 * DAY
        assert s.prune() == 3
        s.add_events(calls("old", 1, start_ts=NOW + 5 * DAY))
        s.flush()
        assert [e["seq"] for e in s.events("old")] == [4]


# -- concurrency ------------------------------------------------------------------------


def test_other_readers_open_the_file_while_the_writer_runs(store: Store, db_path: Path):
    """While events stream in, the sqlite3 CLI (or a Python process) reads the
    file, and the store's own reads work from another thread."""
    stop = threading.Event()

    def keep_writing() -> None:
        # A steady stream the writer keeps up with: unpaced, the producer queued
        # rows (into the spill file) faster than a loaded machine wrote them, and
        # the flush below outlasted its 60 s.
        n = 0
        while not stop.is_set():
            if store.stats.pending > 2_000:
                stop.wait(0.005)
                continue
            store.add_events(calls("s", 50, first_seq=n + 1))
            n += 50

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        poll(lambda: store.count_events("s") > 500, "events to arrive")
        if shutil.which("sqlite3"):
            cmd = ["sqlite3", "-readonly", str(db_path), "SELECT COUNT(*) FROM events;"]
        else:
            cmd = [
                sys.executable,
                "-c",
                "import sqlite3,sys; print(sqlite3.connect("
                "sys.argv[1]).execute('SELECT COUNT(*) FROM events').fetchone()[0])",
                str(db_path),
            ]
        for _ in range(3):
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert int(out.stdout.strip()) > 0
        reads: list[int] = []
        reader = threading.Thread(target=lambda: reads.append(len(store.events("s", limit=100))))
        reader.start()
        reader.join()
        assert reads == [100]
    finally:
        stop.set()
        writer.join()
    store.flush()
    assert store.stats.failed == store.stats.dropped == 0


def test_full_queue_blocks_briefly_then_drops_and_counts(db_path: Path):
    """Without a spill file, with the writer stuck (another process holds the write
    lock) the queue never grows past max_pending: the caller blocks block_seconds,
    then the overflow is dropped and counted; everything accepted is committed once
    the lock goes.  (With the default spill file nothing is dropped: test_data_loss.)"""
    s = Store(db_path, batch_size=10, flush_ms=1, max_pending=50, block_seconds=0.2, spill_bytes=0)
    s.start()
    locker = connect(db_path)
    locker.isolation_level = None
    locker.execute("BEGIN IMMEDIATE")
    try:
        s.add_events(calls("s", 100))
        stats = s.stats
        assert stats.pending <= 50
        assert stats.dropped >= 40
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    s.flush()
    s.close()
    assert count(db_path, "SELECT COUNT(*) FROM events") == 100 - s.stats.dropped


CRASH_CHILD = """
import sys
from monitor.events import Event, Kind
from monitor.store import Store

store = Store(sys.argv[1], batch_size=200, flush_ms=5)
store.start()
seq = 0
while True:
    batch = []
    for _ in range(200):
        seq += 1
        event = Event(Kind.TOOL_RESULT, "crash", 1000.0 + seq, content="output %d " % seq * 20,
                      call_id=str(seq))
        event.seq = seq
        batch.append(event)
    store.add_events(batch)
    action = store.begin_action("inject", "crash", "try something else", "tester")
    store.flush()
    print(seq, action, flush=True)
"""


def test_sigkill_mid_write_leaves_a_clean_database_with_every_committed_row(db_path: Path):
    """A process writing through Store in a loop is SIGKILLed while writing, three
    times over the same file; each time the file passes integrity_check and holds
    every row the process had reported committed, with no gap in the numbering."""
    db_path.parent.mkdir(parents=True)
    total_before = 0
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CRASH_CHILD, str(db_path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        committed, last_action = 0, 0
        try:
            for line in child.stdout:
                committed, last_action = map(int, line.split())
                if committed >= 2000:
                    break  # the child is already writing its next batch
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
        assert committed >= 2000, child.stderr.read()
        assert child.returncode == -signal.SIGKILL
        with connect(db_path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            # the full-text index is written in the batch's transaction: it matches the rows exactly
            conn.execute("INSERT INTO events_fts(events_fts, rank) VALUES ('integrity-check', 1)")
            indexed = conn.execute(
                "SELECT COUNT(*) FROM events_fts WHERE events_fts MATCH 'output'"
            ).fetchone()[0]
            total, low, high = conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM events").fetchone()
            assert indexed == total
            actions = conn.execute("SELECT COUNT(*) FROM actions WHERE id <= ?", [last_action]).fetchone()[0]
        assert total >= total_before + committed  # nothing reported committed is lost
        assert (low, high) == (1, total)  # and nothing half-written remains
        assert actions == last_action
        total_before = total
    with Store(db_path) as s:
        s.add_events(calls("crash", 1))
        s.flush()
        assert s.count_events("crash") == total_before + 1
