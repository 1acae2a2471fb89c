"""The Textual monitor (the only package that imports Textual).

Entry points for the commands, imported lazily by them:

* :func:`monitor.ui.app.run_app` — the live dashboard over a hub (``watch``, ``demo``);
* :func:`monitor.ui.app.run_history` — past sessions from the store (``history --tui``);
* :func:`monitor.ui.app.run_open` — one stored session, read-only (``open SESSION``).

Layout: ``screens/`` holds one module per screen and ``widgets/<screen>/`` the
widgets that screen is made of; ``*.tcss`` next to this file hold the styles;
``themes/`` the packaged theme files.
"""
