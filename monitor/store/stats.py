"""What the store's writer did: the counters behind ``Store.stats``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StoreStats:
    """Counters of what the writer did (a snapshot; see ``Store.stats``)."""

    events: int = 0  # event rows committed
    detections: int = 0  # detection rows committed
    episodes: int = 0  # episode rows (each upsert) and rung rows committed
    actions: int = 0  # action rows committed
    transactions: int = 0  # write transactions committed
    duplicates: int = 0  # event rows ignored: same (session, seq) already stored
    dropped: int = 0  # rows given up because the queue and the spill file stayed full
    spilled: int = 0  # rows that waited in the spill file (back-pressure)
    failed: int = 0  # rows SQLite refused
    pruned: int = 0  # event rows deleted by retention
    pending: int = 0  # rows queued right now
    lost_full: int = 0  # of ``dropped``: rows lost while the disk was full
    lost_closing: int = 0  # of ``lost_full``: rows still waiting when the store closed on a full disk
    disk_full: bool = False  # the disk holding the database is full right now (rows wait in memory)
    last_error: str = ""
