"""What a person reads on the screens (issue 15, items 14-16): nothing that
matters is cut off at 80x24, labels never run into values, counts are
pluralised, and paths keep their file name.  Real hub and store, driven by
the scripted demo (``tests.scripted``), read through Textual's Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Footer
from textual.widgets.data_table import ColumnKey

from monitor.config import Config
from monitor.detect.base import Detection
from monitor.detect.episodes import EpisodeBook
from monitor.events import Level
from monitor.ui.app import LoopwatchApp
from monitor.ui.render import fit_words, plural, short_path
from monitor.ui.widgets.dashboard.columns import REASON_WANT, layout
from monitor.ui.widgets.dashboard.counts import CountsBar
from monitor.ui.widgets.dashboard.detections_feed import episode_line
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from tests.scripted import T0, ScriptedSession, frozen_clock, scripted_hub, settle

pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def live_app(tmp_path: Path) -> LoopwatchApp:
    config = Config()
    return LoopwatchApp(
        config, clock=frozen_clock(), hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite")
    )


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


DEMO_TMP = "/tmp/loopwatch-demo-abc123xy/agents"


async def add_demo_like_sessions(app: LoopwatchApp, pilot) -> None:
    """Sessions named as `make demo` names them: "demo-poll_progress" is
    longer than the Agent column's old fixed width, and every source shares
    the demo's temporary directory."""
    for name in ("poll_progress", "exact_repeat"):
        script = ScriptedSession(name, f"demo-{name}", T0 + 50, f"{DEMO_TMP}/{name}.jsonl")
        script.call("bash", {"command": "make status"}, "building")
        await app.hub.submit(script.events)
    await app.hub.join()
    await settle(pilot)


def drawn_width(table: SessionsTable) -> int:
    return sum(column.get_render_width(table) for column in table.columns.values())


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])
async def test_columns_are_sized_from_their_content_within_the_terminal(tmp_path, size):
    """Agent, Session and Source are as wide as what they hold: no agent or
    session name is cut while another column has room, Source shows each
    file's name (not the demo's directory on every row), and the table never
    overflows the terminal.  At 80 columns Detector and Reason stay."""
    app = live_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await add_demo_like_sessions(app, pilot)
        table = app.screen.query_one(SessionsTable)
        labels = {column.key.value for column in table.columns.values()}
        assert {"level", "session", "detector", "reason"} <= labels, labels
        assert drawn_width(table) <= size[0]
        widths = {column.key.value: column.width for column in table.columns.values()}
        for row_key in table.rows:
            info = app.feed.sessions[row_key.value]
            assert str(table.get_cell(row_key, "session")) == info.id
            if "agent" in labels:  # the scripted markup agent is over the ceiling: cut
                agent = str(table.get_cell(row_key, "agent"))
                assert agent == info.agent or (len(info.agent) > widths["agent"] and agent.endswith("…"))
            if "source" in labels:
                source, name = str(table.get_cell(row_key, "source")), Path(info.source).name
                assert source.endswith(".jsonl") and "loopwatch-demo" not in source, source
                assert name in source or len(name) > widths["source"], (source, widths["source"])
        if size[0] >= 160:
            assert {"agent", "source"} <= labels
            assert table.columns[ColumnKey("reason")].width >= REASON_WANT


async def test_a_longer_name_widens_its_column(tmp_path):
    """A session whose id is longer than any before widens the Session
    column (the table is laid out again), up to the column's ceiling."""
    app = live_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        before = table.columns[ColumnKey("session")].width
        rebuilds = table.rebuilds
        await add_demo_like_sessions(app, pilot)
        assert table.columns[ColumnKey("session")].width == len("poll_progress") > before
        assert table.rebuilds == rebuilds + 1  # one new layout for the batch, not one per row
        assert drawn_width(table) <= 160


def test_layout_gives_way_in_order():
    """The pure layout: at every width the columns fit; Reason gets what is
    left; Source gives way down to its file names before anything is dropped;
    Agent is never cut (dropped instead), nor Session and Detector while a
    column can still be dropped."""
    natural = {"agent": 18, "session": 13, "status": 4, "source": 28, "source_name": 21}
    for width in range(60, 260, 7):
        columns = dict((key, w) for key, _, w in layout(width, natural))
        assert sum(w + 2 for w in columns.values()) + 4 <= max(width, 60 + 4), width
        assert {"level", "session", "detector", "reason"} <= set(columns)
        assert columns.get("agent", 18) == 18
        if width >= 80:
            assert columns["session"] == 13 and columns["detector"] == 17, (width, columns)
    wide = dict((key, w) for key, _, w in layout(160, natural))
    assert wide["source"] == 21 and wide["reason"] >= REASON_WANT
    assert dict((key, w) for key, _, w in layout(220, natural))["source"] == 28


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
    """ "limitsapproaching the fai…": the detector and its message are apart."""
    detection = Detection(
        detector="limits",
        level=Level.NOTICE,
        score=0.8,
        message="approaching the failure limit: 4 failed calls (limit 5)",
        pattern="failures",
        session="s1",
        ts=0.0,
        seq=3,
    )
    (change,) = EpisodeBook("s1").observe([detection])
    assert "limits ×0: approaching the failure limit" in episode_line(change).plain


def test_the_detail_header_says_nothing_of_a_channel_the_session_lacks():
    """A tailed transcript has no control channel: no `via none` in its header."""
    from monitor.events import Level
    from monitor.ui.screens.detail import header_text

    base = {"id": "s", "level": Level.NONE, "agent": "claude-code", "status": "live", "events": 3}
    assert "via" not in header_text({**base, "channel": "none"}, read_only=False).plain
    assert "via inbox" in header_text({**base, "channel": "inbox"}, read_only=False).plain


def test_the_escalation_panel_never_promises_a_step_down_or_a_future_to_an_ended_session():
    from types import SimpleNamespace

    from monitor.events import Level
    from monitor.ui.widgets.dashboard.escalation_view import EscalationFacts, escalation_lines

    ladder = (Level.NOTICE, Level.WARN, Level.CRITICAL, Level.CRITICAL, Level.TERMINATE)
    info = SimpleNamespace(
        level=Level.TERMINATE,
        detector="exact_repeat",
        last_detection=None,
        reason="",
        muted=(),
        status="live",
    )
    facts = EscalationFacts(ladder=ladder, occurrences=2, keys={"ack": "a", "inject": "i", "kill": "K"})
    text = "\n".join(line.plain for line in escalation_lines(info, facts, 0.0))
    assert (
        "next repeat stays at ✖ terminate" in text
        and "critical (rung" not in text
        and "a acknowledge" in text
    )
    ended = "\n".join(
        line.plain
        for line in escalation_lines(SimpleNamespace(**{**vars(info), "status": "ended"}), facts, 0.0)
    )
    assert (
        "nothing: the session has ended" in ended
        and "next repeat" not in ended
        and "acknowledge" not in ended
    )


async def test_the_palette_screenshot_falls_back_to_the_current_directory(tmp_path, monkeypatch):
    """No ~/Downloads: the screenshot is written to the current directory, and a toast says where."""
    from monitor.config import Config
    from monitor.ui.app import LoopwatchApp
    from tests.scripted import frozen_clock, scripted_hub

    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DOWNLOAD_DIR", str(home / "Downloads"))
    monkeypatch.chdir(work)
    config = Config()
    app = LoopwatchApp(
        config, clock=frozen_clock(), hub_factory=lambda: scripted_hub(config, db=tmp_path / "db")
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.deliver_screenshot(filename="shot.svg")
        shot = work / "shot.svg"
        deadline = 600  # polls of 0.05 s: a hang guard, not a timing
        # the driver writes the file from a thread: wait for the whole document, not the name
        while not (shot.exists() and shot.read_text().rstrip().endswith("</svg>")) and deadline:
            await pilot.pause(0.05)
            deadline -= 1
        assert shot.read_text().startswith("<svg")
        assert not (home / "Downloads").exists()


async def test_at_80x24_the_kill_and_inject_dialogs_keep_their_buttons_and_own_footer(tmp_path, utc):
    """A verified kill explains itself in many lines: they scroll, the buttons stay inside the dialog,
    and the footer shows the dialog's keys, not the dashboard's behind it."""
    import subprocess
    import sys
    import time

    from textual.widgets import Button, Footer

    from tests.test_ui_actions import looping_session, make_app
    from tests.test_ui_actions import settle as settle_actions

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        log = tmp_path / "logs" / "looper.jsonl"
        log.parent.mkdir(parents=True)
        log.touch()
        app = make_app(tmp_path, looping_session("looper", log, pid=sleeper.pid, start=time.time()))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle_actions(pilot)
            for key, first in (("K", "Kill  y"), ("i", "Send  ctrl+s")):
                await pilot.press(key)
                await settle_actions(pilot)
                dialog = app.screen.query_one("#dialog").region
                buttons = list(app.screen.query(Button))
                assert str(buttons[0].label) == first
                assert all(dialog.contains_region(b.region) for b in buttons), (
                    dialog,
                    [b.region for b in buttons],
                )
                assert app.screen.query_one(Footer).region.y == 23  # the dialog's own, at the bottom
                await pilot.press("escape")
                await settle_actions(pilot)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_copied_event_says_its_time_to_the_second(utc):
    """The steps of a loop are seconds apart: the event's header (view and clipboard) keeps the seconds."""
    from monitor.ui.event_text import event_plain

    text = event_plain({"seq": 4, "type": "tool_result", "tool": "bash", "ts": 1767258007.0})
    assert text.splitlines()[0] == "#4  tool_result  bash  2026-01-01 09:00:07"


@pytest.mark.parametrize("width", [80, 100, 120, 160, 200])
def test_the_history_columns_fit_the_width_and_keep_what_tells_most(width):
    from monitor.ui.widgets.history.columns import EDGE, PAD, history_layout

    columns = history_layout(width)
    keys = [key for key, _, _ in columns]
    assert sum(w + PAD for _, _, w in columns) + EDGE <= width
    assert {"agent", "session", "level", "peak", "events"} <= set(keys)
    if width >= 160:
        assert "source" in keys and dict((k, w) for k, _, w in columns)["agent"] >= 18


async def test_the_history_table_fits_80_and_160_columns(tmp_path, utc):
    """At 160 nothing is cut at the edge; at 80 six columns remain; a resize keeps the selection."""
    from monitor.store import Store
    from tests.scripted import frozen_clock, scripted_hub

    db = tmp_path / "db.sqlite"
    async with scripted_hub(Config(), db=db):
        pass
    app = LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#history-table")
        assert table.virtual_size.width <= table.size.width
        await pilot.press("j", "j")
        chosen = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert len(table.columns) == 6 and table.virtual_size.width <= table.size.width
        assert table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value == chosen


def test_a_narrow_feed_line_keeps_who_and_what_over_the_level_word():
    from monitor.events import Level

    detection = Detection(
        detector="exact_repeat",
        level=Level.WARN,
        score=0.8,
        message="bash called 3 times",
        pattern="call:bash",
        count=3,
        session="claude-7f3a",
        ts=0.0,
        seq=6,
    )
    (change,) = EpisodeBook("claude-7f3a").observe([detection])
    assert "▲ warn" in episode_line(change).plain
    compact = episode_line(change, compact=True).plain
    assert "warn" not in compact and "▲ claude-7f3a exact_repeat ×3: bash called 3 times" in compact
    tiny = episode_line(change, compact=True, tiny=True).plain
    assert "since" not in tiny and "▲ claude-7f3a ×3 exact_repeat: bash called 3 times" in tiny


async def test_every_sorted_column_shows_its_arrow_however_narrow(tmp_path):
    """Status, Events, Last and Similarity are narrow: the label gives way to the arrow, not the reverse."""
    from textual.widgets.data_table import ColumnKey as Key

    app = live_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        for key in ("status", "events", "last", "similarity"):
            table.sort_column, table.sort_reverse = key, False
            table.show_sort_marker()
            width = next(w for k, _, w in table._columns if k == key)
            label = table.columns[Key(key)].label.plain
            assert label.endswith(" ▼") and len(label) <= width, (key, label, width)
