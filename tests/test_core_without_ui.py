"""The core never imports Textual: it must run headless, in agents and hooks."""

from __future__ import annotations

import subprocess
import sys

CORE_MODULES = [
    "monitor.events",
    "monitor.text",
    "monitor.config",
    "monitor.detect",
    "monitor.detect.engine",
    "monitor.formats",
    "monitor.formats.lines",
    "monitor.scan",
    "monitor.cli",
    "monitor.framing",
    "monitor.paths",
    "monitor.store",
    "monitor.hub",
    "monitor.control",
    "monitor.client",
    "monitor.sources",
    "monitor.sources.files",
    "monitor.sources.sockets",
    "monitor.updates",
    "monitor.hub.live",
    "monitor.hub.replay",
]


def test_core_imports_without_textual():
    """Importing every core module (and building the CLI parser) leaves Textual unloaded."""
    probe = (
        "import importlib, sys\n"
        f"for name in {CORE_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "from monitor.cli import build_parser\n"
        "build_parser()\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported Textual: {out.stdout.strip()}"
