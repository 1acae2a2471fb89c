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

The OpenHands resolver (``openhands.resolver``: an agent run on a GitHub issue)
writes the same, a run a line, as ``{"issue": {"owner", "repo", "number", …},
"issue_type", "instruction", "base_commit", "git_patch", "history", "metrics",
"success", "error"}``: its session is ``<owner>__<repo>-<number>``.  Its older
history is flat (an action's arguments beside ``action``, no ``id`` or
``cause``): each observation is the result of the action before it.
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


def _issue_name(issue: dict[str, Any]) -> str | None:
    """A resolver run's name: ``<owner>__<repo>-<number>``, as SWE-bench names its tasks."""
    owner, repo, number = issue.get("owner"), issue.get("repo"), issue.get("number")
    if not isinstance(owner, str) or not isinstance(repo, str) or not isinstance(number, (int, str)):
        return None
    return f"{owner}__{repo}-{number}"


#: Fields of an action the resolver's flat history keeps beside its arguments.
_FLAT_META = frozenset(
    {"action", "action_risk", "thought", "keep_prompt", "is_confirmed", "kernel_init_code", "images_urls"}
)


def _unflatten(item: dict[str, Any], index: int, last: list[int | None]) -> dict[str, Any]:
    """An entry of the resolver's older, flat history (``{"action": "run", "command", "thought"}``,
    ``{"observation": "run", "content", "exit_code"}``: no ids, args or extras) as a V0 event;
    an observation answers the action before it.  Others are returned as they are."""
    if "args" in item or "extras" in item or "id" in item or "cause" in item:
        return item
    if "action" in item:
        last[0] = index
        args = {k: v for k, v in item.items() if k not in _FLAT_META}
        if item.get("action") == "message":
            # The task opens the history; later messages are the agent's.
            source = "user" if index == 1 else "agent"
            return {"id": index, "action": "message", "source": source, "args": args}
        if isinstance(item.get("thought"), str):
            args["thought"] = item["thought"]
        return {"id": index, "action": item["action"], "source": "agent", "args": args}
    if "observation" in item:
        extras = {k: v for k, v in item.items() if k not in ("observation", "content")}
        event = {"observation": item["observation"], "content": item.get("content", ""), "extras": extras}
        if last[0] is not None:
            event["cause"], last[0] = last[0], None
        return event
    return item


class OpenHandsEvalDecoder(RecordDecoder):
    """Decoder of OpenHands evaluation output, one run a record."""

    name = "openhands-eval"
    session_key = "instance_id"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self._runs: dict[str, int] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        if not isinstance(record.get("history"), list):
            return False
        if isinstance(record.get("issue"), dict) and "issue_type" in record:
            return True  # the resolver's output.jsonl
        return isinstance(record.get("instance_id"), str) and (
            "metadata" in record or "instruction" in record or "test_result" in record
        )

    def _session(self, instance: str) -> str:
        seen = self._runs.get(instance, 0) + 1
        if len(self._runs) < 100_000 or instance in self._runs:
            self._runs[instance] = seen
        return instance if seen == 1 else f"{instance}~{seen}"

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        instance = record.get("instance_id")
        if instance is None and isinstance(record.get("issue"), dict):
            instance = _issue_name(record["issue"])
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
        last: list[int | None] = [None]  # the flat history's action waiting for its observation
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
                        item = _unflatten(item, index, last)
                        events.extend(documents.openhands_event(item, index, self.source, session, state))
                except RecordError:
                    self.skip("history:bad entry")
        return events


register_line_format(OpenHandsEvalDecoder)
