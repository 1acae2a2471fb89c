"""Call records: a call's reference, its result clipped and normalized."""

from __future__ import annotations

import random

from monitor.detect.analysis import calls, turns
from monitor.detect.analysis.calls import new_record
from monitor.events import Event, EventRef, Kind
from monitor.text import RESULT_TEXT, SIMILARITY_CHARS, clip, normalize

CALLS = [
    ("bash", {"command": "sed -i 's/a/b/' models.py"}),
    ("bash", {"command": "python fix.py"}),
    ("bash", {"command": "cat > fix.py << 'EOF'\nprint(1)\nEOF"}),
    ("bash", {"command": "ls -la"}),
    ("shell", {"command": ["bash", "-lc", "cp a.py b.py"]}),
    ("edit_file", {"path": "app/x.py", "old": "a"}),
    ("Edit", {"file_path": "y.py"}),
    ("edit_file", {}),
    ("read_file", {"path": "app/x.py"}),
    ("bash", None),
    ("grep", {"pattern": "foo", "path": "src"}),
    ("run", {"cmd": "git checkout -- ."}),
]


def test_a_record_refers_to_its_call():
    for tool, args in [
        *CALLS,
        ("t", {"a": "x" * 300}),
        ("t", {"a": "b  c"}),
        ("t", {"id": "1"}),
        ("t", {"a": [1]}),
    ]:
        event = Event(Kind.TOOL_CALL, "s", 1.0, tool=tool, args=args, seq=5)
        assert new_record(event).ref == EventRef.of(event)


def test_attach_keeps_what_clip_keeps():
    """attach clips only a long result (a short one is kept as it is, as clip() would)."""
    for size in (0, 1, 399, 400, 401, 1999, 2000, 2001, 5000):
        for error in (False, True):
            content = "".join(chr(97 + i % 26) for i in range(size))
            record = new_record(Event(Kind.TOOL_CALL, "s", 1.0, tool="bash", args={"command": "ls"}))
            record.attach(Event(Kind.TOOL_RESULT, "s", 2.0, content=content, is_error=error))
            assert (record.text, record.long, record.error) == (clip(content), size > 400, error)


def test_a_records_result_is_its_clipped_text_normalized():
    """A record's and a turn's result compare by the clipped text, normalized by
    RESULT_TEXT, and marked as an error or not."""
    rng = random.Random(6)
    texts = ["3 passed in 1.2s at 10:20:30", "Exit code 1\nFAILED t.py::x - 0xdead", "ok", "", "x" * 3000]
    for _ in range(200):
        content, error = rng.choice(texts), rng.random() < 0.5
        record = calls.new_record(Event(Kind.TOOL_CALL, "s", 1.0, tool="bash", args={"command": "ls"}))
        record.attach(Event(Kind.TOOL_RESULT, "s", 2.0, content=content, is_error=error))
        assert record.result == ("E:" if error else "R:") + normalize(
            clip(content), RESULT_TEXT, SIMILARITY_CHARS
        )
        outcome = turns.Outcome(((error, record.text),))
        assert outcome.key() == (record.result,)
