"""Claude Code log events besides calls, prompts, usage and compactions.

Field names as code.claude.com/docs/en/monitoring-usage documents them:

* ``assistant_response`` (v2.1.193+): ``response`` is the model's text, logged
  with ``OTEL_LOG_ASSISTANT_RESPONSES=1`` (unset: as ``OTEL_LOG_USER_PROMPTS``),
  else ``<REDACTED>``: an assistant message, or nothing when redacted (an
  empty message would only look like a silent turn);
* ``api_error`` (``error``, ``status_code``, ``attempt``) and
  ``api_retries_exhausted`` (``error``, ``status_code``, ``total_attempts``):
  system messages, as Claude Code's transcripts record API errors;
* ``subagent_completed`` (``agent_type``, ``total_tool_uses``,
  ``duration_ms``): a system message saying which subagent finished.
"""

from __future__ import annotations

from typing import Any

from monitor.formats.otlp_spans import REDACTED

#: The event names (without ``claude_code.``) this module reads.
EVENTS = ("assistant_response", "api_error", "api_retries_exhausted", "subagent_completed")


def _status(attrs: dict[str, Any]) -> str:
    code = attrs.get("status_code")
    return f" {code}" if code not in (None, "") else ""


def records(name: str, attrs: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The native records of one of :data:`EVENTS` (``base``: session and time)."""
    if name == "assistant_response":
        text = attrs.get("response")
        if not isinstance(text, str) or not text or text == REDACTED:
            return []
        return [{"type": "message", **base, "role": "assistant", "content": text}]
    error = attrs.get("error")
    error = error if isinstance(error, str) else ""
    if name == "api_error":
        attempt = attrs.get("attempt")
        tried = f" (attempt {attempt})" if attempt not in (None, "") else ""
        text = f"API error{_status(attrs)}{tried}: {error}".rstrip(": ")
        return [{"type": "message", **base, "role": "system", "content": text, "otel_event": name}]
    if name == "api_retries_exhausted":
        attempts = attrs.get("total_attempts")
        after = f" after {attempts} attempts" if attempts not in (None, "") else ""
        text = f"API retries exhausted{after}{_status(attrs)}: {error}".rstrip(": ")
        return [{"type": "message", **base, "role": "system", "content": text, "otel_event": name}]
    if name == "subagent_completed":
        agent = attrs.get("agent_type") or "subagent"
        uses, ms = attrs.get("total_tool_uses"), attrs.get("duration_ms")
        detail = ", ".join(
            part
            for part in (
                f"{uses} tool uses" if uses not in (None, "") else "",
                f"{ms} ms" if ms not in (None, "") else "",
            )
            if part
        )
        text = f"subagent {agent} completed" + (f" ({detail})" if detail else "")
        return [{"type": "message", **base, "role": "system", "content": text, "otel_event": name}]
    return []


__all__ = ["EVENTS", "records"]
