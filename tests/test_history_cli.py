"""``loopwatch history``, ``show`` and ``scan --db`` end to end: sessions are
recorded the way the live hub records them (engine → store), then the real CLI
runs as a subprocess against the database file."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from monitor.commands import common, history
from monitor.config import load_config
from monitor.detect.engine import Engine
from monitor.formats.lines import LineDecoder
from monitor.scan import read_events
from monitor.store import Store

ROOT = Path(__file__).resolve().parent.parent
HOUR = 3600.0


def write_log(path: Path, session: str, agent: str, start: float, repeats: int, varied: int = 0) -> Path:
    """A native log: ``repeats`` identical ``ls`` calls with the same (empty)
    result, then ``varied`` calls that each do something new."""
    records = [{"type": "session_start", "session": session, "agent": agent, "ts": start}]
    ts = start
    for i in range(repeats + varied):
        ts += 1
        cmd = "ls" if i < repeats else f"cat file{i}.py"
        records.append(
            {
                "type": "tool_call",
                "session": session,
                "id": f"c{i}",
                "name": "bash",
                "args": {"cmd": cmd},
                "ts": ts,
            }
        )
        records.append(
            {
                "type": "tool_result",
                "session": session,
                "id": f"c{i}",
                "content": "" if i < repeats else f"contents {i}",
                "ts": ts + 0.5,
            }
        )
    records.append({"type": "session_end", "session": session, "ts": ts + 1})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def record(db: Path, logs: list[Path], preset: str = "balanced") -> Store:
    """Run logs through the engine into the store as the hub does; the store is
    returned started (for adding actions) — close it."""
    engine = Engine(load_config(None, preset=preset))
    store = Store(db)
    store.start()
    for log in logs:
        decoder = LineDecoder(str(log))
        for event in read_events(str(log), decoder):
            detections = engine.process(event).detections
            store.add_events([event])
            store.add_detections(detections)
    for session, state in engine.sessions.items():
        escalation = engine.policy.state(session)
        store.upsert_session(
            {
                "id": session,
                "agent": state.agent,
                "source": state.source,
                "kind": "file",
                "status": "ended",
                "level": escalation.level,
                "detector": escalation.detector,
                "reason": escalation.reason,
            }
        )
    store.flush()
    return store


def loopwatch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """Three recorded sessions: a loop (two days ago), an honest one (now), and
    one with exactly two repeats (below balanced's threshold, above aggressive's)."""
    tmp = tmp_path_factory.mktemp("history")
    now = time.time()
    logs = [
        write_log(tmp / "looping.jsonl", "loop-7f3a", "claude-code", now - 48 * HOUR, repeats=6),
        write_log(tmp / "honest.jsonl", "honest-1b2c", "codex", now - 60, repeats=1, varied=5),
        write_log(tmp / "twice.jsonl", "twice-9d8e", "codex", now - 2 * HOUR, repeats=2, varied=2),
    ]
    db = tmp / "loopwatch.db"
    store = record(db, logs)
    action = store.begin_action("inject", "loop-7f3a", "try another approach", "alice")
    store.finish_action(action, "delivered", "inbox")
    kill = store.begin_action("kill", "loop-7f3a", None, "alice")
    store.finish_action(kill, "refused", "no pid known")
    store.close()
    return {"db": db, "logs": logs, "dir": tmp}


def test_history_lists_sessions_newest_first_with_filters(recorded):
    """The table lists every session, newest first; --agent, --since and --level filter."""
    db = str(recorded["db"])
    out = loopwatch("history", "--db", db)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["LAST", "SEEN", "SESSION", "AGENT"]
    order = [next(s for s in ("honest-1b2c", "twice-9d8e", "loop-7f3a") if s in line) for line in lines[1:]]
    assert order == ["honest-1b2c", "twice-9d8e", "loop-7f3a"]
    loop_line = lines[3]
    assert "claude-code" in loop_line and "file" in loop_line and "ended" in loop_line

    assert "loop-7f3a" not in loopwatch("history", "--db", db, "--agent", "codex").stdout
    recent = loopwatch("history", "--db", db, "--since", "1d").stdout
    assert "loop-7f3a" not in recent and "honest-1b2c" in recent
    warned = loopwatch("history", "--db", db, "--level", "warn", "--json")
    rows = [json.loads(line) for line in warned.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["loop-7f3a"]
    assert rows[0]["peak_rank"] >= 2 and rows[0]["events"] == 14


def test_history_agent_filter_takes_part_of_the_name_in_any_case(recorded):
    db = str(recorded["db"])
    out = loopwatch("history", "--db", db, "--agent", "CLAUDE").stdout
    assert "loop-7f3a" in out and "honest-1b2c" not in out


def test_history_shows_the_final_level_beside_the_peak(recorded):
    """A session that calmed down after its peak lists both: LEVEL is where it ended."""
    out = loopwatch("history", "--db", str(recorded["db"])).stdout.splitlines()
    header = out[0].split()
    assert header[header.index("LEVEL") + 1] == "PEAK"
    loop = next(line for line in out if "loop-7f3a" in line)
    row = json.loads(loopwatch("history", "--db", str(recorded["db"]), "--json", "--agent", "claude").stdout)
    assert f"{row['level'] or 'watching'}  " in loop and row["peak"] in loop


def test_history_reports_bad_options_and_a_missing_database(recorded, tmp_path):
    """Unusable input exits 2 with a message that says what is wrong."""
    missing = loopwatch("history", "--db", str(tmp_path / "nope.db"))
    assert missing.returncode == 2 and "no loopwatch database" in missing.stderr
    assert not (tmp_path / "nope.db").exists()
    bad = loopwatch("history", "--db", str(recorded["db"]), "--since", "yesterday-ish")
    assert bad.returncode == 2 and "--since" in bad.stderr
    bad = loopwatch("history", "--db", str(recorded["db"]), "--level", "loud")
    assert bad.returncode == 2 and "--level" in bad.stderr


def test_show_prints_summary_detections_and_actions(recorded):
    """`show` with a short id prefix prints the session, where each detection
    pointed, and the operator actions with who did them and how they ended."""
    out = loopwatch("show", "loop-7f", "--db", str(recorded["db"]), "--events", "3")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("session loop-7f3a")
    assert "claude-code" in text and "events     14" in text
    assert "exact_repeat" in text and f"{recorded['logs'][0]}:" in text
    assert "inject" in text and "by alice" in text and "delivered — inbox" in text
    assert "refused — no pid known" in text
    assert "last 3 event(s)" in text and "session end" in text

    doc = json.loads(loopwatch("show", "loop-7f3a", "--db", str(recorded["db"]), "--json").stdout)
    assert doc["session"]["id"] == "loop-7f3a" and doc["events_stored"] == 14
    assert [a["outcome"] for a in doc["actions"]] == ["delivered", "refused"]
    assert doc["detections"] and all(d["evidence"] for d in doc["detections"])


def test_show_unknown_or_ambiguous_session_exits_2(recorded):
    """A session that is not stored, or a prefix matching several, is a usage error."""
    out = loopwatch("show", "nothing-like-it", "--db", str(recorded["db"]))
    assert out.returncode == 2 and "no stored session" in out.stderr


def test_scan_db_replays_stored_sessions_exactly(recorded):
    """Re-scanning the stored events finds the same detections (same file:line)
    as scanning the original logs with the same preset."""
    from_files = loopwatch("scan", "--json", "--detections", *map(str, recorded["logs"]))
    from_db = loopwatch("scan", "--json", "--detections", "--db", str(recorded["db"]))
    assert from_files.returncode == from_db.returncode == 1
    key = lambda d: (d["session"], d["file"], d["line"], d["detector"], d["level"])  # noqa: E731
    files = sorted(key(json.loads(line)) for line in from_files.stdout.splitlines())
    stored = sorted(key(json.loads(line)) for line in from_db.stdout.splitlines())
    assert files and stored == files


def test_scan_db_what_if_with_another_preset(recorded):
    """--preset aggressive on the stored history flags the two-repeat session that
    balanced let pass, and says which sessions would end at another level."""
    same = loopwatch("scan", "--db", str(recorded["db"]), "--session", "twice")
    assert same.returncode == 0, same.stderr
    assert "no session ends at another level" in same.stdout
    assert "scanned 1 stored session(s)" in same.stdout

    what_if = loopwatch(
        "scan", "--db", str(recorded["db"]), "--session", "twice-9d8e", "--preset", "aggressive"
    )
    assert what_if.returncode == 1
    assert "twice-9d8e" in what_if.stdout and "exact_repeat" in what_if.stdout
    assert "what-if (preset aggressive): 1 of 1 session(s)" in what_if.stdout
    changed = what_if.stdout.splitlines()[-1].split()
    assert changed[:3] == ["twice-9d8e", "watching", "warn"]


def test_scan_db_usage_errors(recorded, tmp_path):
    """--db with PATHs, --session without --db, or an unknown session exit 2."""
    both = loopwatch("scan", "--db", str(recorded["db"]), str(recorded["logs"][0]))
    assert both.returncode == 2 and "not both" in both.stderr
    alone = loopwatch("scan", "--session", "x", str(recorded["logs"][0]))
    assert alone.returncode == 2 and "--session needs --db" in alone.stderr
    unknown = loopwatch("scan", "--db", str(recorded["db"]), "--session", "zzz")
    assert unknown.returncode == 2 and "no stored session" in unknown.stderr


def _history_args(db: Path, tui: bool) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    history.configure(parser)
    return parser.parse_args(
        ["--db", str(db), "--level", "warn", "--limit", "5"] + (["--tui"] if tui else [])
    )


def test_history_tui_delegates_to_the_ui_only_when_asked(recorded, monkeypatch, capsys):
    """--tui hands the open store, the config and the filters to
    monitor.ui.app.run_history; when the UI is not there it fails with a clear
    message instead of a traceback."""
    calls = []
    fake = types.ModuleType("monitor.ui.app")
    fake.validate_ui = lambda config, theme=None: None
    fake.run_history = lambda config, store, **filters: calls.append((store.path, filters)) or 0
    monkeypatch.setitem(sys.modules, "monitor.ui.app", fake)
    # pytest's stdin is no terminal: the real check refuses (tests/test_cli_robustness.py).
    monkeypatch.setattr(common, "terminal_problem", lambda instead: None)
    assert history.run(_history_args(recorded["db"], tui=True)) == 0
    assert calls == [
        (
            recorded["db"],
            {"theme": None, "agent": None, "since": None, "level": "warn", "text": None, "limit": 5},
        )
    ]

    monkeypatch.setitem(sys.modules, "monitor.ui.app", None)  # import fails
    assert history.run(_history_args(recorded["db"], tui=True)) == 2
    assert "the terminal UI is not available" in capsys.readouterr().err


def test_time_ordered_replay_matches_the_per_session_merge(recorded, monkeypatch):
    """Over many sessions `scan --db` switches to one stream ordered by event time;
    it finds exactly what merging the per-session streams finds."""
    from monitor import scan as scan_module

    def detections(merge_sessions: int) -> list[tuple]:
        monkeypatch.setattr(scan_module, "MERGE_SESSIONS", merge_sessions)
        store = Store(recorded["db"])
        try:
            report = scan_module.scan_store(store, config=load_config(None))
        finally:
            store.close()
        assert report.events == 38
        return [(d.session, d.line, d.detector, d.level) for d in report.detections]

    merged = detections(50)
    assert merged and detections(0) == merged
