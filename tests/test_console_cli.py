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
