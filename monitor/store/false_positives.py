"""False positives in the store: what a ``false_positive`` action marked, so a
restarted monitor marks it again.

A false positive applies to a loop episode: every (detector, pattern) that
joined it (monitor/detect/episodes.py).  Since v9 the action's row says which,
in ``actions.pairs`` (JSON ``[[detector, pattern], ...]``), written with the
action before it is carried out; a delivered one is in force from its ``ts``
(wall clock) for as long as the session is kept.

Migration v9 (:func:`migrate_v9`) adds the column and fills it for the false
positives an older version recorded, which named the detector only: the
pairs of the session's episodes closed as a false positive that the
detector joined, else the pattern of that detector's latest stored detection.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlite_utils import Database

#: A false positive's pairs kept per action (an episode remembers at most 16).
MAX_PAIRS = 32


def pairs_json(pairs: Any) -> str | None:
    """``pairs`` as the column holds them (None: none given)."""
    if not pairs:
        return None
    return orjson.dumps([[str(d), str(p)] for d, p in list(pairs)[:MAX_PAIRS]]).decode()


def read_pairs(text: Any) -> list[tuple[str, str]]:
    """The pairs a stored column holds (nothing for a value another version wrote badly)."""
    try:
        value = orjson.loads(text or "[]")
    except (orjson.JSONDecodeError, TypeError):
        return []
    if not isinstance(value, list):
        return []
    return [
        (pair[0], pair[1])
        for pair in value
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
    ]


#: The delivered false positives, oldest first (one session, or all).
DELIVERED = (
    "SELECT id, session, ts, pairs FROM actions WHERE kind = 'false_positive' "
    "AND outcome = 'delivered' AND pairs IS NOT NULL"
)


def marks_of(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per session, each pattern marked a false positive once (the first mark's
    time and action): ``{detector, pattern, since, action}``."""
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str, str]] = set()
    for row in sorted(rows, key=lambda r: (r["ts"], r["id"])):
        for detector, pattern in read_pairs(row["pairs"]):
            key = (row["session"], detector, pattern)
            if key in seen:
                continue
            seen.add(key)
            out.setdefault(row["session"], []).append(
                {"detector": detector, "pattern": pattern, "since": row["ts"], "action": row["id"]}
            )
    return out


# -- migration v9 ----------------------------------------------------------------


def migrate_v9(db: Database) -> None:
    """``actions.pairs``, filled for the delivered false positives already recorded."""
    db.execute("ALTER TABLE actions ADD COLUMN pairs TEXT")
    old = db.execute(
        "SELECT id, session, detail FROM actions WHERE kind = 'false_positive' "
        "AND outcome = 'delivered' ORDER BY ts, id"
    ).fetchall()
    taken: dict[str, set[tuple[str, str]]] = {}
    for action_id, session, detail in old:
        detector = str(detail or "").split(" ", 1)[0]  # the outcome begins with the detector
        if not detector:
            continue
        done = taken.setdefault(session, set())
        pairs = [p for p in _episode_pairs(db, session, detector) if p not in done]
        if not pairs:
            pairs = _latest_pattern(db, session, detector)
        done.update(pairs)
        if pairs:
            db.execute("UPDATE actions SET pairs = ? WHERE id = ?", [pairs_json(pairs), action_id])


def _episode_pairs(db: Database, session: str, detector: str) -> list[tuple[str, str]]:
    rows = db.execute(
        "SELECT detectors, pairs FROM episodes WHERE session = ? AND closed = 'false positive' ORDER BY number",
        [session],
    ).fetchall()
    out: list[tuple[str, str]] = []
    for detectors, pairs in rows:
        if detector in {d for d, _ in read_pairs(pairs)} or f'"{detector}"' in str(detectors or ""):
            out += [p for p in read_pairs(pairs) if p not in out]
    return out


def _latest_pattern(db: Database, session: str, detector: str) -> list[tuple[str, str]]:
    row = db.execute(
        "SELECT pattern FROM detections WHERE session = ? AND detector = ? AND pattern IS NOT NULL "
        "ORDER BY ts DESC, id DESC LIMIT 1",
        [session, detector],
    ).fetchone()
    return [(detector, row[0])] if row else []
