"""A paused session's stopped time is not the agent's, for detection.

``p`` stops a session's process (SIGSTOP) until it is resumed; meanwhile the
agent can make no call.  What a wait is measured from (the latest call's time,
:mod:`~monitor.detect.analysis.waits`) moves on by the pause, as it does for
the person's time (:func:`~monitor.detect.input_wait.unhold`): the ``waiting``
budget and the repeat detectors' 20 s gap leave the pause out.
"""

from __future__ import annotations

from typing import Any


def paused(engine: Any, session_id: str, since: float, until: float) -> None:
    """The session's process was stopped from ``since`` to ``until`` (the hub's clock)."""
    state = engine.sessions.get(session_id)
    view = state.view if state is not None else None
    if view is not None and until > since and view.last_call_ts and view.last_call_ts <= since:
        view.last_call_ts = min(view.last_call_ts + (until - since), until)
