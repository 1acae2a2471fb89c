"""Episodes as the CLI prints them: ``scan --json``'s lines, and the text
of one episode for ``scan``, ``show`` and headless output.

The JSON object of an episode is :meth:`monitor.detect.episodes.Episode.to_dict`
(docs/episodes.md documents its fields for scripts).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING

import orjson

from monitor.config import Config
from monitor.detect.base import Detection
from monitor.detect.engine import episode_gap
from monitor.detect.episodes import UPDATED, Episode, EpisodeChange, group
from monitor.events import Level
from monitor.scan import scanned_line
from monitor.text import printable

if TYPE_CHECKING:
    from monitor.scan import ScanReport


def scanned_episodes(detections: Iterable[Detection], config: Config | None) -> list[Episode]:
    """The episodes of a scan's detections (grouped by the engine's rule and window)."""
    return group(detections, episode_gap(config or Config()))


def write_json(out: IO[str], episodes: Iterable[Episode], min_level: Level) -> None:
    """One JSON object per episode whose peak is at or above ``min_level``."""
    for episode in episodes:
        if episode.peak >= min_level:
            out.write(orjson.dumps(episode.to_dict()).decode() + "\n")


def write_scan_json(
    out: IO[str], detections: list[Detection], each: bool, min_level: Level, config: Config | None
) -> None:
    """``scan --json``: the episodes, or with ``--detections`` (``each``) every detection."""
    if each:
        for detection in detections:
            if detection.level >= min_level:
                out.write(orjson.dumps(detection.to_dict()).decode() + "\n")
        return
    write_json(out, scanned_episodes(detections, config), min_level)


def format_scan(report: ScanReport, config: Config | None, min_level: Level = Level.NOTICE) -> str:
    """``scan``'s text: per session its episodes (one line each, not a line per
    repeat), then the summary line, which counts both."""
    episodes = [e for e in scanned_episodes(report.detections, config) if e.peak >= min_level]
    by_session: dict[str, list[Episode]] = {}
    for episode in episodes:
        by_session.setdefault(episode.session, []).append(episode)
    lines: list[str] = []
    for session, shown in by_session.items():
        reason = report.session_reason(session)
        worst = max(e.peak for e in shown)
        agent_name = report.session_agents().get(session) or "agent"
        lines.append(
            printable(
                f"session {session} ({agent_name}): {worst.label.upper()}"
                + (f" — {reason}" if reason else "")
            )
        )
        lines.extend(_scan_line(e) for e in shown)
    lines.append(scanned_line(report, len(episodes)))
    return "\n".join(lines)


def _scan_line(e: Episode) -> str:
    lines = f"{e.first_line}" if e.first_line == e.last_line else f"{e.first_line}–{e.last_line}"
    where = e.source if e.first_line is None else f"{e.source}:{lines}"
    state = "" if e.closed is None else f"; {e.closed}"
    return printable(
        f"  {e.peak.label:<9} #{e.number} ×{e.count} {'+'.join(e.detectors)}  {where}  {e.message}"
        f"  ({e.detections} detection(s){state})"
    )


def printed(change: EpisodeChange, min_level: Level) -> bool:
    """Whether headless output prints ``change``: an opening, escalation or
    close (not each repeat) of an episode that reached ``min_level``."""
    return change.kind != UPDATED and change.episode.peak >= min_level


def change_json(change: EpisodeChange) -> str:
    """``watch --headless --json``'s line: ``change`` and ``ts`` (its event time), then the episode."""
    record = {"change": change.kind, "ts": change.episode.last_ts, **change.episode.to_dict()}
    return orjson.dumps(record).decode()


def change_line(change: EpisodeChange) -> str:
    """``watch --headless``'s line: time, what happened, level, detectors, session, file:line, message."""
    e = change.episode
    try:
        clock = time.strftime("%H:%M:%S", time.localtime(e.last_ts))
    except (OverflowError, OSError, ValueError):  # a time no clock shows
        clock = "--:--:--"
    line = e.last_line if change.kind != "opened" else e.first_line
    where = e.source if line is None else f"{e.source}:{line}"
    what = f"closed ({e.closed})" if e.closed else change.kind
    return printable(
        f"{clock} {e.peak.label.upper():<9} {what:<10} {'+'.join(e.detectors)} {e.session} #{e.number}  "
        f"{where}  ×{e.count} {e.message}"
    )
