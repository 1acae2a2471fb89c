"""Format adapters: every supported log format, auto-detected per file.

Line formats (one JSON record per line) are decoded by a
:class:`~monitor.formats.base.RecordDecoder` chosen from the first valid record
of a file; whole-document formats (trajectories) by :func:`load_document`.
"""

from __future__ import annotations

from monitor.formats.base import Problem, RecordDecoder, RecordError
from monitor.formats.native import NativeDecoder

#: Line formats in sniffing order; adapters register themselves here.
LINE_FORMATS: dict[str, type[RecordDecoder]] = {"native": NativeDecoder}


def register_line_format(cls: type[RecordDecoder]) -> type[RecordDecoder]:
    LINE_FORMATS[cls.name] = cls
    return cls


def sniff(record: dict) -> type[RecordDecoder] | None:
    """The line format ``record`` belongs to, or ``None``."""
    for cls in LINE_FORMATS.values():
        try:
            if cls.sniff(record):
                return cls
        except Exception:  # e.g. {"type": []}: unhashable; bad input must not raise
            continue
    return None


def format_names() -> list[str]:
    return sorted(LINE_FORMATS)


__all__ = [
    "LINE_FORMATS",
    "NativeDecoder",
    "Problem",
    "RecordDecoder",
    "RecordError",
    "format_names",
    "register_line_format",
    "sniff",
]

# Adapters register themselves on import; they come last because they import
# ``register_line_format`` from this module.
from monitor.formats import claude as _claude  # noqa: E402,F401
from monitor.formats import codex as _codex  # noqa: E402,F401
from monitor.formats import chat as _chat  # noqa: E402,F401
