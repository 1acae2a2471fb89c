"""Waiting is not looping: polls made after an explicit wait, and their budget.

``sleep 60`` → ``gh run view`` showing "in_progress", six times, is an agent
waiting for CI, not a loop (issue 13).  A tool call is *waited* when it comes
after an explicit wait: a ``sleep`` in its own command, a ``timeout``/``wait``
argument of a tool that is not a shell (a shell tool's ``timeout`` caps the
command, as Claude Code's Bash does), a call before it that did nothing but wait (``sleep 60``), or a real
gap of :data:`WAIT_GAP` seconds or more since the same call was made just
before it (the same poll again, nothing in between, 20 s later).  The engine marks such calls
(``event.cache["waited"]``, the seconds waited) before the detectors see them.

The repeat detectors (``exact_repeat``, ``fingerprint``, ``cycle``,
``turn_similarity``) do not count a waited call as a repeat, nor a call that
only waits.  Instead the ``waiting`` detector counts the time spent waiting
on the same unchanged answer: the same call again, after a wait, with the
same result, counted from the first poll after a wait.  It is a ``notice``
when half of the budget is spent and a ``warn`` when all of it is (default 30 minutes; per tool with
``[tools.<name>] wait_budget_seconds``).  An answer that changes starts the
count over.  Identical polls back to back, with no wait, are still a loop
for the repeat detectors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from monitor.detect.analysis.calls import CallRecord, call_record
from monitor.detect.analysis.failures import _COMMAND_KEY_SET, _segments, _tool_kind, shell_command
from monitor.detect.analysis.memo import TextMemo
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence
from monitor.events import Event, Kind, Level
from monitor.text import call_key

#: A gap this long (seconds) between a call and the same call just before it is waiting.
WAIT_GAP = 20.0
_SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+(\d+(?:\.\d+)?)([smhd]?)\b")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: Arguments that make a call wait (seconds, or milliseconds for ``*_ms``).
WAIT_KEYS = (
    "wait",
    "timeout",
    "wait_seconds",
    "timeout_seconds",
    "sleep",
    "delay",
    "seconds",
    "timeout_ms",
    "wait_ms",
    "yield_time_ms",
    "delay_ms",
)
_WAIT_TOOLS = frozenset({"sleep", "wait", "wait_for", "pause"})


def _sleeps(command: str) -> float:
    if "sleep" not in command:
        return 0.0
    return sum(float(n) * _UNITS[unit] for n, unit in _SLEEP.findall(command[:4000]))


def _arg_wait(args: dict | None) -> float:
    if not args:
        return 0.0
    for key in WAIT_KEYS:
        value = args.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return value / 1000.0 if key.endswith("_ms") else float(value)
    return 0.0


def only_waits(call: Event) -> float:
    """The seconds a call does nothing but wait (``sleep 60``, a wait tool), else 0."""
    command = shell_command(call)
    if command is not None:
        segments = _segments(command)
        if segments and all(s.split(None, 1)[0] == "sleep" for s in segments):
            return _sleeps(command) or 0.0
        return 0.0
    if (call.tool or "").lower() in _WAIT_TOOLS:
        return _arg_wait(call.args) or 1.0
    return 0.0


_WAIT_KEY_SET = frozenset(WAIT_KEYS)
_RESULTS = frozenset({Kind.TOOL_RESULT})
#: Arguments that give a call a command line (see ``shell_command``) or a wait.
_MARKING_KEYS = _WAIT_KEY_SET | _COMMAND_KEY_SET


def _plain_tool(tool: str | None) -> bool:
    """Whether a tool's calls can only wait by their arguments (neither a
    shell, which runs commands, nor a wait tool)."""
    return not _tool_kind(tool)[2] and (tool or "").lower() not in _WAIT_TOOLS


#: :func:`_plain_tool` by tool name, as ``_TOOL_KINDS``.
_PLAIN_TOOLS = TextMemo(256, 4096, _plain_tool)


def mark(call: Event, view: SessionView) -> None:
    """Mark ``call`` as waited (``cache["waited"]``: the seconds) when it comes
    after an explicit wait or only waits; remember a call that only waits, and
    the call's time, for the next one.  Run by the engine on every call,
    before the detectors."""
    ts = call.ts
    last = view.last_call_ts
    view.last_call_ts = ts
    elapsed = ts - last if last else 0.0
    args = call.args
    if (
        elapsed < WAIT_GAP
        and not view.last_wait
        and (not args or _MARKING_KEYS.isdisjoint(args))
        and _PLAIN_TOOLS[call.tool]
    ):
        # Most calls: no command line, no wait argument, no wait before it
        # and no long gap, so nothing to mark (and ``last_wait`` stays 0).
        return
    # (The previous call's key is the one the call detectors computed; the
    # engine keeps it after they ran.  Computed here only for a long gap.)
    gap = (
        elapsed
        if elapsed >= WAIT_GAP and view.last_call_key and call_key(call) == view.last_call_key
        else 0.0
    )
    command = shell_command(call)
    pure = 0.0
    waited = view.last_wait
    if command is not None:
        if "sleep" in command:
            pure = only_waits(call)
            waited += _sleeps(command)
    elif (call.tool or "").lower() in _WAIT_TOOLS:
        pure = only_waits(call)
    args = call.args
    if command is None and args and not _WAIT_KEY_SET.isdisjoint(args):
        # (A shell tool's ``timeout`` caps the command; it does not wait.)
        # A timeout is at most a wait: count the time that passed, when known.
        wait = _arg_wait(args)
        waited += min(wait, elapsed) if elapsed > 0 else wait
    if gap >= WAIT_GAP:
        waited = max(waited, gap)
    if waited or pure:
        view.listen(Waiting.name, _RESULTS)  # (the detector needs results from now on)
        call.cache["waited"] = waited or pure
        if pure:
            call.cache["wait_only"] = True
    view.last_wait = pure


@dataclass(frozen=True)
class WaitingSettings(DetectorSettings):
    budget_seconds: float = 1800.0  # waiting on the same unchanged answer: notice at half, warn when spent


class Waiting(Detector):
    name = "waiting"
    title = "Waiting"
    Settings = WaitingSettings
    kinds = frozenset({Kind.TOOL_RESULT})
    #: Results only from the session's first waited call on (``mark`` asks for them).
    listening = frozenset()
    presets = {"conservative": {"budget_seconds": 3600.0}, "aggressive": {"budget_seconds": 900.0}}

    def __init__(self, settings: WaitingSettings | None = None):
        super().__init__(settings)
        self.reset()

    def reset(self) -> None:
        self.poll: CallRecord | None = None  # the poll being waited on
        self.spent = 0.0  # seconds waited on its unchanged answer
        self.polls: list[CallRecord] | None = None  # its repeats (the first 6, as evidence)
        self.count = 0  # its repeats
        self.stage = 0  # 0: nothing said, 1: notice given, n >= 2: warned for n - 1 budgets

    def window(self) -> list[Event]:
        return []

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        # Runs for every result: the common case (no wait) is a few dict reads.
        call = event.call
        if call is None:
            return None
        cache = call.cache
        waited = cache.get("waited")
        if not waited:
            if self.poll is not None:
                self.reset()  # no wait: not polling (and nothing kept meanwhile)
            return None
        if cache.get("wait_only") or view.exempt(call.tool):
            return None
        record = cache.get("record") or call_record(call)
        poll = self.poll
        if poll is None or not record.same_call(poll) or not record.same_outcome(poll):
            # A first poll after a wait, or the answer moved: a new poll to wait on.
            self.poll, self.spent, self.polls, self.stage, self.count = record, 0.0, [record], 0, 1
            return None
        self.spent += waited
        self.count += 1
        if len(self.polls) < 6:
            self.polls.append(record)
        override = view.tool_overrides.get(call.tool or "") if view.tool_overrides else None
        budget = getattr(override, "wait_budget_seconds", None) or self.settings.budget_seconds
        if self.spent >= budget * max(1, self.stage):
            level, self.stage = Level.WARN, max(2, self.stage + 1)
        elif self.stage == 0 and self.spent >= budget / 2:
            level, self.stage = Level.NOTICE, 1
        else:
            return None
        minutes = self.spent / 60.0
        return [
            Detection(
                detector=self.name,
                level=level,
                score=min(1.0, self.spent / budget),
                message=(
                    f"{self.count} polls of {call.tool} with the same answer after "
                    f"{minutes:.0f} min of waiting (budget {budget / 60.0:.0f} min)"
                ),
                pattern=f"waiting:{record.key}",
                count=self.count,
                tool=call.tool,
                summary=f"waited {minutes:.0f} minutes on {call.tool} without its answer changing",
                advice=(
                    "The answer has not changed in a long while: check whether what you are "
                    "waiting for is stuck, or report and stop waiting."
                ),
                evidence=evidence(r.ref for r in self.polls),
            )
        ]
