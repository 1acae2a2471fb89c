"""``loopwatch show SESSION --format json|markdown`` end to end (the real CLI as a
subprocess against a database recorded the way the hub records it)."""

from __future__ import annotations

import json

from tests.test_history_cli import loopwatch, recorded  # noqa: F401 (fixture)


def test_show_format_markdown_reads_on_its_own(recorded):  # noqa: F811
    """Summary, timeline of detections and actions, each detection's evidence, the nudges sent."""
    out = loopwatch("show", "loop-7f", "--db", str(recorded["db"]), "--format", "markdown")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("# loopwatch session `loop-7f3a`")
    assert "| Agent | claude-code |" in text and "| Events | 14 (14 stored) |" in text
    timeline = text.split("## Timeline")[1].split("## Detections")[0]
    assert "`exact_repeat`" in timeline and "operator **inject** by alice: delivered — inbox" in timeline
    assert "operator **kill** by alice: refused — no pid known" in timeline
    detections = text.split("## Detections")[1].split("## Nudges sent")[0]
    assert "### 1. " in detections and "Evidence (" in detections and '"cmd": "ls"' in detections
    nudges = text.split("## Nudges sent")[1]
    assert "try another approach" in nudges and "**delivered**" in nudges


def test_show_format_json_has_detections_with_their_evidence(recorded):  # noqa: F811
    out = loopwatch("show", "loop-7f3a", "--db", str(recorded["db"]), "--format", "json")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["session"]["id"] == "loop-7f3a" and document["events_stored"] == 14
    assert [a["kind"] for a in document["actions"]] == ["inject", "kill"]
    for detection in document["detections"]:
        seqs = [ref["seq"] for ref in detection["evidence"]]
        assert [e["seq"] for e in detection["evidence_events"]] == seqs


def test_show_export_formats_take_events_and_refuse_json_beside_them(recorded):  # noqa: F811
    """``--events N`` adds the last N events to the export formats; ``--json`` beside one is refused."""
    db = str(recorded["db"])
    out = loopwatch("show", "loop-7f3a", "--db", db, "--format", "markdown", "--events", "3")
    assert out.returncode == 0, out.stderr
    last = out.stdout.split("## Last 3 events")[1]
    assert last.count("```") == 6 and "#14 " in last and "#11 " not in last
    document = json.loads(
        loopwatch("show", "loop-7f3a", "--db", db, "--format", "json", "--events", "2").stdout
    )
    assert [e["seq"] for e in document["events"]] == [13, 14]
    both = loopwatch("show", "loop-7f3a", "--db", db, "--json", "--format", "markdown")
    assert both.returncode == 2 and "choose one" in both.stderr and not both.stdout


def test_history_search_lists_a_capped_number_of_matching_events(recorded):  # noqa: F811
    db = str(recorded["db"])
    every = loopwatch("history", "--db", db, "--search", "contents", "--matches", "0")
    found = every.stdout.split("events matching")[1].strip().splitlines()[1:]
    assert len(found) >= 2, every.stdout
    capped = loopwatch("history", "--db", db, "--search", "contents", "--matches", "1")
    assert len(capped.stdout.split("events matching")[1].strip().splitlines()[1:]) == 1
    assert f"… {len(found) - 1:,} more matching events" in capped.stderr


def test_history_search_is_full_text_with_filters(recorded, tmp_path):  # noqa: F811
    """--search finds sessions by what their events say (arguments, output), lists the
    matching events, and combines with --agent/--since/--level; ids still match too."""
    db = str(recorded["db"])
    out = loopwatch("history", "--db", db, "--search", "contents")  # only the varied results say it
    assert out.returncode == 0, out.stderr
    sessions_part, events_part = out.stdout.split("events matching")
    assert "honest-1b2c" in sessions_part and "twice-9d8e" in sessions_part
    assert "loop-7f3a" not in sessions_part
    assert "«contents»" in events_part and "tool_result" in events_part
    cat = loopwatch("history", "--db", db, "--search", "cat file*", "--agent", "codex", "--json")
    rows = [json.loads(line) for line in cat.stdout.splitlines()]
    assert {r["id"] for r in rows} == {"honest-1b2c", "twice-9d8e"}
    assert all("«cat» «file" in m["snippet"] for r in rows for m in r["matches"])
    assert {m["type"] for r in rows for m in r["matches"]} == {
        "tool_call",
        "tool_result",
    }  # results carry their call's args
    assert (
        loopwatch("history", "--db", db, "--search", "contents", "--since", "1d").stdout.count("twice-9d8e")
        >= 1
    )
    warned = loopwatch("history", "--db", db, "--search", "contents", "--level", "warn")
    assert "no sessions match" in warned.stderr
    by_id = loopwatch("history", "--db", db, "--search", "loop-7f")
    assert "loop-7f3a" in by_id.stdout  # an id fragment still finds its session
    odd = loopwatch("history", "--db", db, "--search", 'x:"(- AND')  # FTS syntax is plain text here
    assert odd.returncode == 0, odd.stderr


def test_existing_database_gets_the_index_by_migration(tmp_path):
    """A v2 database (written before the index existed) is indexed when opened."""
    import sqlite3

    from sqlite_utils import Database

    from monitor.store import Store
    from monitor.store.schema import migrate

    path = tmp_path / "old.db"
    db = Database(sqlite3.connect(str(path)))
    migrate(db, upto=2)
    db.execute("INSERT INTO sessions (id, agent, events) VALUES ('old', 'a', 1)")
    db.execute(
        "INSERT INTO events (session, seq, ts, type, tool, args, content) VALUES "
        "('old', 1, 5.0, 'tool_result', 'bash', '{\"cmd\": \"make\"}', 'ModuleNotFoundError: x')"
    )
    db.conn.commit()
    db.close()
    store = Store(path)
    try:
        hits = store.search_events("ModuleNotFoundError")
        assert [(h["session"], h["seq"]) for h in hits] == [("old", 1)]
    finally:
        store.close()
    store = Store(path)
    store.start()
    try:
        store.add_events([])
        from monitor.events import Event, Kind

        event = Event(Kind.MESSAGE, "old", 6.0, role="assistant", content="still ModuleNotFoundError")
        event.seq = 2
        store.add_events([event])
        store.flush()
        found = store.search_events("modulenotfounderror")  # case-insensitive, newest first
        assert [h["ts"] for h in found] == [6.0, 5.0] and "«ModuleNotFoundError»" in found[0]["snippet"]
        deleted = Database(sqlite3.connect(str(path)))
        assert deleted.execute("SELECT count(*) FROM events_fts").fetchone()[0] == 2
        deleted.close()
    finally:
        store.close()
