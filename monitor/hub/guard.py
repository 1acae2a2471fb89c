"""The guard: deny, before it runs, a call that continues a loop flagged at ``critical``.

Lighter than a kill: once a session's loop reaches the guard's level
(``[control] guard_level``, ``critical`` by default), a tool call that
continues *that* loop -- one whose detection names the same
``(detector, pattern)``, or whose fingerprint is one of the loop's cited
calls -- is answered, through the agent's ``PreToolUse`` hook, with
``permissionDecision: "deny"`` and the loop's nudge as the reason.  Other
calls run.  The guard is on for every session with ``[control] guard``, and
the operator turns it on or off per session (``Hub.act("guard", …)``).

Each denial is an action (``deny``), recorded before its message is queued
for the hook, then its result.  The message names the call it denies, so the
hook answers only that call (:func:`monitor.hooks.answer`).  An operator's
acknowledgement, or a new user prompt, disarms it until the loop is flagged again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from monitor.control import control_message
from monitor.detect.analysis.signatures import fingerprint
from monitor.detect.base import Detection
from monitor.events import Event, Kind, Level
from monitor.updates import ActionFinished, ActionRecord

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.hub.state import HubSession


class GuardHub(Protocol):
    """What the guard uses of the hub (a subset of ``monitor.hub.actions.ActionsHub``)."""

    config: Config
    store: Any
    clock: Callable[[], float]

    def publish(self, update: object) -> None: ...


log = logging.getLogger("loopwatch.hub")

GUARD_WHO = "loopwatch (guard)"
#: What the agent reads first, before the loop's nudge.
DENY_PREFIX = "loopwatch denied this call: it continues a loop flagged at {level} ({detector}: {message})."


@dataclass(frozen=True, slots=True)
class GuardedLoop:
    """The loop the guard denies calls of: what named it, and its calls' fingerprints."""

    detector: str
    pattern: str
    level: Level
    message: str
    nudge: str
    fingerprints: frozenset[str]

    def continued_by(self, print_: str, detections: Sequence[Detection]) -> bool:
        if print_ in self.fingerprints:
            return True
        return any(d.detector == self.detector and d.pattern == self.pattern for d in detections)

    def reason(self) -> str:
        head = DENY_PREFIX.format(level=self.level.label, detector=self.detector, message=self.message[:200])
        return f"{head}\n\n{self.nudge}" if self.nudge else head


class Guard:
    """Arms on a detection at the guard's level; denies the calls that continue it."""

    def __init__(self, hub: GuardHub):
        self.hub = hub
        self.level = hub.config.control.guard_level
        self.default = hub.config.control.guard
        self.pending: set[asyncio.Task] = set()

    def on(self, state: HubSession) -> bool:
        return self.default if state.guard is None else state.guard

    def observe(self, state: HubSession, event: Event, detections: Sequence[Detection]) -> None:
        """After the engine: remember the call, arm on a loop at the level, deny a continuation."""
        if not self.on(state):
            return
        kind = event.kind
        print_ = ""
        if kind is Kind.TOOL_CALL:
            print_ = fingerprint(event)
            state.guard_calls.append((event.seq, print_))
        elif kind is Kind.TOOL_RESULT and event.call is not None:
            state.guard_calls.append((event.seq, fingerprint(event.call)))
        elif kind is Kind.MESSAGE and event.role == "user":
            state.guarded = None  # the user speaks: the loop is theirs to judge now
            return
        armed = state.guarded
        for detection in detections:
            if detection.level >= self.level and not detection.suppressed:
                state.guarded = self.arm(state, detection)
        guarded = state.guarded
        if kind is not Kind.TOOL_CALL or guarded is None or not event.call_id:
            return
        # The call that brings the loop to the level has not run either (PreToolUse comes first).
        if guarded is not armed or guarded.continued_by(print_, detections):
            self._spawn(self.deny(state, event.call_id, event.tool or "", guarded))

    def arm(self, state: HubSession, detection: Detection) -> GuardedLoop:
        cited = {ref.seq for ref in detection.evidence}
        prints = frozenset(p for seq, p in state.guard_calls if seq in cited)
        return GuardedLoop(
            detection.detector, detection.pattern, detection.level, detection.message, detection.nudge, prints
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def settled(self) -> None:
        """Wait for the denials being recorded (a hook's poll must find their message)."""
        if self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)

    async def deny(
        self, state: HubSession, call_id: str, tool: str, loop: GuardedLoop
    ) -> ActionRecord | None:
        """Record the denial, queue it for the hook's answer to ``call_id``, record the result."""
        hub = self.hub
        channel = state.channel
        if channel is None or getattr(channel, "name", "") != "hook":
            return None  # only a hook answers a call before it runs; nothing was denied
        reason = loop.reason()
        detail = f"{tool} call {call_id}: {loop.detector} {loop.pattern}"[:500]
        ts = hub.clock()
        store = hub.store
        action_id = 0
        if store is not None:
            try:
                action_id = await asyncio.to_thread(
                    store.begin_action, "deny", state.id, reason, GUARD_WHO, detail
                )
            except Exception:
                log.exception("could not record a denial; the call runs")
                return None
        message = control_message("deny", state.id, call_id=call_id, reason=reason)
        try:
            outcome = await channel.send(message)
            status, result = outcome.status, f"{detail}; {outcome.detail}"
        except Exception as exc:  # a channel should not raise; the denial is still accounted for
            status, result = "failed", f"{type(exc).__name__}: {exc}"
        if store is not None:
            try:
                await asyncio.to_thread(store.finish_action, action_id, status, result)
            except Exception:
                log.exception("could not record the outcome of denial %s", action_id)
        record = ActionRecord(action_id, "deny", state.id, reason, ts, GUARD_WHO, status, result)
        hub.publish(ActionFinished(record))
        return record
