"""Tiny builders for native event streams in detector tests."""

from __future__ import annotations

from typing import Any

from monitor.detect.engine import Engine
from monitor.events import Event, Kind


class Stream:
    """Builds one session's events with increasing timestamps and line numbers."""

    def __init__(self, session: str = "s1", start: float = 1_700_000_000.0, step: float = 2.0):
        self.session = session
        self.ts = start
        self.step = step
        self.line = 0
        self.events: list[Event] = []
        self._ids = 0

    def _add(self, **fields: Any) -> Event:
        self.ts += self.step
        self.line += 1
        event = Event(
            session=self.session, ts=self.ts, source=f"{self.session}.jsonl", line=self.line, **fields
        )
        self.events.append(event)
        return event

    def call(self, tool: str, result: str | None = None, error: bool = False, **args: Any) -> Stream:
        self._ids += 1
        cid = f"c{self._ids}"
        self._add(kind=Kind.TOOL_CALL, tool=tool, args=args, call_id=cid)
        if result is not None:
            self._add(kind=Kind.TOOL_RESULT, call_id=cid, content=result, is_error=error)
        return self

    def say(self, text: str, role: str = "assistant") -> Stream:
        self._add(kind=Kind.MESSAGE, role=role, content=text)
        return self


def run(*streams: Stream, engine: Engine | None = None, interleave: bool = False):
    """Feed streams through an engine; return (engine, detections)."""
    engine = engine or Engine()
    events = [e for s in streams for e in s.events]
    if interleave:
        events.sort(key=lambda e: e.ts)
    found = []
    for event in events:
        found.extend(engine.process(event).detections)
    return engine, found


def by(detections, name: str, min_level=None):
    from monitor.events import Level

    floor = min_level or Level.WARN
    return [d for d in detections if d.detector == name and d.level >= floor]
