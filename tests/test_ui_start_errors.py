"""A monitor that cannot start under the TUI (issue 32: never a traceback): the app exits
with status 2 and says why on stderr once the terminal is back, as ``--headless`` does.

A real :class:`~monitor.hub.live.LiveMonitor` asked to put its socket in a directory of
mode 755 (the socket directory must be 0700), driven by Pilot.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from monitor.config import Config
from monitor.hub.live import LiveMonitor
from monitor.ui.app import LoopwatchApp, _run


def test_a_socket_directory_of_mode_755_ends_the_tui_with_a_reason_not_a_traceback(tmp_path, capsys):
    shared = Path(tempfile.mkdtemp(prefix="lw-"))  # short: a socket path has a length limit
    try:
        os.chmod(shared, 0o755)
        config = Config()
        live = LiveMonitor(config, db=str(tmp_path / "db.sqlite"), socket_path=str(shared / "s.sock"))
        app = LoopwatchApp(config, hub_factory=live.running)
        status = _run_headless_app(app)
        assert status == 2
        assert "0700" in app.start_error and "Traceback" not in app.start_error
        err = capsys.readouterr().err
        assert err.startswith("loopwatch: cannot watch: ") and "0700" in err
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _run_headless_app(app: LoopwatchApp) -> int:
    """``_run`` (what ``watch`` runs) with Textual's headless driver instead of a terminal."""
    original = app.run

    def run(*args: object, **kwargs: object) -> int | None:
        return original(headless=True)

    app.run = run  # type: ignore[method-assign]
    return _run(app)
