"""The SQLite store: every session, event, detection and operator action.

* :mod:`~monitor.store.store` -- :class:`Store`: opens the file, runs the writer, takes writes;
* :mod:`~monitor.store.reader` -- :class:`StoreReader`: the read-only queries;
* :mod:`~monitor.store.search` -- sessions matching a text (history's search);
* :mod:`~monitor.store.writer` -- the one writer thread;
* :mod:`~monitor.store.backlog` -- its bounded queue (memory, then the spill file, then counted drops);
* :mod:`~monitor.store.transactions` -- what that thread commits, and how it retries;
* :mod:`~monitor.store.spill` -- the queue's overflow file;
* :mod:`~monitor.store.rows` / :mod:`~monitor.store.sessions` -- events and
  detections as rows; how session rows are merged and which status is shown;
* :mod:`~monitor.store.schema` -- tables and migrations;
* :mod:`~monitor.store.recovery` -- what a run killed without closing left behind;
* :mod:`~monitor.store.paths` -- where the database is.
"""

from monitor.store.paths import DB_NAME, default_db_path, resolve_db_path
from monitor.store.reader import StoreError, StoreReader
from monitor.store.stats import StoreStats
from monitor.store.store import Store

__all__ = [
    "DB_NAME",
    "Store",
    "StoreError",
    "StoreReader",
    "StoreStats",
    "default_db_path",
    "resolve_db_path",
]
