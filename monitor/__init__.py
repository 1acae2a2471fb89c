"""loopwatch: a terminal monitor and controller for AI agents that loop.

The core (events, formats, detection, sources, store, control) never imports
Textual; the UI in :mod:`monitor.ui` is a thin layer over it.
"""

__version__ = "0.1.0"
