"""OpenHands evaluation output (``output.jsonl``): one whole run a line.

The OpenHands benchmarks harness (V1, ``OpenHands/benchmarks``) and the V0
``evaluation/`` scripts write one JSON object a line and a run an object::

    {"instance_id": "django__django-11099", "instruction": "...",
     "metadata": {"llm": {"model": ...} | "llm_config": {...}, ...},
     "history": [event, ...], "metrics": {...}, "error": null,
     "test_result": {...}, "instance": {...}}

Each line is a session of its own, named by its ``instance_id`` (the same
task run twice in one file stays two sessions: ``<id>~2``).  ``history`` holds
the run's events, V1 ones (``kind``: see :mod:`monitor.formats.openhands_v1`)
or V0 ones (``action`` / ``observation``: see
:mod:`monitor.formats.documents`); exit codes come from the observations'
``exit_code`` / ``metadata.exit_code``.  The ``line`` of every event is the
**1-based index in** ``history[]`` (a run has no lines of its own); a line
that is not a run is reported as ``file:line``.  The ``instruction`` is the
user's message when the history has none (V1 histories start at the first
action).  A history entry that is not
an event is counted as skipped (``history:bad entry``).  ``error`` ends the
session with that status.
"""

from __future__ import annotations

from typing import Any

from monitor.events import Event, Kind
from monitor.formats import documents
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.openhands_v1 import AGENT, V1Reader, is_v1_event
from monitor.formats.registry import register_line_format


def _model(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return None
    for key in ("llm", "llm_config"):
        llm = metadata.get(key)
        if isinstance(llm, dict) and isinstance(llm.get("model"), str):
            return str(llm["model"])
    return None


class OpenHandsEvalDecoder(RecordDecoder):
    """Decoder of OpenHands evaluation output, one run a record."""

    name = "openhands-eval"
    session_key = "instance_id"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self._runs: dict[str, int] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        return (
            isinstance(record.get("instance_id"), str)
            and isinstance(record.get("history"), list)
            and ("metadata" in record or "instruction" in record or "test_result" in record)
        )

    def _session(self, instance: str) -> str:
        seen = self._runs.get(instance, 0) + 1
        if len(self._runs) < 100_000 or instance in self._runs:
            self._runs[instance] = seen
        return instance if seen == 1 else f"{instance}~{seen}"

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        instance = record.get("instance_id")
        history = record.get("history")
        if not isinstance(instance, str) or not instance:
            raise RecordError("OpenHands run: instance_id is not a non-empty string")
        if not isinstance(history, list):
            raise RecordError(f"OpenHands run: history is not a list (got {type(history).__name__})")
        session = self._session(instance)
        meta: dict[str, Any] = {"instance_id": instance}
        model = _model(record.get("metadata"))
        if model is not None:
            meta["model"] = model
        events = self._history(history, session, now)
        first = events[0].ts if events else now
        instruction = record.get("instruction")
        if isinstance(instruction, str) and instruction.strip() and not any(e.role == "user" for e in events):
            # V1 histories start at the first action: the task is only here.
            events.insert(
                0,
                Event(
                    kind=Kind.MESSAGE,
                    session=session,
                    ts=first,
                    source=self.source,
                    line=None,
                    role="user",
                    content=instruction,
                ),
            )
        opening = Event(
            kind=Kind.SESSION_START,
            session=session,
            ts=first,
            source=self.source,
            line=None,
            agent=AGENT,
            meta=meta,
        )
        error = record.get("error")
        if isinstance(error, str) and error:
            last = events[-1].ts if events else first
            closing = Event(
                kind=Kind.SESSION_END,
                session=session,
                ts=last,
                source=self.source,
                line=len(history) or None,
                status=error[:200],
            )
            return [opening, *events, closing]
        return [opening, *events]

    def _history(self, history: list[Any], session: str, now: float) -> list[Event]:
        v1 = V1Reader(self.source, session, self.skipped)
        state: dict[str, Any] = {"ts": now, "tokens_in": 0, "tokens_out": 0, "cost": 0.0}
        events: list[Event] = []
        for index, entry in enumerate(history, start=1):
            # Older V0 runs kept (action, observation) pairs: both are step ``index``.
            for item in entry if isinstance(entry, list) else (entry,):
                if not isinstance(item, dict):
                    self.skip("history:bad entry")
                    continue
                try:
                    if is_v1_event(item):
                        events.extend(v1.decode(item, index, state["ts"]))
                        state["ts"] = v1.ts if v1.ts is not None else state["ts"]
                    else:
                        events.extend(documents.openhands_event(item, index, self.source, session, state))
                except RecordError:
                    self.skip("history:bad entry")
        return events


register_line_format(OpenHandsEvalDecoder)
