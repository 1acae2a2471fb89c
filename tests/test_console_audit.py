"""Points of issue 33's audit (docs: /work/notes/audit33.md) that no test held:
the history's keys and agent filter in the TUI, and names cut with an ellipsis in
the headless demo's summary.

Real parts: a real SQLite store and the real app in history mode, driven by Pilot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.commands.common import shorten
from tests.scripted import history_app, settle


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])
async def test_history_end_and_home_move_the_cursor_and_never_scroll_sideways(tmp_path: Path, size):
    app = await history_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        table.focus()
        await pilot.press("end")
        await pilot.pause()
        assert (table.cursor_row, table.scroll_x) == (table.row_count - 1, 0)
        await pilot.press("home")
        await pilot.pause()
        assert (table.cursor_row, table.scroll_x) == (0, 0)
        labels = [str(column.label) for column in table.columns.values()]
        assert "Final" in labels and "Peak" in labels  # the final level beside the peak
        assert len(labels) >= 6


async def test_the_history_agent_filter_takes_part_of_the_name_in_any_case(tmp_path: Path):
    app = await history_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        app.screen.query_one("#agent").value = "ODE"  # claude-code and codex
        await pilot.pause()
        assert sorted(str(key.value) for key in table.rows) == ["claude-7f3a", "codex-run-12", "codex-run-9"]


def test_the_headless_summary_cuts_names_with_an_ellipsis():
    assert shorten("demo-a-very-long-session-name", 20) == "demo-a-very-long-se…"
    assert shorten("short", 20) == "short"


def test_scan_json_prints_episodes_and_detections_behind_a_flag(tmp_path: Path):
    import json
    import subprocess
    import sys

    from tests.test_watch_headless import ROOT, env_for, loop_lines

    log = tmp_path / "loop.jsonl"
    log.write_text(loop_lines("s1", 30))

    def scan(*flags: str) -> list[dict]:
        done = subprocess.run(
            [sys.executable, "-m", "monitor", "scan", "--json", *flags, str(log)],
            cwd=ROOT, env=env_for(tmp_path), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return [json.loads(line) for line in done.stdout.splitlines()]

    (episode,) = scan()
    assert episode["episode"] == 1 and episode["count"] == 30 and len(episode["detectors"]) >= 2
    detections = scan("--detections")
    assert len(detections) == episode["detections"] > 30
