"""A small builder for native-format sessions, used by the detector tests.

``Script`` appends native JSONL records (with ids and steadily increasing
timestamps) and can write them to a real file, decode them through the real
:class:`~monitor.formats.lines.LineDecoder`, or run them through an
:class:`~monitor.detect.engine.Engine` and return the detections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from monitor.config import Config, build_config
from monitor.detect.base import Detection
from monitor.detect.engine import Engine
from monitor.events import Event, Level
from monitor.formats.lines import LineDecoder


class Script:
    def __init__(
        self,
        session: str = "s1",
        agent: str = "test-agent",
        start: float = 1_700_000_000.0,
        step: float = 2.0,
        ids: str = "c",
    ):
        self.session = session
        self.ids = ids  # call-id prefix: the engine drops a call id it has already seen
        self.ts = start
        self.step = step
        self.records: list[dict[str, Any]] = []
        self._ids = 0
        self.add({"type": "session_start", "agent": agent, "pid": 4242})

    def add(self, record: dict[str, Any]) -> Script:
        record = {"session": self.session, "ts": self.ts, **record}
        self.ts += self.step
        self.records.append(record)
        return self

    @property
    def line(self) -> int:
        """The 1-based line number of the last record added."""
        return len(self.records)

    def say(self, text: str, role: str = "assistant") -> Script:
        return self.add({"type": "message", "role": role, "content": text})

    def user(self, text: str) -> Script:
        return self.say(text, role="user")

    def call(
        self,
        name: str,
        args: dict[str, Any],
        result: str = "",
        *,
        is_error: bool = False,
        answer: bool = True,
    ) -> Script:
        self._ids += 1
        call_id = f"{self.ids}{self._ids}"
        self.add({"type": "tool_call", "id": call_id, "name": name, "args": args})
        if answer:
            self.add({"type": "tool_result", "id": call_id, "content": result, "is_error": is_error})
        return self

    def bash(self, command: str, output: str = "", *, code: int = 0, is_error: bool | None = None) -> Script:
        """A shell call whose output ends with ``Exit code N`` when N is nonzero (Claude style)."""
        content = output if code == 0 else f"Exit code {code}\n{output}"
        return self.call(
            "bash", {"command": command}, content, is_error=(code != 0) if is_error is None else is_error
        )

    def usage(self, cost: float, tokens: int = 1000) -> Script:
        return self.add(
            {"type": "usage", "input_tokens": tokens, "output_tokens": tokens // 4, "cost_usd": cost}
        )

    def compaction(self) -> Script:
        return self.add({"type": "compaction"})

    def end(self, status: str = "done") -> Script:
        return self.add({"type": "session_end", "status": status})

    # -- output -----------------------------------------------------------------

    def jsonl(self) -> bytes:
        return b"".join(orjson.dumps(r) + b"\n" for r in self.records)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.jsonl())
        return path

    def events(self, source: str = "script.jsonl") -> list[Event]:
        decoder = LineDecoder(source)
        out: list[Event] = []
        for lineno, raw in enumerate(self.jsonl().splitlines(), 1):
            events, problem = decoder.feed(raw, lineno)
            assert problem is None, str(problem)
            out.extend(events)
        return out

    def run(self, config: Config | None = None, engine: Engine | None = None) -> list[Detection]:
        engine = engine or Engine(config or build_config({}))
        return engine.process_many(self.events())


def by(detections: list[Detection], detector: str, level: Level = Level.WARN) -> list[Detection]:
    """Detections of ``detector`` at ``level`` or above."""
    return [d for d in detections if d.detector == detector and d.level >= level]


def only(detector: str, **settings: Any) -> Config:
    """A config where only ``detector`` runs (so a test sees just its behaviour)."""
    from monitor.detect import REGISTRY

    tables: dict[str, Any] = {name: {"enabled": False} for name in REGISTRY if name != detector}
    tables[detector] = dict(settings)
    return build_config({"detectors": tables})
