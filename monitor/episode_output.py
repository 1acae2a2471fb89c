"""Episodes as the CLI prints them: ``scan --json``'s lines, and the text
of one episode for ``scan``, ``show`` and headless output.

The JSON object of an episode is :meth:`monitor.detect.episodes.Episode.to_dict`
(docs/episodes.md documents its fields for scripts).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import IO

import orjson

from monitor.config import Config
from monitor.detect.base import Detection
from monitor.detect.engine import episode_gap
from monitor.detect.episodes import UPDATED, Episode, EpisodeChange, group
from monitor.events import Level
from monitor.text import printable


def scanned_episodes(detections: Iterable[Detection], config: Config | None) -> list[Episode]:
    """The episodes of a scan's detections (grouped by the engine's rule and window)."""
    return group(detections, episode_gap(config or Config()))


def write_json(out: IO[str], episodes: Iterable[Episode], min_level: Level) -> None:
    """One JSON object per episode whose peak is at or above ``min_level``."""
    for episode in episodes:
        if episode.peak >= min_level:
            out.write(orjson.dumps(episode.to_dict()).decode() + "\n")


def line(episode: Episode) -> str:
    """One line for a person: level, ×count, detectors, message, where and state."""
    where = episode.source if episode.first_line is None else f"{episode.source}:{episode.first_line}"
    state = "open" if episode.closed is None else f"closed: {episode.closed}"
    detectors = "+".join(episode.detectors)
    return printable(
        f"#{episode.number} {episode.peak.label:<9} ×{episode.count} {detectors}: {episode.message} "
        f"({episode.detections} detection(s), events {episode.first_seq}–{episode.last_seq}, {where}; {state})"
    )


def lines(episodes: Iterable[Episode]) -> Iterator[str]:
    for episode in episodes:
        yield line(episode)


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
