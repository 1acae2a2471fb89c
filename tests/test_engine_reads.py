"""Outside detect/, what the engine knows is read through its read API.

``Engine.summary`` (monitor/detect/summary.py) for a session, and the small
methods beside it (``level``, ``reason``, ``agents``, ``counts``,
``pattern_history``): the engine's detector state, escalation policy and
counters are its own, so that changing them touches detect/ alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from monitor.detect.engine import Engine
from monitor.events import Event, Kind

ROOT = Path(__file__).resolve().parent.parent / "monitor"

_INTERNAL = re.compile(r"\bengine\.(sessions|policy|duplicates|_\w+)\b")


def test_nothing_outside_detect_reads_the_engines_internals():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith("detect/"):
            continue
        text = path.read_text(encoding="utf-8")
        wrong += [f"{name}: {m.group(0)}" for m in _INTERNAL.finditer(text)]
    assert not wrong, wrong


def test_the_small_reads_say_what_the_engine_holds():
    engine = Engine()
    engine.process(Event(Kind.SESSION_START, "s", 1.0, agent="codex"))
    call = Event(Kind.TOOL_CALL, "s", 2.0, call_id="c1", tool="bash", args={"command": "ls"})
    engine.process(call)
    engine.process(Event(Kind.TOOL_CALL, "s", 2.5, call_id="c1", tool="bash", args={"command": "ls"}))
    engine.process(Event(Kind.MESSAGE, "t", 3.0, role="assistant", content="hello"))
    assert engine.agents() == {"s": "codex", "t": None}
    assert engine.counts() == (3, 1)
    assert engine.reason("s") == "" and engine.reason("never") == ""
