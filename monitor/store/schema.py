"""The store's SQLite schema and its migrations.

The schema is versioned: ``schema_version`` holds one row per applied
migration, and :data:`MIGRATIONS` lists the migration functions in order.
Opening a database applies the ones it lacks, each in its own transaction
together with its version row, so a crash mid-migration leaves the database
at the previous version.  A migration is never edited once released; a change
is a new function appended to the list.

Tables (see ``loopwatch show``/``history`` for readers):

* ``sessions``    one row per agent session, merged from its events, its
  detections and the hub's updates (final and peak escalation level).
* ``events``      every event: type, tool, args JSON, a bounded copy of the
  content plus its full length and hash, file/line, ts, seq.
* ``detections``  every detection after escalation.
* ``actions``     operator actions: recorded ``pending`` before they are
  carried out, then ``delivered`` | ``failed`` | ``unsupported`` | ``refused``.
* ``file_positions`` how far each followed log file has been read and stored,
  by the file's identity (device, inode and a hash of its first bytes), so
  that a restarted watcher resumes each file instead of storing it again.
* ``events_fts``  FTS5 index of events' tool, args and content (v5; made again
  in v6 so that ``sqlite-utils search`` and Datasette find it).
* ``sessions.owner`` the watcher process (``pid:start``) that last wrote the
  session (v6), so a reader can show the sessions of a killed one ``stopped``.
* ``detections.cost`` what the detection's loop episode had cost (JSON), and
  ``sessions.loop_tokens`` / ``loop_usd`` / ``loop_unpriced_tokens`` what the
  session's loop episodes cost in all (v7: ``monitor/cost.py``).
* ``episodes``    one row per loop episode, updated in place as it goes on, and
  ``episode_rungs`` one row per rung it climbed (v8: ``monitor/store/episodes.py``);
  since v8 ``detections`` holds the first detection of each rung, not every repeat.
* ``actions.pairs`` the (detector, pattern) pairs a false positive marked, so a
  restarted monitor marks them again (v9: ``monitor/store/false_positives.py``).
* v10: the writer indexes each batch's new events with one statement
  (:data:`FTS_INDEX_NEW`) instead of the per-row insert trigger, which cost
  the writer more than the events themselves; deletes and updates keep their triggers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlite_utils import Database


class SchemaError(RuntimeError):
    """The file is not a loopwatch database this version can use."""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Database], None]


def _v1_tables(db: Database) -> None:
    _v1_sessions_and_events(db)
    _v1_detections_and_actions(db)


def _v1_sessions_and_events(db: Database) -> None:
    db.execute("""
        CREATE TABLE sessions (
            id          TEXT PRIMARY KEY,
            agent       TEXT,
            source      TEXT,            -- log file, or socket:<peer>
            origin      TEXT,            -- file | socket | hook
            pid         INTEGER,
            parent      TEXT,
            first_seen  REAL,            -- epoch seconds (event time)
            last_seen   REAL,
            status      TEXT,            -- live | idle | ended
            level       TEXT,            -- final escalation level (label)
            level_rank  INTEGER,         -- 0 watching .. 4 terminate
            peak        TEXT,            -- highest level ever reached
            peak_rank   INTEGER,
            detector    TEXT,            -- detector behind the final level
            reason      TEXT,
            events      INTEGER NOT NULL DEFAULT 0,
            detections  INTEGER NOT NULL DEFAULT 0
        )""")
    db.execute("CREATE INDEX sessions_last_seen ON sessions(last_seen)")
    db.execute("""
        CREATE TABLE events (
            id             INTEGER PRIMARY KEY,
            session        TEXT NOT NULL,
            seq            INTEGER NOT NULL,  -- 1-based position in the session
            ts             REAL NOT NULL,
            type           TEXT NOT NULL,
            role           TEXT,
            tool           TEXT,
            call_id        TEXT,
            args           TEXT,              -- JSON, long strings clipped
            is_error       INTEGER NOT NULL DEFAULT 0,
            content        TEXT,              -- bounded copy: head + tail
            content_length INTEGER NOT NULL DEFAULT 0,  -- full length (characters)
            content_hash   TEXT,              -- blake2b-128 of the full content
            file           TEXT,
            line           INTEGER,
            agent          TEXT,
            status         TEXT,
            pid            INTEGER,
            parent         TEXT,
            input_tokens   INTEGER,
            output_tokens  INTEGER,
            cost_usd       REAL,
            meta           TEXT               -- JSON or NULL
        )""")
    db.execute("CREATE UNIQUE INDEX events_session_seq ON events(session, seq)")


def _v1_detections_and_actions(db: Database) -> None:
    db.execute("""
        CREATE TABLE detections (
            id         INTEGER PRIMARY KEY,
            session    TEXT NOT NULL,
            ts         REAL NOT NULL,
            seq        INTEGER,
            detector   TEXT NOT NULL,
            level      TEXT NOT NULL,
            level_rank INTEGER NOT NULL,
            score      REAL,
            pattern    TEXT,
            count      INTEGER,
            tool       TEXT,
            message    TEXT,
            nudge      TEXT,
            suppressed TEXT,
            evidence   TEXT,                  -- JSON list of event references
            file       TEXT,
            line       INTEGER
        )""")
    db.execute("CREATE INDEX detections_session ON detections(session, ts)")
    db.execute("""
        CREATE TABLE actions (
            id          INTEGER PRIMARY KEY,
            session     TEXT NOT NULL,
            kind        TEXT NOT NULL,        -- ack | inject | kill | false_positive | mute
            text        TEXT,
            ts          REAL NOT NULL,        -- wall clock when requested
            who         TEXT NOT NULL,        -- OS user
            outcome     TEXT NOT NULL DEFAULT 'pending',
            detail      TEXT NOT NULL DEFAULT '',
            finished_ts REAL
        )""")
    db.execute("CREATE INDEX actions_session ON actions(session, ts)")


def _v2_events_by_time(db: Database) -> None:
    # Retention deletes by event time, and `scan --db` over many sessions
    # replays them in time order; both need this index.
    db.execute("CREATE INDEX events_ts ON events(ts)")


def _v3_file_positions(db: Database) -> None:
    db.execute("""
        CREATE TABLE file_positions (
            dev       INTEGER NOT NULL,
            ino       INTEGER NOT NULL,
            head_len  INTEGER NOT NULL,    -- bytes hashed at the start of the file
            head      TEXT NOT NULL,       -- blake2b-128 of those bytes
            path      TEXT NOT NULL,
            offset    INTEGER NOT NULL,    -- end of the last complete line stored
            line      INTEGER,             -- number of the next line (NULL: not counted)
            mark      BLOB,                -- the bytes just before offset
            updated   REAL NOT NULL,
            PRIMARY KEY (dev, ino)
        )""")
    db.execute("CREATE INDEX file_positions_path ON file_positions(path)")


def _v4_action_owner_and_losses(db: Database) -> None:
    # owner: the monitor process (pid:start) that recorded an action, so a
    # restart can finish the pending actions of a monitor that is gone.
    db.execute("ALTER TABLE actions ADD COLUMN owner TEXT")
    # Rows the store could not record (queue and spill full, rows SQLite
    # refused): counted per run, shown by `history`.
    db.execute("""
        CREATE TABLE store_losses (
            id      INTEGER PRIMARY KEY,
            ts      REAL NOT NULL,
            owner   TEXT NOT NULL,          -- the monitor process, pid:start
            dropped INTEGER NOT NULL,       -- rows dropped so far this run
            failed  INTEGER NOT NULL,       -- rows SQLite refused so far this run
            reason  TEXT NOT NULL
        )""")


#: The full-text index of events, in sqlite-utils' conventions (``<table>_fts``,
#: triggers ``<table>_ai/_ad/_au``).  External content: the text is not stored twice.
FTS_COLUMNS = ("tool", "args", "content")


def _v5_events_fts(db: Database) -> None:
    # Triggers keep the index in the writer's own transactions (inserts, and
    # retention's deletes); 'rebuild' indexes what an existing database holds.
    cols = ", ".join(FTS_COLUMNS)
    new = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    db.execute(
        f"CREATE VIRTUAL TABLE events_fts USING fts5({cols}, content='events', content_rowid='id', columnsize=0)"
    )
    db.execute(
        f"CREATE TRIGGER events_ai AFTER INSERT ON events BEGIN "
        f"INSERT INTO events_fts(rowid, {cols}) VALUES (new.id, {new}); END"
    )
    db.execute(
        f"CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN "
        f"INSERT INTO events_fts(events_fts, rowid, {cols}) VALUES ('delete', old.id, {old}); END"
    )
    db.execute(
        f"CREATE TRIGGER events_au AFTER UPDATE ON events BEGIN "
        f"INSERT INTO events_fts(events_fts, rowid, {cols}) VALUES ('delete', old.id, {old}); "
        f"INSERT INTO events_fts(rowid, {cols}) VALUES (new.id, {new}); END"
    )
    db.execute("INSERT INTO events_fts(events_fts) VALUES ('rebuild')")


def _fts_table(db: Database) -> None:
    # content="events" in double quotes: sqlite-utils (``table.search()``,
    # ``sqlite-utils search``) and Datasette find an index by that spelling only.
    cols = ", ".join(FTS_COLUMNS)
    db.execute(
        f'CREATE VIRTUAL TABLE events_fts USING fts5({cols}, content="events", '
        f'content_rowid="id", columnsize=0)'
    )
    db.execute("INSERT INTO events_fts(events_fts) VALUES ('rebuild')")


#: Index the events inserted after rowid ``?`` (the writer's batch, in its own
#: transaction: ``id > MAX(id)`` read before the insert is exactly the new rows).
FTS_INDEX_NEW = (
    f"INSERT INTO events_fts(rowid, {', '.join(FTS_COLUMNS)}) "
    f"SELECT id, {', '.join(FTS_COLUMNS)} FROM events WHERE id > ?"
)


def _v6_session_owner(db: Database) -> None:
    # owner: the watcher (pid:start) that last wrote the session, so readers
    # show "stopped" for the sessions of one that is gone (killed by SIGKILL).
    db.table("sessions").add_column("owner", str)
    # v5 spelled content='events', which sqlite-utils and Datasette do not
    # detect: the index is made again (the v5 triggers keep working with it).
    db.execute("DROP TABLE events_fts")
    _fts_table(db)


def _v7_loop_costs(db: Database) -> None:
    # What loops cost (monitor/cost.py): per detection its episode's cost so
    # far, per session the sum of its usage inside loop episodes (counted by
    # the writer from usage rows, like `detections`).  Older rows: unknown.
    db.execute("ALTER TABLE detections ADD COLUMN cost TEXT")
    db.execute("ALTER TABLE sessions ADD COLUMN loop_tokens INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE sessions ADD COLUMN loop_usd REAL NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE sessions ADD COLUMN loop_unpriced_tokens INTEGER NOT NULL DEFAULT 0")


def _v8_episodes(db: Database) -> None:
    # One row per loop episode and one per rung, not one detection row per
    # repeat: the detection rows of each episode but the first of each rung go.
    from monitor.store.episodes import migrate_v8

    migrate_v8(db)


def _v9_false_positive_pairs(db: Database) -> None:
    # A false positive names the patterns it marked (it named the detector only),
    # so a restarted monitor does not flag them again.
    from monitor.store.false_positives import migrate_v9

    migrate_v9(db)


def _v10_batched_fts(db: Database) -> None:
    # A trigger's insert into an FTS5 table flushes the index at each row's
    # statement savepoint: a new segment per event, merged again and again
    # (~2.5x the writer's CPU per event).  One INSERT ... SELECT per batch
    # writes the same index once (monitor/store/transactions.py).
    db.execute("DROP TRIGGER IF EXISTS events_ai")


MIGRATIONS: list[Migration] = [
    Migration(1, "sessions, events, detections and actions", _v1_tables),
    Migration(2, "index events by time (retention, time-ordered re-scans)", _v2_events_by_time),
    Migration(3, "file read positions (a restarted watcher resumes each file)", _v3_file_positions),
    Migration(
        4, "actions.owner (reconciling interrupted actions); store_losses", _v4_action_owner_and_losses
    ),
    Migration(5, "full-text index of events (tool, args, content)", _v5_events_fts),
    Migration(
        6,
        "sessions.owner (sessions of a stopped watcher); full-text index found by sqlite-utils and Datasette",
        _v6_session_owner,
    ),
    Migration(
        7,
        "what loops cost: detections.cost, sessions.loop_tokens/loop_usd/loop_unpriced_tokens",
        _v7_loop_costs,
    ),
    Migration(
        8,
        "loop episodes: episodes and episode_rungs, detection rows grouped (the first of each rung kept)",
        _v8_episodes,
    ),
    Migration(
        9,
        "actions.pairs: the (detector, pattern) pairs a false positive marked (older ones filled in)",
        _v9_false_positive_pairs,
    ),
    Migration(
        10,
        "full-text index of new events written once per batch by the store's writer (insert trigger dropped)",
        _v10_batched_fts,
    ),
]


def latest_version() -> int:
    return MIGRATIONS[-1].version


def current_version(db: Database) -> int:
    """The schema version of ``db``; 0 for an empty database.

    Raises :class:`SchemaError` for a database that has tables but is not a
    loopwatch store."""
    names = set(db.table_names())
    if "schema_version" not in names:
        if names:
            raise SchemaError("not a loopwatch database (it has no schema_version table)")
        return 0
    row = next(db.query("SELECT MAX(version) AS v FROM schema_version"))
    return int(row["v"] or 0)


def migrate(db: Database, upto: int | None = None) -> list[int]:
    """Apply the migrations ``db`` lacks (up to ``upto``); return their versions.

    ``db`` must be a writable connection outside any transaction.  Each
    migration runs in a ``BEGIN IMMEDIATE`` transaction that re-reads the
    version first, so two processes opening the same file cannot both apply it.
    """
    target = latest_version() if upto is None else upto
    applied: list[int] = []
    for migration in MIGRATIONS:
        if migration.version > target:
            break
        db.execute("BEGIN IMMEDIATE")
        try:
            if "schema_version" not in db.table_names():
                if db.table_names():
                    raise SchemaError("not a loopwatch database (it has no schema_version table)")
                db.execute(
                    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
                    "applied_ts REAL NOT NULL, description TEXT NOT NULL)"
                )
            if current_version(db) < migration.version:
                migration.apply(db)
                db.execute(
                    "INSERT INTO schema_version VALUES (?, ?, ?)",
                    [migration.version, time.time(), migration.description],
                )
                applied.append(migration.version)
            db.commit()
        except BaseException:
            db.rollback()
            raise
    version = current_version(db)
    if version > latest_version():
        raise SchemaError(
            f"database schema v{version} is newer than this loopwatch "
            f"(v{latest_version()}); upgrade loopwatch to use it"
        )
    return applied
