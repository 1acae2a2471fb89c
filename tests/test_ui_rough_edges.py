"""What a person reads on the screens (issue 15, items 14-16): nothing that
matters is cut off at 80x24, labels never run into values, counts are
pluralised, and paths keep their file name.  Real hub and store, driven by
the scripted demo (``tests.scripted``), read through Textual's Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Footer

from monitor.config import Config
from monitor.detect.base import Detection
from monitor.events import Level
from monitor.ui.app import LoopwatchApp
from monitor.ui.render import fit_words, plural, short_path
from tests.scripted import frozen_clock, scripted_hub
from monitor.ui.widgets.dashboard.counts import CountsBar
from monitor.ui.widgets.dashboard.detections_feed import DetectionsFeed, detection_line
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable


pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def live_app(tmp_path: Path) -> LoopwatchApp:
    config = Config()
    return LoopwatchApp(config, clock=frozen_clock(),
                        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite"))


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    pilot.app.flush_live()
    await pilot.pause()


def test_plural_and_paths_and_word_fitting():
    """Helpers: 1 event / 2 events; a long path keeps its file name; a line cut
    to fit never ends mid-number."""
    assert plural(1, "event") == "1 event" and plural(2, "event") == "2 events"
    assert plural(1_234, "session") == "1,234 sessions"
    path = "/tmp/loopwatch-demo-abc123xy/agents/exact_repeat.jsonl"
    assert short_path(path, 60) == path
    shown = short_path(path, 24)
    assert len(shown) <= 24 and shown.endswith("exact_repeat.jsonl") and shown.startswith("…")
    tiny = short_path(path, 10)
    assert len(tiny) == 10 and tiny.endswith(".jsonl")
    line = Text("02:41:28 ◆ critical  s1 exact_repeat: bash called 13 times with identical arguments")
    width = line.plain.index("13 times") + 2  # cut at any character: "called 1…"
    cut = fit_words(line, width)
    assert cut.cell_len <= width and cut.plain.endswith("bash called …")


async def test_at_80x24_detector_reason_and_the_quit_and_help_keys_stay(tmp_path):
    """At 80x24 the table keeps Detector and Reason (it drops less urgent
    columns instead) and the footer still shows q and ?."""
    app = live_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        labels = [str(column.label) for column in table.columns.values()]
        assert "Detector" in labels and "Reason" in labels
        assert sum(column.get_render_width(table) for column in table.columns.values()) <= 80
        footer = app.screen.query_one(Footer)
        keys = {key.key_display or key.key: key for key in footer.query("FooterKey")}
        for shown in ("q", "?"):
            assert shown in keys, sorted(keys)
            assert keys[shown].region.right <= 80 and keys[shown].region.width > 0, shown


async def test_source_column_shows_the_file_name_and_agent_is_not_cut(tmp_path):
    """The Source column shows each file's name (not the same directory
    prefix on every row); the Agent column fits agent names like
    `claude-code` and `demo-exact_repeat` next to Session."""
    app = live_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        for row_key in table.rows:
            info = app.feed.sessions[row_key.value]
            source = str(table.get_cell(row_key, "source"))
            assert Path(info.source).name in source, (info.source, source)
            agent = str(table.get_cell(row_key, "agent"))
            assert agent == (info.agent or "-") or len(info.agent) > 16, agent


async def test_labels_never_run_into_values(tmp_path):
    """Header, detail header and feed keep a visible separator between a value
    and the next label ("3 warnings open0.0 events/s", "claude-7f3aagent")."""
    app = live_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        counts = app.screen.query_one(CountsBar)._renderable
        spans = counts.plain
        assert " · " in spans and "open · " in spans and "events/s · " in spans
        assert all(piece.strip() for piece in spans.split(" · ")), spans
        await pilot.press("enter")
        await settle(pilot)
        first = app.screen.query_one("#detail-header")._renderable.plain.splitlines()[0]
        assert " · agent " in first and " · status " in first and " · events " in first


def test_feed_line_separates_detector_from_message():
    """"limitsapproaching the fai…": the detector and its message are apart."""
    detection = Detection(detector="limits", level=Level.NOTICE, score=0.8,
                          message="approaching the failure limit: 4 failed calls (limit 5)",
                          pattern="failures", session="s1", ts=0.0, seq=3)
    assert "limits: approaching the failure limit" in detection_line(detection).plain
