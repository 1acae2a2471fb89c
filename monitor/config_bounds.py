"""Bounds on configuration values, and nudge templates checked before a run starts.

A setting that passes the type check can still break a run: ``flush_ms`` of
2^63 stops the store's writer, ``max_connections = 0`` refuses every agent,
``nan`` compares false with everything, and a nudge template ``'{0}'`` or
``'{summary.__class__}'`` fails (or reaches into Python objects) at the first
warning.  :func:`check_number` and :func:`check_template` turn those into
config errors naming the key, at load time.
"""

from __future__ import annotations

import math
import string

#: Any integer setting: beyond this it is a typo, and some become timeouts that overflow.
INT_MAX = 2**31 - 1
#: ``section.key``: (lowest, highest) allowed; other numbers need only be finite and >= 0.
BOUNDS: dict[str, tuple[float, float]] = {
    "store.flush_ms": (0, 60_000),
    "store.batch_size": (1, 100_000),
    "export.otlp_queue": (1, 100_000),
    "store.content_chars": (0, 10_000_000),
    "store.full_disk_close_seconds": (0, 3600),
    "sources.max_line_bytes": (1024, 1 << 30),
    "sources.max_connections": (1, 65_536),
    "sources.max_unauthenticated": (1, 65_536),
    "sources.preauth_bytes": (1024, 1 << 24),
    "sources.hello_timeout_seconds": (0.1, 3600),
    # A week: past that a wait is not noticed, it is forgotten.
    "sources.waiting_notice_seconds": (0, 7 * 86400),
    "ui.refresh_hz": (0.1, 120),
    "control.kill_grace_seconds": (0, 3600),
    "alerts.timeout_seconds": (0.1, 600),
    "alerts.retries": (0, 10),
    "alerts.every_seconds": (0, 86_400),
    # A count of one is every failure; a window past a thousand rounds is no longer "recent".
    "detectors.stale_outcome.threshold": (2, 1000),
    "detectors.stale_outcome.window": (2, 1000),
    "detectors.stale_outcome.span": (2, 1000),
    "detectors.stale_outcome.in_a_row": (2, 1000),
    "detectors.stale_outcome.empty_threshold": (2, 1000),
    "detectors.stale_outcome.answer_threshold": (0, 1000),
    "detectors.stale_outcome.place_threshold": (0, 1000),
    "detectors.stale_outcome.name_threshold": (0, 1000),
    # 0 turns the passage rule off; one copy is no repetition.
    "detectors.chanting.passage_repeats": (0, 1000),
    "detectors.chanting.passage_chars": (1, 100_000),
}
#: The fields a nudge template may name (docs/detectors.md, "Nudges").
NUDGE_FIELDS = ("summary", "advice", "tool", "count", "pattern", "pattern_short", "detector", "message")
#: What a template is formatted with at load time, to find a format spec that cannot apply.
_SAMPLE = {
    "summary": "called bash 3 times with the same arguments",
    "advice": "try something else",
    "tool": "bash",
    "count": 3,
    "pattern": "call:3f2a",
    "pattern_short": "bash",
    "detector": "exact_repeat",
    "message": "bash called 3 times with identical arguments",
}


class BoundsError(ValueError):
    """A value out of its bounds (the message names the key)."""


def check_number(key: str, value: float) -> None:
    """Raise :class:`BoundsError` for nan, infinity, or a value outside ``key``'s bounds."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BoundsError(f"{key}: must be a finite number, got {value!r}")
    if isinstance(value, int) and value > INT_MAX:
        raise BoundsError(f"{key}: must be at most {INT_MAX:,}, got {value!r}")
    low, high = BOUNDS.get(key, (0, math.inf))
    if not low <= value <= high:
        raise BoundsError(f"{key}: must be between {low:g} and {high:g}, got {value!r}")


def check_template(key: str, template: str) -> None:
    """Only ``{name}`` fields of :data:`NUDGE_FIELDS` (no positions, attributes or
    indexes), and formatting a sample must work."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise BoundsError(f"{key}: not a valid template ({exc}); write {{{{ and }}}} for braces") from None
    for _text, name, spec, _conversion in fields:
        if name is None:
            continue
        if name not in NUDGE_FIELDS:
            raise BoundsError(
                f"{key}: {{{name}}} is not a field a nudge can use (use {', '.join('{' + f + '}' for f in NUDGE_FIELDS)}; "
                "write {{ and }} for braces)"
            )
        if spec and "{" in spec:
            raise BoundsError(f"{key}: {{{name}:{spec}}}: a format spec cannot hold another field")
    try:
        template.format_map(_SAMPLE)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise BoundsError(f"{key}: the template cannot be formatted ({exc})") from None
