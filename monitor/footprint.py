"""How much memory the engine holds for one session (for tests and benchmarks).

:func:`deep_size` walks an object graph with ``gc.get_referents`` and adds up
``sys.getsizeof`` of everything reachable, skipping what is shared by all
sessions (classes, modules, functions, enum members, detector settings, the
config) so that the number is what *this* session costs.
:func:`session_footprint` applies it to the engine's per-session state and the
session's escalation state, broken down by part and by detector.
"""

from __future__ import annotations

import gc
import sys
import types
from enum import Enum
from typing import Any, Iterable

from monitor.detect.base import DetectorSettings, ToolOverride

_SHARED_TYPES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                 types.MethodType, types.CodeType, Enum, DetectorSettings, ToolOverride)


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
    """Bytes held for ``session``: ``total``, ``engine`` (its state without detectors),
    ``escalation``, and one entry per detector (``detector:<name>``)."""
    state = engine.sessions[session]
    shared = [engine.config, engine.config.tool_overrides, *engine.global_detectors]
    out: dict[str, int] = {}
    detector_bytes = 0
    for detector in state.detectors:
        size = deep_size(detector, exclude=shared)
        out[f"detector:{detector.name}"] = size
        detector_bytes += size
    escalation = engine.policy.sessions.get(session)
    out["escalation"] = deep_size(escalation, exclude=shared) if escalation is not None else 0
    # The whole state once (events referenced by several parts are counted once).
    whole = deep_size((state, escalation), exclude=shared)
    out["engine"] = max(0, whole - detector_bytes - out["escalation"])
    out["total"] = whole
    return out
