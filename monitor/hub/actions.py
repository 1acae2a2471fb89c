"""Operator and automatic actions: acknowledge, inject, kill, pause/resume, guard, false positive, mute.

An action is committed to the store *before* it is carried out, delivered
through the session's channel (its socket, the inbox file next to a native
log, a hook mailbox) or, for kills, by signalling the process whose identity
was captured when its pid was first seen; the outcome is recorded and
published as :class:`~monitor.updates.ActionFinished`.  Automatic responses
(``[control] auto_inject``/``auto_kill``) go the same way, as ``AUTO_WHO``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from monitor.control import control_message, suspend, terminate
from monitor.detect.base import Detection
from monitor.events import Event, Kind, Level
from monitor.hub.false_positives import pairs_for, remember
from monitor.hub.pausing import carry_out
from monitor.updates import ActionFinished, ActionRecord, SessionChanged

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.detect.engine import Engine
    from monitor.detect.episodes import EpisodeChange
    from monitor.detect.summary import SessionSummary
    from monitor.hub.guard import Guard
    from monitor.hub.recording import Recorder
    from monitor.hub.sessions import Lifecycle
    from monitor.hub.snapshots import Snapshots
    from monitor.hub.state import HubSession

log = logging.getLogger("loopwatch.hub")


class ActionsHub(Protocol):
    """What :class:`Actions` uses of the :class:`~monitor.hub.core.Hub` (which
    passes itself): declared here so that this module need not import the hub's."""

    config: Config
    store: Any
    clock: Callable[[], float]
    engine: Engine
    lifecycle: Lifecycle
    snapshots: Snapshots
    recorder: Recorder
    problems_total: int
    guard: Guard

    def wants_sessions(self) -> bool: ...

    def publish(self, update: object) -> None: ...

    def touch(self, state: HubSession) -> None: ...

    def episodes_changed(self, changes: Sequence[EpisodeChange]) -> None: ...


ACTION_KINDS = ("ack", "inject", "kill", "false_positive", "mute", "pause", "resume", "guard")
AUTO_WHO = "loopwatch (auto)"
#: How a delivered mute's outcome ends (what precedes it names the detector: monitor/hub/seeding.py).
MUTED = " muted for this session"
#: Auto-responses only answer detections this recent (not replayed history).
AUTO_MAX_AGE_SECONDS = 60.0
#: Calls or assistant replies in a row, after a nudge, without a warning: the loop stopped.
RECOVERY_STEPS = 5
#: Events before a detection's first cited one that still count as part of
#: what it saw (detectors' windows are longer than the evidence they cite).
OTLP_MARGIN = 64


class Actions:
    """Carries out the hub's actions; :meth:`Hub.act` is the way in."""

    def __init__(self, hub: ActionsHub):
        self.hub = hub
        self.running: set[asyncio.Task] = set()
        self._next_id = 0  # without a store: numbered here (negative: could not be recorded)

    async def act(
        self,
        kind: str,
        session: str,
        *,
        text: str | None,
        detection: Detection | None,
        detector: str | None,
        who: str,
    ) -> ActionRecord:
        if kind not in ACTION_KINDS:
            raise ValueError(f"unknown action {kind!r} (expected one of: {', '.join(ACTION_KINDS)})")
        hub = self.hub
        store = hub.store
        state = hub.lifecycle.sessions.get(session)
        summary = hub.engine.summary(session)
        if kind == "inject" and not text:
            text = (detection.nudge if detection is not None else "") or summary.nudge
        if kind == "false_positive" and detection is None and state is not None:
            detection = _pick_detection(state, summary, detector)
        if kind == "mute" and detector is None:
            detector = detection.detector if detection is not None else summary.detector
        detail = detector or (detection.detector if detection is not None else "") or ""
        ts = hub.clock()
        # What a false positive marks is recorded with it (a restart marks it again).
        pairs = pairs_for(hub.engine, detection) if kind == "false_positive" and detection else ()
        # Nothing acknowledged is lost: the action is committed before it is carried out.
        begun = await self._begin(kind, session, text, who, detail, ts, pairs)
        if isinstance(begun, ActionRecord):
            return begun  # not recorded, so not carried out
        action_id = begun
        try:
            status, outcome_detail = await self._carry_out(
                kind, session, state, text, detection, detector, auto=who == AUTO_WHO
            )
        except Exception as exc:
            log.exception("action %s on %s failed", kind, session)
            status, outcome_detail = "failed", f"{type(exc).__name__}: {exc}"
        if pairs and status == "delivered" and state is not None:
            remember(state, pairs, ts)
        if store is not None:
            try:
                await asyncio.to_thread(store.finish_action, action_id, status, outcome_detail)
            except Exception:
                log.exception("could not record the outcome of action %s", action_id)
        record = ActionRecord(action_id, kind, session, text, ts, who, status, outcome_detail)
        if state is not None:
            hub.touch(state)
            hub.recorder.session_now(state)
            if hub.wants_sessions():
                hub.publish(SessionChanged(hub.snapshots.info(state)))
        hub.publish(ActionFinished(record))
        return record

    async def _begin(
        self,
        kind: str,
        session: str,
        text: str | None,
        who: str,
        detail: str,
        ts: float,
        pairs: Sequence[tuple[str, str]] = (),
    ) -> int | ActionRecord:
        """The action's id once it is recorded, or (when it cannot be) its failed record, published."""
        hub = self.hub
        store = hub.store
        if store is not None:
            try:
                # The store commits durably (fsync) before returning: off the loop.
                if pairs:
                    return await asyncio.to_thread(
                        store.begin_action, kind, session, text, who, detail, pairs=pairs
                    )
                return await asyncio.to_thread(store.begin_action, kind, session, text, who, detail)
            except Exception as exc:
                log.exception("could not record action")
                self._next_id -= 1
                record = ActionRecord(
                    self._next_id,
                    kind,
                    session,
                    text,
                    ts,
                    who,
                    "failed",
                    f"not carried out: could not record it ({exc})",
                )
                hub.publish(ActionFinished(record))
                return record
        else:
            self._next_id += 1
            return self._next_id

    async def _carry_out(
        self,
        kind: str,
        session: str,
        state: HubSession | None,
        text: str | None,
        detection: Detection | None,
        detector: str | None,
        auto: bool = False,
    ) -> tuple[str, str]:
        if state is None:
            return "failed", f"unknown session {session!r}"
        gone = _gone(state)
        if gone and kind in ("inject", "kill", "pause"):
            return "refused", gone
        hub = self.hub
        engine = hub.engine
        if kind == "ack":
            return await self._acknowledge(state, detection)
        if kind == "inject":
            if not text:
                return "failed", "nothing to inject: no text given and the session has no current nudge"
            if state.channel is None:
                return "unsupported", (
                    f"this {state.origin} session has no control channel (only socket "
                    "sessions, hook sessions and native-format log files can be reached)"
                )
            status, detail = await self._send(state, "inject", text=text)
            if status == "delivered" and hub.recorder.level(session) >= Level.WARN:
                state.nudged = state.last_ts or hub.clock()
                state.steps_since_nudge = 0
            return status, detail
        if kind == "kill":
            return await self._kill(state, auto=auto)
        if kind in ("pause", "resume", "guard"):
            return await carry_out(self.hub, kind, state, text)
        if kind == "false_positive":
            return self._false_positive(detection)
        # mute
        if not detector:
            return "failed", "no detector named to mute"
        engine.mute(session, detector)  # (a closed session keeps it when revived)
        return "delivered", f"{detector}{MUTED}"

    async def _acknowledge(self, state: HubSession, detection: Detection | None) -> tuple[str, str]:
        hub = self.hub
        # Escalation runs on event time: the cool-down starts at the session's latest event.
        hub.episodes_changed(hub.engine.acknowledge(state.id, state.last_ts))
        state.guarded = None  # acknowledged: the guard waits for the loop to be flagged again
        state.nudged = 0.0
        state.auto_done = {key for key in state.auto_done if key[0] != "inject"}
        if state.channel is None:
            return "delivered", "acknowledged in loopwatch (the session has no channel to tell the agent)"
        extra = {"detector": detection.detector, "pattern": detection.pattern} if detection else {}
        status, detail = await self._send(state, "ack", **extra)
        if status != "delivered":  # the acknowledgement itself took effect here regardless
            return "delivered", f"acknowledged in loopwatch; telling the agent failed: {detail}"
        return status, detail

    def _false_positive(self, detection: Detection | None) -> tuple[str, str]:
        """The whole loop episode of ``detection``, whichever detectors joined it."""
        if detection is None:
            return "failed", "no detection to mark as a false positive"
        closed = self.hub.engine.mark_false_positive(detection)
        self.hub.episodes_changed(closed)
        others = [d for d in closed[0].episode.detectors if d != detection.detector] if closed else []
        also = f" (and {', '.join(others)}, which saw the same loop)" if others else ""
        return "delivered", (
            f"{detection.detector}{also} no longer flags this in this session: {_cut(detection.message, 120)}"
        )

    async def _send(self, state: HubSession, kind: str, **fields: Any) -> tuple[str, str]:
        outcome = await state.channel.send(control_message(kind, state.id, **fields))
        return outcome.status, outcome.detail

    async def _kill(self, state: HubSession, auto: bool = False) -> tuple[str, str]:
        claim = state.claim
        if claim is not None:
            reason = claim.refusal()
            if reason is not None:
                return "refused", reason
        if claim is None or (auto and not claim.confirmed):
            reason = state.kill_reason
            if claim is not None:  # auto_kill and a claim the agent did not confirm
                reason = (
                    f"auto_kill signals only a pid the agent confirmed itself (socket peer "
                    f"credentials or a hook); pid {claim.identity.pid} is named by "
                    f"{claim.log_path or 'a record'} only"
                )
            if state.channel is not None:
                status, detail = await self._send(state, "kill")
                return status, f"{reason}; asked the agent to stop instead: {detail}"
            return "refused", reason
        if state.channel is not None:  # tell the agent why, best effort, before the signal
            try:
                await asyncio.wait_for(self._send(state, "kill"), 1.0)
            except Exception:
                pass
        if state.paused:  # a stopped process cannot act on SIGTERM: let it run to handle it
            await suspend(claim.identity, False)
            state.paused = 0.0
        outcome = await terminate(claim.identity, grace=self.hub.config.control.kill_grace_seconds)
        return outcome.status, outcome.detail

    def unreachable(self, session: str) -> str:
        """Why nothing sent to this session can reach its agent any more ("" while it can)."""
        state = self.hub.lifecycle.sessions.get(session)
        return _gone(state) if state is not None else ""

    def kill_refusal(self, session: str) -> str:
        """Why a kill cannot be carried out now, checked afresh ("" when it can: a verified
        process, or an agent that can be asked over its channel)."""
        state = self.hub.lifecycle.sessions.get(session)
        if state is None:
            return f"unknown session {session!r}"
        if _gone(state):
            return _gone(state)
        if state.claim is not None:
            return state.claim.refusal() or ""
        return "" if state.channel is not None else state.kill_reason

    def describe_kill(self, session: str) -> str:
        state = self.hub.lifecycle.sessions.get(session)
        if state is None:
            return f"unknown session {session!r}"
        grace = self.hub.config.control.kill_grace_seconds
        if state.claim is not None:
            reason = state.claim.refusal()
            if reason is None:
                checks = "\n".join(f"  {fact}" for fact in state.claim.verified())
                return (
                    f"SIGTERM {state.claim.identity.describe()}, then SIGKILL after {grace:g} s\n"
                    f"Verified:\n{checks}"
                )
            return reason
        if state.channel is not None:
            return (
                f"{state.kill_reason}; a kill request will be sent to the agent "
                f"over its {state.channel.name} channel"
            )
        return state.kill_reason

    def follow_nudge(self, state: HubSession, event: Event, detections: Sequence[Detection]) -> None:
        """Count the agent's steps since a nudge; enough without a warning: it recovered."""
        if any(d.level >= Level.WARN and not d.suppressed for d in detections):
            state.steps_since_nudge = 0  # still looping
            return
        if event.kind is Kind.TOOL_CALL or (event.kind is Kind.MESSAGE and event.role == "assistant"):
            state.steps_since_nudge += 1
            if state.steps_since_nudge >= RECOVERY_STEPS:
                state.nudged = 0.0
                self.hub.episodes_changed(self.hub.engine.recover(state.id, RECOVERY_STEPS))
                self.hub.recorder.session_now(state)  # history says so now, not at the next tick

    # -- automatic responses ------------------------------------------------------------

    def auto_respond(self, detection: Detection) -> None:
        hub = self.hub
        control = hub.config.control
        if not (control.auto_inject or control.auto_kill) or detection.suppressed:
            return
        if detection.level < Level.WARN or hub.clock() - detection.ts > AUTO_MAX_AGE_SECONDS:
            return  # replayed history: the agent is not waiting for an answer now
        state = hub.lifecycle.sessions.get(detection.session)
        if state is None or state.status != "live":
            return
        if _from_otlp(detection, state):
            self._skip_otlp(state)
            return
        if control.auto_kill and detection.level >= Level.TERMINATE:
            key: tuple = ("kill",)
            if key not in state.auto_done:
                state.auto_done.add(key)
                self._spawn(
                    self.act("kill", state.id, text=None, detection=detection, detector=None, who=AUTO_WHO)
                )
            return
        if control.auto_inject and detection.nudge:
            # One nudge per rung the session reaches (several detectors may flag
            # the same loop); an acknowledgement re-arms it.
            key = ("inject", int(detection.level))
            if key not in state.auto_done:
                state.auto_done.add(key)
                self._spawn(
                    self.act(
                        "inject",
                        state.id,
                        text=detection.nudge,
                        detection=detection,
                        detector=None,
                        who=AUTO_WHO,
                    )
                )

    def _skip_otlp(self, state: HubSession) -> None:
        """Say once per session that its automatic actions were skipped, and why."""
        if state.auto_skipped:
            return
        state.auto_skipped = True
        from monitor.formats.base import Problem
        from monitor.updates import ProblemReported

        self.hub.problems_total += 1
        self.hub.publish(
            ProblemReported(
                Problem(
                    state.source,
                    None,
                    f"session {state.id}: no automatic action: the loop's evidence includes OTLP "
                    "records, which do not prove who sent them (act from the dashboard if it is real)",
                )
            )
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.running.add(task)
        task.add_done_callback(self.running.discard)


def _pick_detection(state: HubSession, summary: SessionSummary, detector: str | None) -> Detection | None:
    """The detection an operator means: the one that set the level, else the latest (of ``detector``)."""
    candidates = [summary.detection, *reversed(summary.recent)]
    candidates += [state.latest.get(detector) if detector else None, state.last_detection]
    for candidate in candidates:
        if candidate is not None and (detector is None or candidate.detector == detector):
            return candidate
    return None


def _from_otlp(detection: Detection, state: HubSession) -> bool:
    """Whether OTLP records are part of what ``detection`` saw.

    OTLP carries no proof of who sent a record: any local user (or anyone
    holding the token) can post records for any session id, a hook- or
    socket-proven one included.  So a detection citing an OTLP event, or
    whose cited span comes within :data:`OTLP_MARGIN` events of the latest
    OTLP event the session kept (a detector counts more than it cites),
    never drives an automatic action; with no evidence cited, any OTLP
    event in the session is enough."""
    cited = detection.evidence
    if any(ref.source.startswith("otlp:") for ref in cited):
        return True
    if not state.otlp_seq:
        return False
    first = min((ref.seq for ref in cited if ref.seq), default=0)
    return state.otlp_seq >= first - OTLP_MARGIN


def _gone(state: HubSession) -> str:
    """Why nothing sent to ``state``'s session can reach its agent any more ("" while it can)."""
    if state.status == "ended":
        return "the session has ended: nobody would read a message, and there is no process to stop"
    if state.status == "stopped":
        return "its watcher has stopped: loopwatch no longer hears from this session"
    return ""


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, ending in "…" when it was cut (shown in a toast)."""
    return text if len(text) <= width else text[: width - 1] + "…"
