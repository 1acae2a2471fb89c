"""The real app on a restarted watcher: a :class:`~monitor.hub.live.LiveMonitor` on a
database an earlier run filled, following the same logs from where that run left
them, driven by Textual's Pilot."""

from __future__ import annotations

import time
from pathlib import Path

from monitor.config import Config
from monitor.hub.live import LiveMonitor
from monitor.sources.paths import StartPolicy
from monitor.ui.app import LoopwatchApp

DEADLINE = 20.0


def restarted_app(paths: list[Path], db: Path) -> LoopwatchApp:
    """The app over a watcher that follows ``paths`` (start policy ``recent``) and stores in ``db``."""
    config = Config()
    live = LiveMonitor(
        config,
        paths=[str(path) for path in paths],
        start_policy=StartPolicy(mode="recent"),
        db=str(db),
        use_socket=False,
    )
    return LoopwatchApp(config, hub_factory=live.running)


async def caught_up(app: LoopwatchApp, pilot, events: int) -> None:
    """Poll (with a deadline) until the hub has read ``events`` events; then the hub, the store,
    the workers and the live feed have done all they had to, and the screen is repainted."""
    deadline = time.monotonic() + DEADLINE
    while not (app.hub is not None and app.hub.events_total == events):
        assert time.monotonic() < deadline, "the appended lines were not read"
        await pilot.pause(0.05)
    await app.hub.join()
    assert app.store is not None
    app.store.flush()
    await app.workers.wait_for_complete()
    app.flush_live()
    await pilot.pause()


async def open_detail(app: LoopwatchApp, pilot, session: str) -> None:
    """Open the detail view of ``session`` and let it load."""
    app.open_session(session)
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()
