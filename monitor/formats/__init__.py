"""Format adapters: every supported log format, auto-detected per file.

Line formats (one JSON record per line) are decoded by a
:class:`~monitor.formats.base.RecordDecoder` chosen from the first valid record
of a file (:mod:`monitor.formats.registry`); whole-document formats
(trajectories) by :func:`monitor.formats.documents.load`.
"""

from __future__ import annotations

from monitor.formats import chat as _chat  # noqa: F401

# Importing an adapter registers it; this order is the sniffing order after native.
from monitor.formats import claude as _claude  # noqa: F401
from monitor.formats import codex as _codex  # noqa: F401
from monitor.formats import copilot as _copilot  # noqa: F401
from monitor.formats import cursor as _cursor  # noqa: F401
from monitor.formats import gemini as _gemini  # noqa: F401
from monitor.formats import gemini_stream as _gemini_stream  # noqa: F401
from monitor.formats import managed_agents as _managed_agents  # noqa: F401
from monitor.formats import openhands_eval as _openhands_eval  # noqa: F401
from monitor.formats import pi_agent as _pi_agent  # noqa: F401
from monitor.formats.base import Problem, RecordDecoder, RecordError
from monitor.formats.native import NativeDecoder
from monitor.formats.registry import LINE_FORMATS, format_names, register_line_format, sniff

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
