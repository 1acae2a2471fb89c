"""How much memory the engine holds for one session (for tests and benchmarks).

:func:`deep_size` walks an object graph with ``gc.get_referents`` and adds up
``sys.getsizeof`` of everything reachable, skipping what is shared by all
sessions (classes, modules, functions, enum members, detector settings, the
config) so that the number is what *this* session costs.  Bound methods are
counted (the engine keeps one per detector of the session), not the functions
they bind.
:func:`session_footprint` applies it to the engine's per-session state and the
session's escalation state, broken down by part and by detector.  What the
engine's global detectors (one for all sessions) remember about the session is
not in it: they are measured on their own.
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterable
from enum import Enum
from typing import Any

from monitor.detect.base import DetectorSettings, ToolOverride

_SHARED_TYPES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    Enum,
    DetectorSettings,
    ToolOverride,
)


def deep_size(root: Any, exclude: Iterable[Any] = ()) -> int:
    """Bytes reachable from ``root``, each object counted once, shared objects skipped."""
    seen = {id(obj) for obj in exclude}
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SHARED_TYPES) or obj is None:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def session_footprint(engine: Any, session: str) -> dict[str, int]:
    """Bytes held for ``session``: ``total`` (every object once), ``engine`` (its
    state but the detectors), ``escalation``, and one entry per detector
    (``detector:<name>``).  An object held by two parts (an event in a
    detector's window and in the engine's pending calls) is in both: the parts
    may add up to more than ``total``."""
    state = engine.sessions[session]
    shared = [
        engine.config,
        engine.config.tool_overrides,
        *engine.global_detectors,
        state.global_detectors,
    ]
    out: dict[str, int] = {}
    for detector in state.detectors:
        out[f"detector:{detector.name}"] = deep_size(detector, exclude=shared)
    escalation = engine.policy.sessions.get(session)
    out["escalation"] = deep_size(escalation, exclude=shared) if escalation is not None else 0
    out["engine"] = deep_size(state, exclude=[*shared, *state.detectors, escalation])
    out["total"] = deep_size((state, escalation), exclude=shared)
    return out
