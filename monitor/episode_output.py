"""Episodes as the CLI prints them: ``scan --json``'s lines, and the text
of one episode for ``scan``, ``show`` and headless output.

The JSON object of an episode is :meth:`monitor.detect.episodes.Episode.to_dict`
(docs/episodes.md documents its fields for scripts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO

import orjson

from monitor.config import Config
from monitor.detect.base import Detection
from monitor.detect.engine import episode_gap
from monitor.detect.episodes import Episode, group
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
