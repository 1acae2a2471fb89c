"""An idle writer commits at once; group commit only under load (issue 32, item 16).

The mechanism, not its speed (that is ``benchmarks/bench_durable_latency.py``):
with a commit window far longer than the deadline, a single row on an idle
writer is committed well before the window ends; under a stream of rows the
writer still groups them into few transactions.
"""

from __future__ import annotations

import time

from monitor.store import Store
from tests.test_data_loss import burst

WINDOW_MS = 60_000  # the group-commit window: a test would time out long before it ends
DEADLINE = 20.0


def poll(predicate, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_an_idle_writer_commits_a_single_row_without_waiting_for_the_window(tmp_path):
    with Store(tmp_path / "lw.db", flush_ms=WINDOW_MS) as store:
        for n in range(1, 4):  # idle between them: each is committed on its own
            store.add_events(burst(n)[-1:])
            position = store.position()
            poll(lambda position=position: store.written() >= position, f"row {n} to be committed")
        assert store.count_events("b") == 3


def test_under_load_rows_are_grouped_into_few_transactions(tmp_path):
    with Store(tmp_path / "lw.db", flush_ms=200, batch_size=500) as store:
        store.upsert_session({"id": "b"})
        store.flush()
        before = store.stats.transactions
        for row in burst(2000):  # one row at a time, as fast as the caller can
            store.add_events([row])
        store.flush()
        assert store.count_events("b") == 2000
        # eager commits while idle, then batches: far fewer transactions than rows
        assert store.stats.transactions - before <= 50
