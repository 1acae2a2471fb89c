"""What the screens and widgets use of the app, typed once.

:class:`~monitor.ui.app.LoopwatchApp` derives from :class:`HostApp`; a screen
or widget that reads the app's state writes ``app = getters.app(HostApp)``
under ``TYPE_CHECKING`` so that ``self.app.feed`` type-checks without the
screen importing the app module (which imports the screens).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.screen import Screen

from monitor.config import Config
from monitor.ui.live import LiveFeed
from monitor.ui.render import Palette

if TYPE_CHECKING:
    from monitor.hub import Hub
    from monitor.store import Store
    from monitor.ui.widgets.dashboard.escalation_view import EscalationFacts


if TYPE_CHECKING:
    #: The base of a mixin for screens: a Screen to the type checker, object at
    #: run time (so that the screen class's own Screen base stays its only one).
    ScreenMixin = Screen[Any]
else:
    ScreenMixin = object


class HostApp(App[int]):
    """The app's state and the calls screens make on it (implemented by ``LoopwatchApp``)."""

    config: Config
    hub: Hub | None
    store: Store | None
    clock: Callable[[], float]
    feed: LiveFeed
    palette: Palette
    history_filters: dict[str, Any]
    #: Where the dashboard's layout is kept (None: not kept, as in tests); see ui_state.py.
    ui_state_path: Path | None = None
    #: The running LiveMonitor (or what holds it), for what is watched; None in tests.
    monitor: Any = None

    def open_session(self, session: str, *, read_only: bool = False) -> None:
        raise NotImplementedError

    def go_back(self) -> None:
        raise NotImplementedError

    def escalation_facts(self, info: Any) -> EscalationFacts:
        raise NotImplementedError

    def perform(self, kind: str, session: str, **fields: Any) -> None:
        raise NotImplementedError
