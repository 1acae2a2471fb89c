"""The collector's threshold raised by overlapping holders and put back as it was."""

from __future__ import annotations

import gc

from monitor import collector


def test_overlapping_holds_take_the_largest_and_restore_the_original():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, *before[1:])
        collector.hold(10_000)  # a hub
        with collector.rare_collections(50_000):  # a scan inside it
            assert gc.get_threshold()[0] == 50_000
        assert gc.get_threshold()[0] == 10_000
        collector.release(10_000)
        assert gc.get_threshold() == (700, *before[1:])
    finally:
        gc.set_threshold(*before)


def test_a_threshold_changed_meanwhile_is_left_alone():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, *before[1:])
        with collector.rare_collections(10_000):
            gc.set_threshold(123, *before[1:])
        assert gc.get_threshold()[0] == 123
    finally:
        gc.set_threshold(*before)
