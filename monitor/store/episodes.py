"""Loop episodes in the store: one ``episodes`` row per episode, updated in
place as it goes on, and one ``episode_rungs`` row per rung it climbs (its
opening included): a loop of 500 repeats is a few rows, not 500
(monitor/detect/episodes.py says what an episode is).

Rows are built in the caller's thread from :class:`EpisodeChange`; the writer
maps the engine's event positions to the stored ones, as it does for
detections.  A row is keyed by ``(session, run_key)``: the stored position of
the episode's first event and the engine's number for it, so a restarted
monitor (whose engine numbers from 1 again) never overwrites an earlier
episode; ``number`` is the store's own, 1, 2, 3… per session.

Migration v8 (:func:`migrate_v8`) makes the tables and groups the detection
rows of an older database into episodes by the engine's rule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any

import orjson
from sqlite_utils import Database

from monitor.detect.base import Detection
from monitor.detect.episodes import DEFAULT_GAP, ENDED, ESCALATED, OPENED, Episode, EpisodeBook, EpisodeChange
from monitor.events import EventRef, Level

#: Column order of an episode row (the writer fills ``first_seq``/``last_seq`` and the key).
EPISODE_COLUMNS = (
    "session",
    "run_key",
    "detector",
    "detectors",
    "pattern",
    "message",
    "reason",
    "tool",
    "count",
    "detections",
    "level",
    "level_rank",
    "peak",
    "peak_rank",
    "first_seq",
    "last_seq",
    "first_ts",
    "last_ts",
    "file",
    "first_line",
    "last_line",
    "state",
    "closed",
    "pairs",
)
#: Column order of a rung row.
RUNG_COLUMNS = ("session", "run_key", "ts", "seq", "level", "level_rank", "detector", "message", "count")

#: Where the writer puts the engine's positions through its mapping.
FIRST_SEQ, LAST_SEQ = EPISODE_COLUMNS.index("first_seq"), EPISODE_COLUMNS.index("last_seq")
RUNG_SEQ = RUNG_COLUMNS.index("seq")
#: The engine's episode number, carried in ``run_key`` until the writer makes the key.
NUMBER_MARK = "#"

_UPDATED_ON_CONFLICT = [
    c for c in EPISODE_COLUMNS if c not in ("session", "run_key", "first_seq", "first_ts")
]
EPISODE_UPSERT = (
    f"INSERT INTO episodes (number, {', '.join(EPISODE_COLUMNS)}) "
    f"VALUES ((SELECT COALESCE(MAX(number), 0) + 1 FROM episodes WHERE session = ?), "
    f"{', '.join('?' for _ in EPISODE_COLUMNS)}) "
    f"ON CONFLICT(session, run_key) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _UPDATED_ON_CONFLICT)
)
RUNG_INSERT = (
    f"INSERT INTO episode_rungs (episode, {', '.join(RUNG_COLUMNS)}) "
    f"VALUES ((SELECT id FROM episodes WHERE session = ? AND run_key = ?), "
    f"{', '.join('?' for _ in RUNG_COLUMNS)})"
)


#: The writer's row kinds: an episode as it stands, a rung.
EPISODE_KINDS = frozenset({"x", "r"})


def keyed(kind: str, row: list[Any], stored: Any) -> tuple[str, list[Any]]:
    """A queued episode or rung row with the engine's positions mapped to the
    stored ones (``stored``: the writer's mapping) and its key made."""
    if kind == "x":
        engine_first = row[FIRST_SEQ]
        row[FIRST_SEQ], row[LAST_SEQ] = stored(row[FIRST_SEQ]), stored(row[LAST_SEQ])
        row[1] = _key(row[1], engine_first, stored)
    else:
        row[1] = _key(row[1], row[-1], stored)
        row.pop()  # (the episode's first position, carried for the key)
        row[RUNG_SEQ] = stored(row[RUNG_SEQ])
    return kind, row


def _key(marked: Any, first: Any, stored: Any) -> str:
    number = str(marked)[len(NUMBER_MARK) :] if str(marked).startswith(NUMBER_MARK) else str(marked)
    return f"{stored(first) or 0}:{number}"


def write_episodes(conn: Any, rows: list[tuple[str, list[Any]]]) -> None:
    """Upsert the episode rows, then insert the rungs (which name their episode by key)."""
    upserts = [[row[0], *row] for kind, row in rows if kind == "x"]
    if upserts:
        conn.executemany(EPISODE_UPSERT, upserts)
    rungs = [[row[0], row[1], *row] for kind, row in rows if kind == "r"]
    if rungs:
        conn.executemany(RUNG_INSERT, rungs)


#: A sessions query's column: how many episodes the session had.
EPISODE_COUNT = "(SELECT COUNT(*) FROM episodes e WHERE e.session = sessions.id) AS episodes"


def episode_dict(row: dict[str, Any]) -> dict[str, Any]:
    """A stored episode row with its JSON columns decoded (``run_key`` left out: the store's own)."""
    out = {k: v for k, v in row.items() if k != "run_key"}
    for name in ("detectors", "pairs"):
        try:
            value = orjson.loads(row.get(name) or "[]")
        except orjson.JSONDecodeError:
            value = []
        out[name] = value if isinstance(value, list) else []
    return out


def episode_from_dict(row: dict[str, Any]) -> Episode:
    """The :class:`Episode` a stored row (:func:`episode_dict`) describes, numbered as
    the store numbers it (a restarted engine numbers its own from 1 again)."""
    return Episode(
        session=row["session"],
        number=int(row.get("number") or 0),
        detector=row.get("detector") or "",
        pattern=row.get("pattern") or "",
        message=row.get("message") or "",
        reason=row.get("reason") or "",
        tool=row.get("tool"),
        count=int(row.get("count") or 0),
        level=Level.parse(row.get("level") or "none"),
        peak=Level.parse(row.get("peak") or "none"),
        first_seq=int(row.get("first_seq") or 0),
        first_ts=float(row.get("first_ts") or 0.0),
        last_seq=int(row.get("last_seq") or 0),
        last_ts=float(row.get("last_ts") or 0.0),
        source=row.get("file") or "",
        first_line=row.get("first_line"),
        last_line=row.get("last_line"),
        detectors=tuple(str(d) for d in row.get("detectors") or ()),
        pairs=tuple((str(p[0]), str(p[1])) for p in row.get("pairs") or () if len(p) == 2),
        detections=int(row.get("detections") or 0),
        closed=row.get("closed") if row.get("state") == "closed" else None,
    )


def episode_row(episode: Episode) -> list[Any]:
    """The row of an episode as it stands, in :data:`EPISODE_COLUMNS` order
    (``run_key`` holds the engine's number until the writer makes the key)."""
    e = episode
    return [
        e.session,
        f"{NUMBER_MARK}{e.number}",
        e.detector,
        orjson.dumps(list(e.detectors)).decode(),
        e.pattern[:400],
        e.message[:2000],
        e.reason[:2000],
        e.tool,
        e.count,
        e.detections,
        e.level.label,
        int(e.level),
        e.peak.label,
        int(e.peak),
        e.first_seq,
        e.last_seq,
        e.first_ts,
        e.last_ts,
        e.source or None,
        e.first_line,
        e.last_line,
        "open" if e.closed is None else "closed",
        e.closed,
        orjson.dumps([list(p) for p in e.pairs]).decode()[:8000],
    ]


def rung_row(change: EpisodeChange) -> list[Any]:
    """The rung row of an opening or escalating change."""
    e = change.episode
    return [
        e.session,
        f"{NUMBER_MARK}{e.number}",
        e.last_ts,
        e.last_seq,
        e.peak.label,
        int(e.peak),
        e.detector,
        e.message[:2000],
        e.count,
        e.first_seq,  # for the key; the writer drops it
    ]


def rows_of(changes: list[EpisodeChange]) -> list[tuple[str, list[Any]]]:
    """The writer's rows for a batch of changes: an episode row for the
    latest state of each episode changed, then a rung row per rung."""
    latest: dict[tuple[str, int], Episode] = {}
    rungs: list[tuple[str, list[Any]]] = []
    for change in changes:
        latest[change.episode.session, change.episode.number] = change.episode
        if change.kind in (OPENED, ESCALATED):
            rungs.append(("r", rung_row(change)))
    return [("x", episode_row(e)) for e in latest.values()] + rungs


def first_detections(changes: list[EpisodeChange]) -> list[Detection]:
    """The detections kept as evidence: the first of each rung (what opened
    or escalated an episode), not one per repeat."""
    return [c.detection for c in changes if c.kind in (OPENED, ESCALATED) and c.detection is not None]


# -- migration v8 ----------------------------------------------------------------


def create_tables(db: Database) -> None:
    db.execute("""
        CREATE TABLE episodes (
            id          INTEGER PRIMARY KEY,
            session     TEXT NOT NULL,
            number      INTEGER NOT NULL,    -- 1, 2, 3... per session (the store's)
            run_key     TEXT NOT NULL,       -- first stored seq:engine number (see monitor/store/episodes.py)
            detector    TEXT NOT NULL,       -- the leading detector
            detectors   TEXT NOT NULL,       -- JSON list, in the order they joined
            pattern     TEXT,
            message     TEXT,
            reason      TEXT,
            tool        TEXT,
            count       INTEGER,
            detections  INTEGER NOT NULL,    -- how many detections joined
            level       TEXT NOT NULL,
            level_rank  INTEGER NOT NULL,
            peak        TEXT NOT NULL,
            peak_rank   INTEGER NOT NULL,
            first_seq   INTEGER,
            last_seq    INTEGER,
            first_ts    REAL NOT NULL,
            last_ts     REAL NOT NULL,
            file        TEXT,
            first_line  INTEGER,
            last_line   INTEGER,
            state       TEXT NOT NULL,       -- open | closed
            closed      TEXT,                -- stopped | acknowledged | false positive | session ended
            pairs       TEXT                 -- JSON [[detector, pattern], ...]
        )""")
    db.execute("CREATE UNIQUE INDEX episodes_key ON episodes(session, run_key)")
    db.execute("CREATE INDEX episodes_session ON episodes(session, number)")
    db.execute("""
        CREATE TABLE episode_rungs (
            id          INTEGER PRIMARY KEY,
            episode     INTEGER,             -- episodes.id
            session     TEXT NOT NULL,
            run_key     TEXT NOT NULL,
            ts          REAL NOT NULL,
            seq         INTEGER,
            level       TEXT NOT NULL,
            level_rank  INTEGER NOT NULL,
            detector    TEXT,
            message     TEXT,
            count       INTEGER
        )""")
    db.execute("CREATE INDEX episode_rungs_episode ON episode_rungs(episode)")


def _detection(row: dict[str, Any]) -> Detection:
    refs: tuple[EventRef, ...] = ()
    try:
        cited = orjson.loads(row["evidence"] or "[]")
        refs = tuple(
            EventRef(int(r["seq"]), "", "", None, "") for r in cited if isinstance(r, dict) and r.get("seq")
        )
    except (orjson.JSONDecodeError, TypeError, ValueError, KeyError):
        pass
    return Detection(
        row["detector"], Level(max(0, min(4, row["level_rank"] or 0))), 0.0, row["message"] or "",
        row["pattern"] or "", row["count"] or 0, row["tool"], evidence=refs, session=row["session"],
        source=row["file"] or "", line=row["line"], ts=row["ts"], seq=row["seq"] or 0,
        suppressed=row["suppressed"],
    )  # fmt: skip


def migrate_v8(db: Database) -> None:
    """Make the tables and group the stored detections into episodes (per
    session, in order, by the engine's rule and its default window): the
    first detection of each rung stays, the repeats' rows go."""
    create_tables(db)
    sessions = [r[0] for r in db.execute("SELECT DISTINCT session FROM detections").fetchall()]
    status = dict(db.execute("SELECT id, status FROM sessions").fetchall())
    for session in sessions:
        cursor = db.execute("SELECT * FROM detections WHERE session = ? ORDER BY seq, id", [session])
        names = [c[0] for c in cursor.description]
        rows = [dict(zip(names, values)) for values in cursor.fetchall()]
        _convert(db, session, rows, status.get(session))


def _convert(db: Database, session: str, rows: list[dict[str, Any]], status: str | None) -> None:
    detections = [_detection(row) for row in rows]
    by_id = {id(d): row["id"] for d, row in zip(detections, rows)}
    kept: set[int] = set()
    changes = _changes(detections, kept, by_id)
    ended = status in ("ended", "idle", "stopped")
    for episode, rungs in changes:
        if episode.closed is None and ended:
            episode = replace(episode, closed=ENDED)
        values = episode_row(episode)
        values[EPISODE_COLUMNS.index("run_key")] = f"{episode.first_seq}:{episode.number}"
        db.execute(EPISODE_UPSERT, [session, *values])
        for rung in rungs:
            rung = rung[:-1]  # (the first position rung_row carries for the writer)
            rung[RUNG_COLUMNS.index("run_key")] = values[EPISODE_COLUMNS.index("run_key")]
            db.execute(RUNG_INSERT, [session, rung[1], *rung])
    if rows:
        keep = ",".join(str(i) for i in sorted(kept)) or "NULL"
        db.execute(f"DELETE FROM detections WHERE session = ? AND id NOT IN ({keep})", [session])


def _changes(
    detections: list[Detection], kept: set[int], by_id: dict[int, int]
) -> list[tuple[Episode, list[list[Any]]]]:
    """Each episode of ``detections`` with its rung rows; the ids of the detections kept go into ``kept``."""
    book = EpisodeBook(detections[0].session if detections else "", DEFAULT_GAP)
    book.recent = deque()  # keep every closed one
    rungs: dict[int, list[list[Any]]] = {}
    batch: list[Detection] = []

    def feed() -> None:
        for change in book.observe(batch):
            if change.kind in (OPENED, ESCALATED) and change.detection is not None:
                kept.add(by_id[id(change.detection)])
                rungs.setdefault(change.episode.number, []).append(rung_row(change))

    for detection in detections:
        if batch and batch[0].seq != detection.seq:
            feed()
            batch = []
        batch.append(detection)
    if batch:
        feed()
    episodes = sorted((*book.recent, *book.open), key=lambda e: e.number)
    return [(e, rungs.get(e.number, [])) for e in episodes]
