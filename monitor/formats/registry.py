"""The line formats in sniffing order, and how a record finds its format.

Adapters register themselves with :func:`register_line_format` when
:mod:`monitor.formats` imports them; they import this module, not the
package, so that nothing imports its own importer.
"""

from __future__ import annotations

from typing import Any

from monitor.formats.base import RecordDecoder
from monitor.formats.native import NativeDecoder

#: Line formats in sniffing order; adapters register themselves here.
LINE_FORMATS: dict[str, type[RecordDecoder]] = {"native": NativeDecoder}


def register_line_format(cls: type[RecordDecoder]) -> type[RecordDecoder]:
    LINE_FORMATS[cls.name] = cls
    return cls


def sniff(record: dict[str, Any]) -> type[RecordDecoder] | None:
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
