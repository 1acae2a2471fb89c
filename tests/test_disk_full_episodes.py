"""A disk that fills again after it had room is told again, a bounded number of times."""

from __future__ import annotations

import logging

import pytest

from monitor.store.fullness import EPISODES_TOLD, DiskFull


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "loopwatch.store"]


def test_a_second_full_disk_after_room_is_told_again(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="loopwatch.store")
    disk = DiskFull(max_pending=100)
    disk.failed("No space left on device")
    disk.failed("No space left on device")  # a retry of the same episode: not told again
    disk.resumed(dropped=0)
    disk.failed("No space left on device")
    disk.resumed(dropped=7)
    said = _messages(caplog)
    assert [m.split(" (")[0].split(" after ")[0] for m in said] == [
        "the disk holding the database is full",
        "the database is being written again",
        "the disk holding the database is full again",
        "the database is being written again",
    ]
    assert said[1].endswith("0 rows lost this run") and said[3].endswith("7 rows lost this run")
    assert disk.stated == 7


def test_a_disk_that_keeps_filling_is_told_a_bounded_number_of_times(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="loopwatch.store")
    disk = DiskFull(max_pending=100)
    for episode in range(EPISODES_TOLD + 5):
        disk.failed("No space left on device")
        disk.resumed(dropped=episode)
    said = _messages(caplog)
    assert len(said) == 2 * EPISODES_TOLD + 1
    assert "later full-disk episodes are not told one by one" in said[-1]
    assert disk.stated == EPISODES_TOLD - 1  # the store's closing word gives the run's losses
