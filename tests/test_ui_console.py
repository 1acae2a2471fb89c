"""The operator's console in the detail view and the dashboard (issue 18):
the full event view, search, vim keys, help per screen, copy, diff of repeats,
sorting and jumping to the sessions that need attention.

Each test runs the real app over a real hub and SQLite store fed with
scripted events at a frozen clock, and drives it with Textual's Pilot.
"""

from __future__ import annotations

import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.ui.app import LoopwatchApp
from monitor.ui.screens.detail import SessionDetailScreen
from monitor.ui.screens.event_view import EventViewScreen
from monitor.ui.screens.help import HelpScreen
from monitor.ui.screens.kill import KillScreen
from monitor.ui.screens.repeat_diff import RepeatDiffScreen, word_diff
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable
from monitor.ui.widgets.dashboard.sorting import next_unvisited, waiting_since
from monitor.ui.widgets.detail.detections_list import DetectionsList
from monitor.ui.widgets.detail.search import SearchBar, next_match
from tests.scripted import HOSTILE, T0, ScriptedSession, frozen_clock, scripted_app, scripted_hub, settle

LONG_RESULT = "\n".join(f"line {n}: " + "x" * 40 for n in range(60)) + "\n" + HOSTILE + "\nTHE END"


pytestmark = pytest.mark.usefixtures("utc")  # local times shown as UTC (tests/conftest.py)


def reader_session() -> list:
    script = ScriptedSession("reader", "test-agent", T0, "/logs/reader.jsonl")
    script.say("I will look at the failing build.")
    script.call(
        "write_file", {"path": "src/app.py", "content": {"nested": [1, 2, {"deep": "yes"}]}}, LONG_RESULT
    )
    for name in ("alpha.py", "beta.py", "gamma.py", "delta.py"):
        script.call("sed", {"command": f"sed -i s/foo/bar/ src/{name}"}, "sed: no input files", error=True)
    script.say("Z" * 9000)  # longer than the store keeps
    return script.events


async def open_detail(pilot, session: str) -> SessionDetailScreen:
    await settle(pilot)
    pilot.app.open_session(session)
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SessionDetailScreen)
    return screen


def body_text(app: LoopwatchApp) -> str:
    return str(app.screen.query_one("#event-body").render())


async def test_enter_shows_the_whole_event_literally_and_steps(tmp_path):
    """enter opens the event in full (args pretty-printed, all lines, markup and escapes
    literal); ←/→ step; escape returns with the cursor on the event shown last."""
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, "reader")
        stream = screen.stream
        stream.cursor = 2  # start, message, then the write_file call
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EventViewScreen)
        text = body_text(app)
        assert '"deep": "yes"' in text and '\n  "path": "src/app.py"' in text  # indented JSON
        await pilot.press("right")
        await pilot.pause()
        text = body_text(app)
        assert "line 0: " in text and "line 59: " in text and "THE END" in text  # all of it
        assert "[bold red]pwned[/]" in text and "␛[31m" in text and "\x1b" not in text
        assert app.screen.record["seq"] == 4
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause()
        assert app.screen.record["seq"] == 2 and "I will look at the failing build." in body_text(app)
        await pilot.press("left", "left")  # at the first event: stays, rings the bell
        await pilot.press("right", "right")
        await pilot.pause()
        assert app.screen.record["seq"] == 3
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and stream.cursor == 2 and stream.has_focus
        await pilot.press("G", "enter")
        await pilot.pause()
        assert "the database keeps the head and tail of these 9,000 characters" in body_text(app)


async def test_event_view_scrolls_with_vim_keys(tmp_path):
    """j/k, G/g and ctrl+d/ctrl+u scroll the event view."""
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(100, 24)) as pilot:
        screen = await open_detail(pilot, "reader")
        screen.stream.cursor = 3
        await pilot.press("enter")
        await pilot.pause()
        scroll = app.screen.query_one("#event-scroll")
        assert scroll.scroll_y == 0
        await pilot.press("j", "j")
        await pilot.pause()
        assert scroll.scroll_y == 2
        await pilot.press("k")
        await pilot.pause()
        assert scroll.scroll_y == 1
        await pilot.press("G")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y > 50
        await pilot.press("ctrl+u")
        await pilot.pause()
        assert scroll.scroll_y < scroll.max_scroll_y
        await pilot.press("g")
        await pilot.pause()
        assert scroll.scroll_y == 0
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert scroll.scroll_y > 0


async def test_search_is_incremental_with_next_previous_and_highlight(tmp_path):
    """/ finds as you type, n/N move between matches (wrapping), matches are highlighted,
    escape clears the search."""
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, "reader")
        stream = screen.stream
        await pilot.press("g")
        await pilot.press("slash", "s", "e", "d")
        await pilot.pause()
        # the four sed calls and their results (the tool name is searched too)
        seqs = [stream.source.row(i).seq for i in screen.search_matches]
        assert seqs == list(range(5, 13))
        assert stream.current.seq == 5  # first match at or after the cursor
        search = screen.query_one(SearchBar)
        search.value = "sed -i s/foo/bar/ src/d"
        await pilot.pause()
        assert [stream.source.row(i).seq for i in screen.search_matches] == [11, 12]
        assert stream.current.seq == 11
        line = stream.line_text(stream.current, 200)
        highlighted = [line.plain[s.start : s.end] for s in line.spans if "reverse" in str(s.style)]
        assert highlighted == ["sed -i s/foo/bar/ src/d"]
        search.value = "sed"
        await pilot.press("enter")
        await pilot.pause()
        assert stream.has_focus and stream.current.seq == 11
        await pilot.press("n")
        assert stream.current.seq == 12
        await pilot.press("n")
        assert stream.current.seq == 5  # wraps
        await pilot.press("N", "N")
        assert stream.current.seq == 11
        assert "search “sed”" in str(screen.query_one("#stream-title").render())
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert stream.search == "" and screen.search_matches == []
        assert "search “" not in str(screen.query_one("#stream-title").render())


def test_next_match_wraps_both_ways():
    assert next_match([2, 5, 9], 5, 1) == 9 and next_match([2, 5, 9], 9, 1) == 2
    assert next_match([2, 5, 9], 5, -1) == 2 and next_match([2, 5, 9], 2, -1) == 9
    assert next_match([2, 5, 9], 5, 1, inclusive=True) == 5 and next_match([], 0, 1) is None


async def test_vim_keys_move_the_stream_and_kill_is_shift_k(tmp_path):
    """j/k/g/G/ctrl+d/ctrl+u move the event cursor; k no longer kills (K does, after asking)."""
    script = ScriptedSession("long", "test-agent", T0, "/logs/long.jsonl")
    for n in range(60):
        script.call("read_file", {"path": f"f{n}.py"}, f"contents {n}")
    app = scripted_app(tmp_path, script.events)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_detail(pilot, "long")
        stream = screen.stream
        last = stream.source.count() - 1
        assert stream.cursor == last
        await pilot.press("k", "k")
        assert stream.cursor == last - 2 and not isinstance(app.screen, KillScreen)
        await pilot.press("j")
        assert stream.cursor == last - 1
        await pilot.press("g")
        assert stream.cursor == 0
        await pilot.press("ctrl+d")
        half = stream.cursor
        assert 5 <= half <= stream.scrollable_content_region.height
        await pilot.press("ctrl+u")
        assert stream.cursor == 0
        await pilot.press("G")
        assert stream.cursor == last
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, KillScreen)


async def test_help_matches_the_screen(tmp_path):
    """? lists the keys of the screen it is opened from (and the app's), nothing else."""
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        ids = {row[1] for row in app.screen.rows}
        assert {"open", "filter", "kill", "quit", "help"} <= ids
        assert not ids & {"search.next", "stream.vim_up", "event.next"}
        await pilot.press("escape")
        await open_detail(pilot, "reader")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen) and app.screen.heading.endswith("a session")
        keys = {row[1]: row[0] for row in app.screen.rows}
        assert {
            "search",
            "search.next",
            "copy",
            "diff",
            "stream.open",
            "stream.vim_up",
            "stream.half_down",
            "kill",
            "quit",
        } <= set(keys)
        assert keys["stream.vim_up"] == "k" and keys["kill"] == "K" and "open" not in keys
        await pilot.press("escape", "enter", "question_mark")
        assert {"event.next", "event.previous", "scroll.down", "copy"} <= {row[1] for row in app.screen.rows}
        assert "kill" not in {row[1] for row in app.screen.rows}


async def test_help_scrolls_with_the_vim_keys_when_it_does_not_fit(tmp_path):
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        dialog = app.screen.query_one("#dialog")
        assert dialog.max_scroll_y > 0  # at 80x24 the dashboard's keys do not fit
        await pilot.press("j", "j")
        assert dialog.scroll_y == 2
        await pilot.press("G")
        assert dialog.scroll_y == dialog.max_scroll_y
        await pilot.press("k")
        assert dialog.scroll_y == dialog.max_scroll_y - 1
        await pilot.press("g")
        assert dialog.scroll_y == 0


async def test_history_detail_help_hides_operator_keys(tmp_path):
    """A past session cannot be acted on: its help does not list the operator keys."""
    db = tmp_path / "db.sqlite"

    async def record() -> None:
        async with scripted_hub(Config(), db=db, events=reader_session()):
            pass

    await record()
    from monitor.store import Store

    app = LoopwatchApp(Config(), store=Store(db), mode="open", session="reader", clock=frozen_clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        ids = {row[1] for row in app.screen.rows}
        assert "search" in ids and "stream.open" in ids and not ids & {"kill", "ack", "inject"}


async def test_copy_event_detection_and_nudge(tmp_path):
    """c copies the event under the cursor, or the focused detection with its evidence;
    y copies the nudge; each time a toast says what was copied."""
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, "reader")
        screen.stream.cursor = 3
        await pilot.press("c")
        assert (
            "line 59: " in app.clipboard
            and HOSTILE.replace("\x1b", "␛").replace("\x07", "␇") in app.clipboard
        )
        assert "Copied event #4" in list(app._notifications)[-1].message
        detections = screen.query_one(DetectionsList)
        detections.focus()
        # One row per loop episode: the four detectors that saw the sed loop joined one.
        assert len(detections.rows) == 1 and "failure_cascade" in detections.rows[0].detectors
        detections.highlighted = 0
        row = detections.rows[0]
        await pilot.press("c")
        copied = app.clipboard
        assert copied.startswith(f"{row.level.label.upper()}  {row.detector}")
        assert (
            f"Evidence ({len(row.evidence)} events):" in copied and "sed -i s/foo/bar/ src/delta.py" in copied
        )
        assert f"{row.detector} detection" in list(app._notifications)[-1].message
        await pilot.press("y")
        assert (
            app.clipboard == row.nudge and f"nudge of {row.detector}" in list(app._notifications)[-1].message
        )


async def test_diff_of_repeats_shows_what_differs(tmp_path):
    """d shows the selected detection's evidence word-diffed: the file that changes is marked."""
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, "reader")
        detections = screen.query_one(DetectionsList)
        assert detections.rows
        detections.focus()
        detections.highlighted = 0  # the sed loop's episode: four files, the same error
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, RepeatDiffScreen)
        body = app.screen.query_one("#diff-body").render()
        plain = str(body)
        assert "(first)" in plain  # the episode's leading detection: its calls, each against the one before
        marked = {plain[s.start : s.end] for s in body.spans if "underline" in str(s.style)}
        struck = {plain[s.start : s.end] for s in body.spans if "strike" in str(s.style)}
        assert any("beta.py" in m or "gamma.py" in m or "delta.py" in m for m in marked)
        assert struck
        await pilot.press("escape")
        assert app.screen is screen


def test_word_diff_marks_inserted_and_removed_words():
    text, added, removed = word_diff("sed -i s/foo/bar/ src/a.py", "sed -i s/foo/bar/ src/b.py now")
    assert (added, removed) == (2, 1)
    assert text.plain == "sed -i s/foo/bar/ src/a.py src/b.py now"


async def test_dashboard_vim_keys_sort_and_attention(tmp_path):
    """j/k/g/G move the sessions table; s cycles the sort column, S reverses, a header
    click sorts by that column; w visits the sessions at warn or above, longest waiting first."""
    app = scripted_app(tmp_path)  # the scripted demo sessions
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(SessionsTable)
        sessions = app.feed.sessions
        attention = [sid for sid in table._order]
        assert sessions[attention[0]].level >= sessions[attention[-1]].level
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("j", "j", "k")
        assert table.cursor_row == 1
        await pilot.press("G")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("s")  # level, then last activity
        await pilot.pause()
        levels = [(-int(sessions[s].level), -sessions[s].last_ts) for s in table._order]
        assert levels == sorted(levels) and str(table.columns[table._columns[0][0]].label) == "Level ▼"
        await pilot.press("s")  # agent A→Z
        await pilot.pause()
        agents = [(sessions[s].agent or "").lower() for s in table._order]
        assert agents == sorted(agents)
        selected = table.selected_session
        await pilot.press("S")
        await pilot.pause()
        assert [(sessions[s].agent or "").lower() for s in table._order] == sorted(agents, reverse=True)
        assert table.selected_session == selected  # the selection follows its session
        assert "Sorted by agent, reversed" in list(app._notifications)[-1].message
        header_x = sum(w + 2 for key, _, w in table._columns[:4]) + 1  # the Events column
        await pilot.click(SessionsTable, offset=(header_x, 0))
        await pilot.pause()
        assert table.sort_column == "events"
        counts = [sessions[s].events for s in table._order]
        assert counts == sorted(counts, reverse=True)
        for _ in range(len(table._columns) - 4):
            await pilot.press("s")
        await pilot.pause()
        assert table.sort_column is None and table._order == attention  # back to attention
        warned = [s for s in sessions.values() if s.level >= Level.WARN]
        assert len(warned) >= 2
        visited = []
        for _ in range(len(warned) + 1):
            await pilot.press("w")
            visited.append(table.selected_session)
        assert set(visited[:-1]) == {s.id for s in warned} and visited[-1] == visited[0]
        first_waiting = min(warned, key=lambda s: (waiting_since(s, app.feed.detections_for(s.id), []), s.id))
        assert visited[0] == first_waiting.id


def test_waiting_since_restarts_after_an_acknowledgement():
    class D:
        def __init__(self, ts, level):
            self.ts, self.level = ts, level

    class Info:
        last_detection = None
        last_ts = 99.0

    detections = [D(10, Level.NOTICE), D(20, Level.WARN), D(30, Level.CRITICAL), D(50, Level.WARN)]
    assert waiting_since(Info(), detections, []) == 20
    assert waiting_since(Info(), detections, [40]) == 50
    assert waiting_since(Info(), detections, [60]) == 99.0
    assert next_unvisited(["a", "b"], "b", set()) == "a" and next_unvisited(["a", "b"], "z", set()) == "a"
    assert next_unvisited([], "a", set()) is None


async def test_history_has_vim_keys(tmp_path):
    """j/k/G/g move the history table too."""
    db = tmp_path / "db.sqlite"
    async with scripted_hub(Config(), db=db):
        pass
    from monitor.store import Store

    app = LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        table.focus()
        await pilot.press("G")
        assert table.cursor_row == table.row_count - 1 > 2
        await pilot.press("k")
        assert table.cursor_row == table.row_count - 2
        await pilot.press("g", "j")
        assert table.cursor_row == 1
        # home/end move the row cursor, not the table sideways
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1 and table.scroll_x == 0
        await pilot.press("home")
        assert table.cursor_row == 0 and table.scroll_x == 0


async def test_history_level_filter_is_set_from_the_keyboard(tmp_path):
    """Tab to the level filter, enter opens it, down + enter chooses: enter is not taken by Open."""
    from textual.widgets import Select

    db = tmp_path / "db.sqlite"
    async with scripted_hub(Config(), db=db):
        pass
    from monitor.store import Store

    app = LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        level = app.screen.query_one("#level", Select)
        level.focus()
        await pilot.press("enter")
        assert level.expanded
        await pilot.press("down", "down", "enter")
        await settle(pilot)
        assert not level.expanded and level.value != Select.BLANK
        status = str(app.screen.query_one("#history-status").render())
        assert "session" in status


async def test_dashboard_home_and_end_move_the_row_cursor(tmp_path):
    events = []
    for n in range(3):
        script = ScriptedSession(f"s{n}", "test-agent", T0 + n, f"/logs/s{n}.jsonl")
        script.say("hello")
        events += script.events
    app = scripted_app(tmp_path, events)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#sessions")
        table.focus()
        assert table.row_count == 3
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0


async def test_export_key_writes_markdown_and_json(tmp_path, monkeypatch):
    """e writes loopwatch-<session>.md and .json (what `show --format` prints) to the current
    directory; the Markdown keeps agent text literal; a symlink at the target is replaced, not followed."""
    import json

    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (out / "loopwatch-reader.md").symlink_to(victim)
    monkeypatch.chdir(out)
    app = scripted_app(tmp_path, reader_session())
    async with app.run_test(size=(120, 40)) as pilot:
        await open_detail(pilot, "reader")
        await pilot.press("e")
        await settle(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("Wrote" in n.message and "loopwatch-reader.md" in n.message for n in app._notifications)
    assert victim.read_text() == "untouched" and not (out / "loopwatch-reader.md").is_symlink()
    markdown = (out / "loopwatch-reader.md").read_text()
    document = json.loads((out / "loopwatch-reader.json").read_text())
    assert markdown.startswith("# loopwatch session `reader`")
    for heading in (
        "## Timeline",
        "## Loop episodes",
        "## Detections",
        "## Nudges sent",
        "Evidence (",
        "Nudge:",
    ):
        assert heading in markdown
    assert "sed -i s/foo/bar/ src/" in markdown
    assert "\x1b" not in markdown
    assert document["session"]["id"] == "reader" and document["events_stored"] == 13
    assert document["episodes"] and document["episodes"][0]["rungs"]
    # The first detection of each rung is kept (not one per repeat), each with its evidence events.
    kept = document["detections"][-1]
    seqs = [e["seq"] for e in kept["evidence_events"]]
    assert len(seqs) >= 3 and seqs == sorted(set(seqs)) and seqs[-1] <= 12


def test_markdown_keeps_agent_text_literal():
    """Backticks cannot close the fence, escapes become pictures, markup in one-line fields is escaped."""
    from monitor.export import fenced, inline

    block = fenced("```\nrm -rf /\n```" + HOSTILE)
    assert (
        block.startswith("````\n") and block.endswith("\n````") and "\x1b" not in block and "␛[31m" in block
    )
    assert inline("[bold]x[/] `y` *z*") == "\\[bold\\]x\\[/\\] \\`y\\` \\*z\\*"


async def test_history_screen_searches_event_text(tmp_path):
    """The history screen's text filter is the same full-text search as `history --search`:
    a word from an event's output (typed partly) finds its session."""
    db = tmp_path / "db.sqlite"
    async with scripted_hub(Config(), db=db, events=reader_session()):
        pass
    from monitor.store import Store

    app = LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        assert table.row_count == 1
        await pilot.press("slash", *"gamm")
        await pilot.pause()
        assert table.row_count == 1
        assert "matching events" in str(app.screen.query_one("#history-status").render())
        await pilot.press(*"xyz")
        await pilot.pause()
        assert table.row_count == 0


async def test_replaying_a_stored_session_shows_progress(tmp_path):
    """Opening a long stored session replays its last events for the sparklines in a
    worker and counts them in the sparklines' title, which returns to normal when done."""
    db = tmp_path / "db.sqlite"
    script = ScriptedSession("long", "agent", T0, "/logs/long.jsonl")
    for n in range(1200):
        script.call("read_file", {"path": f"f{n}.py"}, f"contents {n}")
    async with scripted_hub(Config(), db=db, events=script.events):
        pass
    from monitor.store import Store

    app = LoopwatchApp(Config(), store=Store(db), mode="open", session="long", clock=frozen_clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionDetailScreen)
        assert screen.replay_reports >= 5  # the start, then every 500 events of 2,000
        assert str(screen.query_one("#sparks-title").render()) == "Similarity by detector"
        title = screen.query_one("#sparks-title")
        screen.show_replay_progress(500, 2000)
        assert "replaying 500 of 2,000 events (25%)" in str(title.render())
