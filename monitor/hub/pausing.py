"""Pause, resume and the per-session guard switch: the actions lighter than a kill.

``pause`` sends SIGSTOP to the session's process and ``resume`` SIGCONT,
with the same proof a kill needs (:meth:`monitor.control.PidClaim.refusal`:
same user, pid + start time, never pid 1, the monitor or its ancestors;
:func:`monitor.control.suspend` checks again once the pid is pinned).  A
paused session shows as ``paused``; its clocks stand still (it is never
closed as idle, and when it resumes its idle time starts again from the
resume; the time it was stopped is no wait of the agent's for detection:
:mod:`monitor.detect.pauses`).  ``guard`` turns the guard (:mod:`monitor.hub.guard`) on (``text``
"on") or off for one session.  :class:`~monitor.hub.actions.Actions` records
each before calling :func:`carry_out`, and its result after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from monitor.control import suspend
from monitor.detect.pauses import paused

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.hub.guard import Guard
    from monitor.hub.state import HubSession


class PauseHub(Protocol):
    """What pausing uses of the hub (a subset of ``monitor.hub.actions.ActionsHub``)."""

    config: Config
    clock: Callable[[], float]
    engine: Any
    guard: Guard


async def carry_out(hub: PauseHub, kind: str, state: HubSession, text: str | None) -> tuple[str, str]:
    """Pause, resume or switch the guard of ``state``'s session: (status, detail)."""
    if kind == "guard":
        return _switch_guard(hub, state, text)
    pause = kind == "pause"
    if pause and state.paused:
        return "refused", "the session is already paused (resume it first)"
    if not pause and not state.paused:
        return "refused", "the session is not paused"
    claim = state.claim
    if claim is None:
        return "refused", f"{state.kill_reason}: there is no process to {kind}"
    reason = claim.refusal()
    if reason is not None:
        reason = reason.replace("refusing to kill", f"refusing to {kind}")
        if not pause and "exited" in reason:
            state.paused = 0.0  # nothing is stopped any more
        return "refused", reason
    outcome = await suspend(claim.identity, pause)
    if outcome.status == "delivered":
        now = hub.clock()
        if pause:
            state.paused = now
        else:
            # The idle clock stood still while it was paused, and so did detection's.
            paused(hub.engine, state.id, state.paused, now)
            if state.waiting is not None and state.waiting.since <= state.paused:
                # A wait for the person: its clock resumes where it stood (the notice's budget).
                state.waiting = state.waiting._replace(since=state.waiting.since + (now - state.paused))
            state.last_activity = min(now, state.last_activity + max(0.0, now - state.paused))
            state.last_arrival = max(state.last_arrival, now)
            state.paused = 0.0
    return outcome.status, outcome.detail


def _switch_guard(hub: PauseHub, state: HubSession, text: str | None) -> tuple[str, str]:
    wanted = (text or "").strip().lower()
    if wanted not in ("on", "off"):
        return "failed", f"guard: expected 'on' or 'off', got {text!r}"
    state.guard = wanted == "on"
    if not state.guard:
        state.guarded = None
        return "delivered", "guard off for this session: its calls run even when they repeat a loop"
    guard = hub.guard
    summary = hub.engine.summary(state.id)
    if summary.detection is not None and summary.level >= guard.level and not summary.detection.suppressed:
        state.guarded = guard.arm(state, summary.detection)  # already there: the next such call is denied
    level = guard.level.label
    channel = getattr(state.channel, "name", "none")
    if channel != "hook":
        return "delivered", (
            f"guard on, but this {state.origin} session has no hook to answer its calls "
            f"(channel: {channel}); only hook sessions (loopwatch install-hook) can be denied a call"
        )
    return "delivered", f"guard on: a call that continues a loop at {level} will be denied"


async def resume_paused(act: Callable[..., Any], sessions: Iterable[HubSession], who: str) -> None:
    """The monitor stops: no agent stays stopped after it is gone (each resume an action, recorded)."""
    for state in list(sessions):
        if state.paused:
            await act("resume", state.id, text=None, detection=None, detector=None, who=who)
