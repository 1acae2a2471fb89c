"""Waits for the person in agents' OpenTelemetry: what the telemetry says of them, and when.

Neither agent logs an event when it *starts* waiting for a permission
decision; what exists says so once the person has answered:

* **Claude Code log event** ``tool_decision`` (``tool_name``,
  ``tool_use_id``, ``decision`` ``accept``/``reject``, ``source``;
  code.claude.com/docs/en/monitoring-usage): a ``source`` of
  ``user_temporary``, ``user_permanent``, ``user_reject`` or ``user_abort``
  means the person was asked and answered at the event's time.  A
  ``waiting`` record with status ``resolved``: it ends a wait a hook opened
  (``PermissionRequest``), and says in the history who decided.  ``config``
  and ``hook`` decisions asked nobody: nothing.
* **Codex log event** ``codex.tool_decision`` (``tool_name``, ``call_id``,
  ``decision``, ``source`` ``config``/``user``/``automated_reviewer``;
  codex-rs/otel/src/events/session_telemetry.rs): the same for ``user``.
* **Codex log events** ``codex.plugin_install_elicitation_sent``
  (``plugin_install.tool_type``, ``.tool_id``, ``.tool_name``: an
  elicitation asking the person to install a plugin or connector was
  dispatched) and ``codex.plugin_install_suggestion`` (``.response_action``,
  ``.user_confirmed``: its outcome): the one wait whose start Codex logs, an
  ``elicitation`` until the outcome.
* **Claude Code span** ``claude_code.tool.blocked_on_user`` (a child of
  ``claude_code.tool``; ``duration_ms``, ``decision``, ``source``): the wait
  itself, from its start to the decision.  Exported when it ends, so it says
  after the fact that the session waited: a ``waiting`` record (status
  ``permission``) at its start and a ``resolved`` one at its end, so the
  person's time is not counted as the agent's (:func:`~monitor.detect.input_wait.unhold`)
  and the history shows the wait where it was.  A span whose ``source`` is
  no person (a rule, a hook, ``-p`` without anyone) is no wait: nothing.

Live, a permission prompt is therefore seen while it waits only through the
hooks (``PermissionRequest``, ``Notification``; :mod:`monitor.hooks`).
"""

from __future__ import annotations

import math
from typing import Any

#: Claude Code's span of the time a call waited for the person's permission.
CLAUDE_BLOCKED = "claude_code.tool.blocked_on_user"
#: The log event (without ``claude_code.`` / ``codex.``) of a permission decision.
DECISION = "tool_decision"
#: Codex's log events (without ``codex.``) of a plugin install elicitation: sent, answered.
CODEX_ELICITED = "plugin_install_elicitation_sent"
CODEX_ANSWERED = "plugin_install_suggestion"
#: The log events (without their agent's prefix) this module reads.
CODEX_EVENTS = (DECISION, CODEX_ELICITED, CODEX_ANSWERED)
#: What is kept of the decision's description (characters).
MAX_TEXT = 300


def by_the_person(source: Any) -> bool:
    """Whether a decision ``source`` is the person's (Claude Code ``user_*``, Codex ``user``/``User``)."""
    return isinstance(source, str) and (source.lower() == "user" or source.lower().startswith("user_"))


def _said(attrs: dict[str, Any]) -> str:
    tool = attrs.get("tool_name")
    decision = attrs.get("decision")
    what = f"{tool}: " if isinstance(tool, str) and tool else ""
    told = decision if isinstance(decision, str) and decision else "decided"
    return f"{what}{told} by the user ({attrs.get('source')})"[:MAX_TEXT]


def decision_records(attrs: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``tool_decision`` log event's records: the person's decision ends the wait; [] for others."""
    if not by_the_person(attrs.get("source")):
        return []
    return [{"type": "waiting", **base, "status": "resolved", "content": _said(attrs)}]


def elicitation_records(name: str, attrs: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Codex's plugin install elicitation: a wait for the person when sent, over at its outcome."""
    kind = attrs.get("plugin_install.tool_type")
    tool = attrs.get("plugin_install.tool_name") or attrs.get("plugin_install.tool_id")
    what = " ".join(str(part) for part in (kind, tool) if isinstance(part, str) and part) or "a plugin"
    if name == CODEX_ELICITED:
        asks = f"install {what}?"[:MAX_TEXT]
        return [{"type": "waiting", **base, "status": "elicitation", "content": asks}]
    action = attrs.get("plugin_install.response_action")
    told = f"{what}: {action}" if isinstance(action, str) and action else what
    return [{"type": "waiting", **base, "status": "resolved", "content": told[:MAX_TEXT]}]


def blocked_records(span: Any, attrs: dict[str, Any], session: str) -> list[dict[str, Any]]:
    """A ``claude_code.tool.blocked_on_user`` span's records: the wait from its start to the
    decision at its end; [] when nobody was asked."""
    if not by_the_person(attrs.get("source")):
        return []
    start = span.start_time_unix_nano / 1e9
    end = span.end_time_unix_nano / 1e9 if span.end_time_unix_nano else 0.0
    if end < start:  # an unended span: its duration says when the decision came
        try:
            ms = float(attrs.get("duration_ms") or 0.0)
        except (TypeError, ValueError, OverflowError):
            ms = 0.0
        end = start + (ms / 1000.0 if math.isfinite(ms) and ms > 0 else 0.0)
    tool = attrs.get("tool_name")
    asks = f"{tool}: a permission prompt" if isinstance(tool, str) and tool else "a permission prompt"
    return [
        {"type": "waiting", "session": session, "ts": start, "status": "permission", "content": asks},
        {"type": "waiting", "session": session, "ts": end, "status": "resolved", "content": _said(attrs)},
    ]


__all__ = [
    "CLAUDE_BLOCKED",
    "CODEX_EVENTS",
    "DECISION",
    "blocked_records",
    "by_the_person",
    "decision_records",
    "elicitation_records",
]
