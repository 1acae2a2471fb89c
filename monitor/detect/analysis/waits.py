"""Waits: whether a tool call was made after an explicit wait, or only waits.

A call is *waited* when it comes after an explicit wait: a ``sleep`` in its
own command, a ``timeout``/``wait`` argument of a tool that is not a shell (a
shell tool's ``timeout`` caps the command), a call before it that did
nothing but wait (``sleep 60``), or a real gap of :data:`WAIT_GAP` seconds or
more since the same call was made just before it.  The engine's enrichment
stage runs :func:`mark` on every call before the detectors see it; they ask
:func:`waited` and :func:`wait_only` (see detectors/waiting.py for what
the repeat detectors and the waiting budget do with it).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from monitor.detect.analysis import shell
from monitor.detect.analysis.memo import TextMemo
from monitor.events import Event
from monitor.text import call_key, canonical_args

if TYPE_CHECKING:
    from monitor.detect.base import SessionView

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


def _arg_wait(args: dict[str, Any] | None) -> float:
    if not args:
        return 0.0
    for key in WAIT_KEYS:
        value = args.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return value / 1000.0 if key.endswith("_ms") else float(value)
    return 0.0


def only_waits(call: Event) -> float:
    """The seconds a call does nothing but wait (``sleep 60``, a wait tool), else 0."""
    command = shell.shell_command(call)
    if command is not None:
        segments = shell.segments(command)
        if segments and all(s.split(None, 1)[0] == "sleep" for s in segments):
            return _sleeps(command) or 0.0
        return 0.0
    if (call.tool or "").lower() in _WAIT_TOOLS:
        return _arg_wait(call.args) or 1.0
    return 0.0


_WAIT_KEY_SET = frozenset(WAIT_KEYS)
#: Arguments that give a call a command line (see ``shell_command``) or a wait.
_MARKING_KEYS = _WAIT_KEY_SET | shell.COMMAND_KEY_SET


def _plain_tool(tool: str | None) -> bool:
    """Whether a tool's calls can only wait by their arguments (neither a
    shell, which runs commands, nor a wait tool)."""
    return not shell.tool_kind(tool).shell and (tool or "").lower() not in _WAIT_TOOLS


#: :func:`_plain_tool` by tool name (names repeat).
_PLAIN_TOOLS = TextMemo(256, 4096, _plain_tool)


def mark(call: Event, view: SessionView) -> None:
    """Mark ``call`` as waited (its ``waited`` fact: the seconds) when it comes
    after an explicit wait or only waits; remember a call that only waits, and
    the call's time, for the next one.  Run by the engine on every call,
    before the detectors."""
    last = view.last_call_ts
    view.last_call_ts = call.ts
    elapsed = call.ts - last if last else 0.0
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
    waited, pure = _waits(call, view, elapsed)
    if waited or pure:
        call.facts.waited = waited or pure
        if pure:
            call.facts.wait_only = True
    view.last_wait = pure


def _waits(call: Event, view: SessionView, elapsed: float) -> tuple[float, float]:
    """The seconds waited before ``call``, and those it does nothing but wait."""
    # (The previous call's key is the one the call detectors computed; the
    # engine keeps it after they ran.  Computed here only for a long gap.)
    gap = (
        elapsed
        if elapsed >= WAIT_GAP and view.last_call_key and call_key(call) == view.last_call_key
        else 0.0
    )
    command = shell.shell_command(call)
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
    return waited, pure


def waited(call: Event) -> float:
    """The seconds waited before ``call`` (see :func:`mark`), 0 when it was not waited."""
    return call.facts.waited or 0.0


def wait_only(call: Event) -> bool:
    """Whether ``call`` does nothing but wait (see :func:`mark`)."""
    return bool(call.facts.wait_only)


def asked(call: Event) -> str:
    """What ``call`` asks, however long it waits first: its :func:`~monitor.text.call_key`
    without the wait arguments of a tool that is not a shell (``read_background_output``
    of one pid with ``delay_ms`` 5000, 10000 or none asks one thing: the job's output, now).
    A shell tool's ``timeout`` caps its command and stays."""
    args = call.args
    if not args or _WAIT_KEY_SET.isdisjoint(args) or not _PLAIN_TOOLS[call.tool]:
        return call_key(call)
    return f"{call.tool}:{canonical_args({k: v for k, v in args.items() if k not in _WAIT_KEY_SET})}"
