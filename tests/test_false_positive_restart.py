"""A false positive survives a restart (issue 33): the operator marks a loop
episode a false positive, the watcher stops, a new one starts on the same
database and log; the same loop going on is not flagged again, a different
loop in the same session still is, and nothing is stored twice.

Real parts: the real :class:`~monitor.hub.live.LiveMonitor` (file source, hub,
SQLite store) over a real tailed log, run several times on one database file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.events import Level
from monitor.hub.live import LiveMonitor
from monitor.sources.paths import StartPolicy
from tests.restartkit import caught_up, open_detail, restarted_app
from tests.test_restart import counts, run_once
from tests.test_watch_headless import loop_lines

pytestmark = pytest.mark.usefixtures("utc")


def other_loop(session: str, n: int, start: int) -> str:
    """A different loop: another command failing another way."""
    out = []
    for i in range(start, start + n):
        call = {"type": "tool_call", "session": session, "id": f"o{i}", "name": "bash"}
        out.append(json.dumps({**call, "args": {"cmd": "cat /etc/missing.conf"}}))
        out.append(
            json.dumps(
                {
                    "type": "tool_result",
                    "session": session,
                    "id": f"o{i}",
                    "content": "cat: /etc/missing.conf: No such file or directory",
                    "is_error": True,
                }
            )
        )
    return "\n".join(out) + "\n"


def table_counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {
            table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("sessions", "events", "detections", "episodes", "episode_rungs", "actions")
        }


def stored_episodes(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT number, detectors, pairs, state, closed FROM episodes ORDER BY number"
        ).fetchall()


async def mark_false_positive(log: Path, db: Path) -> list[list[str]]:
    """A watcher that reads the log, the operator marks its loop a false positive, it stops;
    the episode's pairs (what was marked)."""
    live = LiveMonitor(
        Config(), paths=[str(log)], start_policy=StartPolicy(mode="recent"), db=str(db), use_socket=False
    )
    async with live.running() as hub:
        assert live.files is not None
        deadline = time.monotonic() + 20
        while hub.events_total < 12:  # polled, with a deadline: the lanes hand events on
            assert time.monotonic() < deadline, "the log was not read"
            await live.files.sync()
            await asyncio.sleep(0.01)
        await hub.join()
        info = hub.session("s1")
        assert info is not None and info.level >= Level.WARN
        done = await hub.act("false_positive", "s1")
        assert done.outcome == "delivered", done
        assert hub.session("s1").level is Level.NONE
        pairs = [list(p) for p in hub.engine.books["s1"].find(1).pairs]
    return pairs


async def test_a_false_positive_is_kept_across_a_restart(tmp_path: Path):
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 6))
    db = tmp_path / "x.db"
    pairs = await mark_false_positive(log, db)
    assert len(pairs) >= 2  # several detectors saw the loop: all of them are marked
    before = table_counts(db)

    # Restarted, with nothing new: nothing is stored again, and the session is not flagged.
    again = await run_once([log], db)
    assert again.hub is not None and again.hub.events_total == 0
    assert table_counts(db) == before
    assert again.hub.session("s1").level is Level.NONE

    # The same loop goes on in the tailed log: no new detection, no new episode.
    with log.open("a") as out:
        out.write(loop_lines("s1", 6, start=6))
    live = await run_once([log], db)
    assert live.hub is not None and live.hub.events_total == 12
    info = live.hub.session("s1")
    assert info is not None and info.level is Level.NONE, info.reason
    after = table_counts(db)
    assert after == {**before, "events": before["events"] + 12}, (before, after)
    episodes = stored_episodes(db)
    assert [e[3:] for e in episodes] == [("closed", "false positive")]
    # The restarted hub says which patterns are false positives, and since when.
    marked = {(d, p) for d, p, _since in info.false_positives}
    assert marked == {tuple(p) for p in pairs}
    assert all(since > 0 for _d, _p, since in info.false_positives)

    # A different loop in the same session is still detected, once.
    with log.open("a") as out:
        out.write(other_loop("s1", 6, start=100))
    live = await run_once([log], db)
    info = live.hub.session("s1")
    assert info is not None and info.level >= Level.WARN
    episodes = stored_episodes(db)
    assert len(episodes) == 2, episodes
    assert not {tuple(p) for p in json.loads(episodes[1][2])} & {tuple(p) for p in pairs}
    events, distinct, detections, distinct_d = counts(db)
    assert events == distinct == 36 and detections == distinct_d
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM actions").fetchone()[0] == 1


def test_migration_v9_names_the_patterns_of_false_positives_recorded_before(tmp_path: Path):
    """A v8 database's false positives named the detector only: opening it fills in the
    pairs of the episode it closed, else the pattern of that detector's latest detection."""
    from sqlite_utils import Database

    from monitor.store import Store
    from monitor.store.schema import latest_version, migrate

    db = tmp_path / "old.db"
    old = Database(db)
    migrate(old, upto=8)
    pairs = '[["exact_repeat", "call:bash:x"], ["limits", "limit:failures"]]'
    old.execute(
        "INSERT INTO episodes (session, number, run_key, detector, detectors, detections, level, level_rank, "
        "peak, peak_rank, first_ts, last_ts, state, closed, pairs) VALUES ('s1', 1, '1:1', 'exact_repeat', "
        "'[\"exact_repeat\", \"limits\"]', 4, 'warn', 2, 'warn', 2, 10.0, 20.0, 'closed', 'false positive', ?)",
        [pairs],
    )
    old.execute(
        "INSERT INTO detections (session, ts, detector, level, level_rank, pattern) "
        "VALUES ('s2', 5.0, 'monologue', 'warn', 2, 'turns:plan')"
    )
    for session, detail, outcome in (
        ("s1", "exact_repeat (and limits, which saw the same loop) no longer flags this", "delivered"),
        ("s2", "monologue no longer flags this in this session: …", "delivered"),
        ("s3", "no detection to mark as a false positive", "failed"),
    ):
        old.execute(
            "INSERT INTO actions (session, kind, ts, who, outcome, detail) VALUES (?, 'false_positive', "
            "100.0, 'me', ?, ?)",
            [session, outcome, detail],
        )
    old.conn.commit()
    old.close()
    with Store(db) as store:
        assert store.false_positives("s1")["s1"] == [
            {"detector": "exact_repeat", "pattern": "call:bash:x", "since": 100.0, "action": 1},
            {"detector": "limits", "pattern": "limit:failures", "since": 100.0, "action": 1},
        ]
        assert store.false_positives() == {
            "s1": store.false_positives("s1")["s1"],
            "s2": [{"detector": "monologue", "pattern": "turns:plan", "since": 100.0, "action": 2}],
        }
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == latest_version() >= 9
        assert conn.execute("SELECT pairs FROM actions WHERE session = 's3'").fetchone() == (None,)


def _plain(renderable) -> str:
    return "\n".join(getattr(r, "plain", str(r)) for r in getattr(renderable, "renderables", [renderable]))


async def test_the_restarted_console_says_the_patterns_are_false_positives(tmp_path: Path):
    """The real app on a restarted watcher, driven by Pilot: the same loop going on
    is not flagged, the Escalation panel and the detail view say since when it is muted."""
    from monitor.ui.screens.detail import SessionDetailScreen
    from monitor.ui.widgets.dashboard.escalation_view import EscalationView
    from monitor.ui.widgets.detail.actions_list import ActionsList

    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 6))
    db = tmp_path / "x.db"
    pairs = await mark_false_positive(log, db)
    with log.open("a") as out:
        out.write(loop_lines("s1", 6, start=6))
    app = restarted_app([log], db)
    async with app.run_test(size=(160, 48)) as pilot:
        await caught_up(app, pilot, events=12)
        info = app.feed.sessions["s1"]
        assert info.level is Level.NONE, info.reason
        panel = _plain(app.screen.query_one(EscalationView).render())
        assert "False+  exact_repeat" in panel and "marked a false positive since" in panel, panel
        assert "WATCHING" in panel.upper()
        await open_detail(app, pilot, "s1")
        assert isinstance(app.screen, SessionDetailScreen)
        actions = app.screen.query_one(ActionsList)
        assert {(d, p) for d, p, _ in actions.false_positives} == {tuple(p) for p in pairs}
        shown = _plain(actions.content)
        assert shown.count("muted as a false positive") == len(pairs), shown
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 1


async def test_show_lists_the_false_positives(tmp_path: Path):
    import subprocess
    import sys

    from tests.test_watch_headless import ROOT, env_for

    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 6))
    db = tmp_path / "x.db"
    pairs = await mark_false_positive(log, db)
    env = env_for(tmp_path)
    shown = subprocess.run(
        [sys.executable, "-m", "monitor", "show", "s1", "--db", str(db)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"false positives ({len(pairs)}: patterns no longer flagged in this session)" in shown.stdout
    for detector, pattern in pairs:
        assert any(detector in line and pattern[:60] in line for line in shown.stdout.splitlines())
    as_json = subprocess.run(
        [sys.executable, "-m", "monitor", "show", "s1", "--db", str(db), "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    marks = json.loads(as_json.stdout)["false_positives"]
    assert [[m["detector"], m["pattern"]] for m in marks] == pairs
