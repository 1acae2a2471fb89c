"""Sessions an earlier watcher recorded in the same database, taken up when the hub starts.

A restarted ``watch`` shows what the database holds (closed sessions as
``ended`` or ``idle``, with their last level, reason and counts), and a
session that goes on in a tailed log after the restart keeps its escalation:
its patterns stay on the rungs they had climbed (``Engine.seed``), so three
more identical failures do not start the ladder again at ``warn``, and the
patterns the operator marked a false positive stay marked
(:func:`restore_false_positives`).

Nothing is written back: a seeded row is the store's own (``store_dirty`` is
false until the session changes), and events are counted by the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from monitor.detect.base import Detection
from monitor.detect.episodes import Episode
from monitor.detect.escalation import EscalationSettings
from monitor.events import Level
from monitor.hub.actions import MUTED
from monitor.hub.false_positives import restore
from monitor.hub.restored_waits import restore_waits
from monitor.hub.sessions import MAX_CLOSED_SESSIONS
from monitor.hub.state import HubSession
from monitor.store.episodes import episode_from_dict

log = logging.getLogger("loopwatch.hub")

#: Sessions whose detections are read to seed their ladder (the most recent not
#: ended that reached warn); the others are seeded from their session row alone.
SEED_LADDERS = 200


@dataclass(frozen=True)
class Seed:
    """One stored session as the hub takes it up."""

    row: dict[str, Any]
    #: The detection that set its level (``None``: watching).
    last: Detection | None = None
    #: ``(detector, pattern, rungs climbed, latest count)`` of each pattern that climbed the ladder.
    rungs: tuple[tuple[str, str, int, int], ...] = ()
    muted: tuple[str, ...] = ()
    #: The patterns marked a false positive: ``{detector, pattern, since, action}`` each.
    false_positives: tuple[dict[str, Any], ...] = ()


def read_seeds(
    store: Any,
    ladder: Sequence[Level] = EscalationSettings.ladder,
    limit: int = MAX_CLOSED_SESSIONS,
    ladders: int = SEED_LADDERS,
) -> list[Seed]:
    """What the store holds of its latest ``limit`` sessions, the oldest first
    (reads only: run it in a thread); ``ladder``: the escalation's."""
    seeds = []
    detailed = 0
    marks = store.false_positives() if hasattr(store, "false_positives") else {}
    for row in store.list_sessions(limit=limit):
        status = row.get("status")
        level, peak = _level(row.get("level_rank")), _level(row.get("peak_rank"))
        if status != "ended" and peak >= Level.WARN and detailed < ladders:
            detailed += 1
            found, actions = store.detections(row["id"]), store.actions(row["id"])
            episodes = store.episodes(row["id"]) if hasattr(store, "episodes") else []
            seeds.append(_detailed(row, level, ladder, [*found, *_episode_pairs(episodes)], actions))
        else:
            seeds.append(Seed(row, _from_row(row, level)))
        if row["id"] in marks:
            seeds[-1] = replace(seeds[-1], false_positives=tuple(marks[row["id"]]))
    seeds.reverse()
    return seeds


def _level(rank: Any) -> Level:
    """A stored level rank (a database written by another version may hold anything)."""
    try:
        return Level(int(rank or 0))
    except (TypeError, ValueError):
        return Level.NONE


def _from_row(row: dict[str, Any], level: Level, found: dict[str, Any] | None = None) -> Detection | None:
    """The detection that set the session's level, as its row (and its stored detection, if found) say."""
    if level <= Level.NONE or not row.get("detector"):
        return None
    found = found or {}
    return Detection(
        detector=row["detector"],
        level=level,
        score=found.get("score") or 0.0,
        message=row.get("reason") or found.get("message") or "",
        pattern=found.get("pattern") or "",
        count=found.get("count") or 0,
        tool=found.get("tool"),
        session=row["id"],
        source=found.get("file") or row.get("source") or "",
        line=found.get("line"),
        ts=found.get("ts") or row.get("last_seen") or 0.0,
        nudge=found.get("nudge") or "",
    )


def _episode_pairs(episodes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pattern that joined a stored loop episode still open, as a detection at the
    episode's peak (the store keeps rung rows of the leading detector only)."""
    out = []
    for episode in episodes:
        if episode.get("state") != "open":
            continue
        for pair in episode.get("pairs") or ():
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                detector, pattern = pair
                rank = episode.get("peak_rank") or 0
                out.append(
                    {"detector": detector, "pattern": pattern, "level_rank": rank, "episode_peak": True}
                )
    return out


def climbed(ladder: Sequence[Level], rows: int, reached: Level) -> int:
    """Rungs a pattern had climbed: at least one past the first rung at its
    highest level (the store keeps only the first detection of each rung), and
    at least as many as its stored detections."""
    first = next((at for at, rung in enumerate(ladder) if rung >= reached), len(ladder) - 1)
    return max(rows, first + 1)


def _detailed(
    row: dict[str, Any],
    level: Level,
    ladder: Sequence[Level],
    detections: Iterable[dict[str, Any]],
    actions: Iterable[dict[str, Any]],
) -> Seed:
    seen: dict[tuple[str, str], list[int]] = {}  # (detector, pattern): [rows, latest count, highest rank]
    setter: dict[str, Any] | None = None
    for found in detections:
        if found.get("suppressed") or (found.get("level_rank") or 0) < Level.WARN:
            continue
        entry = seen.setdefault((found["detector"], found.get("pattern") or ""), [0, 0, 0])
        entry[2] = max(entry[2], found.get("level_rank") or 0)
        if found.get("episode_peak"):
            continue  # (a pattern an open episode holds: its rung only)
        entry[0] += 1
        entry[1] = found.get("count") or 0
        if found["detector"] == row.get("detector"):
            setter = found  # the latest of the detector that set the level
    muted = tuple(
        str(action.get("detail") or "").removesuffix(MUTED)
        for action in actions
        if action.get("kind") == "mute"
        and action.get("outcome") == "delivered"
        and str(action.get("detail") or "").endswith(MUTED)
    )
    rungs = tuple(
        (detector, pattern, climbed(ladder, rows, _level(rank)), count)
        for (detector, pattern), (rows, count, rank) in seen.items()
    )
    return Seed(row, _from_row(row, level, setter), rungs, muted)


def adopt(hub: Any, seeds: Iterable[Seed]) -> int:
    """Take ``seeds`` up in the hub's lifecycle and engine; how many were new."""
    lifecycle, engine = hub.lifecycle, hub.engine
    taken = 0
    for seed in seeds:
        row = seed.row
        session = row["id"]
        if session in lifecycle.sessions:
            continue
        state = HubSession(
            id=session,
            origin=row.get("origin") or "file",
            source=row.get("source") or "",
            first_ts=row.get("first_seen") or 0.0,
            last_ts=row.get("last_seen") or 0.0,
            last_activity=row.get("last_seen") or 0.0,
            events=row.get("events") or 0,
            agent=row.get("agent"),
            pid=row.get("pid"),
            parent=row.get("parent"),
            status="ended" if row.get("status") == "ended" else "idle",
            kill_reason="the session is not live",
            last_detection=seed.last,
            store_dirty=False,
            stored_level=_level(row.get("level_rank")),
        )
        state.home = state.source
        engine.seed(
            session, seed.last, seed.rungs, reason=row.get("reason") or "", episodes=row.get("episodes") or 0
        )
        for detector in seed.muted:
            engine.mute(session, detector)
        restore_false_positives(engine, state, seed)
        lifecycle.adopt(state)
        taken += 1
    return taken


def restore_false_positives(engine: Any, state: HubSession, seed: Seed) -> None:
    """The patterns marked a false positive before the restart stay marked (after
    ``Engine.seed``, which put their rungs back): monitor/hub/false_positives.py."""
    if seed.false_positives:
        restore(engine, state, seed.false_positives)


async def seed_hub(hub: Any) -> int:
    """Seed ``hub`` from its store (nothing without one, or when the store cannot be
    read); ``hub.seeded`` says how many sessions it took up."""
    hub.seeded = 0
    hub.seeded_episodes = []
    store = hub.store
    if store is None or not hasattr(store, "list_sessions"):
        return 0
    try:
        seeds = await asyncio.to_thread(read_seeds, store, hub.config.escalation.ladder)
    except Exception:  # an unreadable database must not stop the monitor: it starts empty
        log.exception("could not read the sessions an earlier run recorded")
        return 0
    hub.seeded = adopt(hub, seeds)
    await restore_waits(hub, [seed.row for seed in seeds])  # waits left open (hub/restored_waits.py)
    try:
        hub.seeded_episodes = await asyncio.to_thread(read_episodes, store, hub.lifecycle.sessions)
    except Exception:  # the feed starts without them; the sessions are taken up
        log.exception("could not read the loop episodes an earlier run recorded")
    return hub.seeded


#: Stored loop episodes shown in a restarted dashboard's feed (the latest).
SEED_EPISODES = 50


def read_episodes(store: Any, sessions: Container[str], limit: int = SEED_EPISODES) -> list[Episode]:
    """The latest stored loop episodes of ``sessions``, the oldest first (reads only)."""
    if not hasattr(store, "latest_episodes"):
        return []
    rows = [row for row in store.latest_episodes(limit) if row.get("session") in sessions]
    return [episode_from_dict(row) for row in reversed(rows)]
