"""Helpers to check that ``watch`` reads a log as ``scan`` does.

:func:`watched` runs a real :class:`~monitor.sources.files.FileSource`, hub
and SQLite store over one file (read from its start), and gives back what the
store holds; :func:`scanned` the same facts from ``scan``.  Both are lists of
``(session, detector, level, line)`` and per-session event counts.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from monitor.config import build_config
from monitor.hub import Hub
from monitor.scan import scan
from monitor.sources.files import FileSource, KnownPositions, StartPolicy
from monitor.store import Store

DEADLINE = 30.0


def scanned(path: Path) -> tuple[list[tuple[str, str, str, int | None]], dict[str, int]]:
    """Detections and events per session of ``scan``: the detections the store keeps of them (the
    first of each rung of each loop episode, monitor/store/episodes.py)."""
    report = scan([str(path)])
    detections = sorted((d.session, d.detector, d.level.label, d.line) for d in kept(report.detections))
    assert report.engine is not None
    events = {sid: state.events for sid, state in report.engine.sessions.items()}
    return detections, events


def scanned_all(path: Path) -> tuple[list[tuple[str, str, str, int | None]], dict[str, int]]:
    """Like :func:`scanned`, with every detection (what ``eval`` scores)."""
    report = scan([str(path)])
    assert report.engine is not None
    events = {sid: state.events for sid, state in report.engine.sessions.items()}
    return sorted((d.session, d.detector, d.level.label, d.line) for d in report.detections), events


def kept(found: list) -> list:
    """Of a scan's detections, those the store keeps: what opened or escalated an episode."""
    from monitor.detect.engine import Engine
    from monitor.detect.episodes import EpisodeBook
    from monitor.store.episodes import first_detections

    books: dict[str, EpisodeBook] = {}
    out: list = []
    batch: list = []
    for detection in [*found, None]:
        if batch and (
            detection is None or (detection.session, detection.seq) != (batch[0].session, batch[0].seq)
        ):
            session = batch[0].session
            book = books.setdefault(session, EpisodeBook(session, Engine().episode_gap))
            out.extend(first_detections(book.observe(batch)))
            batch = []
        if detection is not None:
            batch.append(detection)
    return out


async def _watch(path: Path, db: Path) -> Store:
    store = Store(db)
    store.start()
    hub = Hub(build_config({}), store)
    await hub.start()
    files = FileSource([str(path)], hub, start=StartPolicy("start"))
    await files.start()
    try:
        size = path.stat().st_size
        async with asyncio.timeout(DEADLINE):
            while files.bytes_read < size:
                await asyncio.sleep(0.01)  # polling the source's counter, bounded
        await files.sync()
    finally:
        await files.stop()
        await hub.stop()
        store.close()
    return store


def watched(path: Path, tmp_path: Path) -> tuple[list[tuple[str, str, str, int | None]], dict[str, int]]:
    """Detections and events per session of a watched ``path``, as stored."""
    store = asyncio.run(_watch(path, tmp_path / "watch.db"))
    detections = []
    events: Counter[str] = Counter()
    for session in store.session_ids():
        events[session] = store.count_events(session)
        for row in store.detections(session):
            detections.append((session, row["detector"], row["level"], row["line"]))
    return sorted(detections), dict(events)


def evaluated(path: Path) -> list[tuple[str, str, int | None]]:
    """What ``loopwatch eval`` takes from ``path``: its detections at warn and above, as ``scan`` gives them."""
    from monitor.evaluate import scan_run

    run = scan_run(str(path), None)
    assert run.unreadable == "", run.unreadable
    return sorted((hit.detector, hit.level.label, hit.line) for hit in run.hits)


def warned(
    found: tuple[list[tuple[str, str, str, int | None]], dict[str, int]],
) -> list[tuple[str, str, int | None]]:
    """The detections at warn and above of :func:`scanned` or :func:`watched`, as :func:`evaluated` has them."""
    from monitor.events import Level

    return sorted(
        (d, Level.parse(level).label, line)
        for _, d, level, line in found[0]
        if Level.parse(level) >= Level.WARN
    )


async def follow(path: Path, store: Store, until, start: str = "start", then=()) -> None:
    """Watch ``path`` (a log, a database, a folder) into ``store`` until ``until()``; then, for each
    ``(act, until)`` of ``then``, act (a writer writes) and watch on, in the same watcher, until that holds."""
    hub = Hub(build_config({}), store)
    await hub.start()
    files = FileSource(
        [str(path)],
        hub,
        start=StartPolicy(start),
        known=KnownPositions(store.file_positions()),
        poll_seconds=0.05,
    )
    await files.start()
    try:
        for act, done in [(None, until), *then]:
            if act is not None:
                act()
            async with asyncio.timeout(DEADLINE):
                while not done():
                    await files.sync()
                    await hub.join()
                    await asyncio.sleep(0.02)  # polling the store, bounded by the deadline
    finally:
        await files.stop()
        await hub.stop()
