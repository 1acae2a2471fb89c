"""The loopwatch Textual app and the entry points the commands call.

:class:`LoopwatchApp` never owns detection: it is handed a running
:class:`~monitor.hub.Hub` (live mode) and/or a :class:`~monitor.store.Store`
(history and ``open``), subscribes to the hub with a callback that only stores
updates (:class:`~monitor.ui.live.LiveFeed`), and flushes them to the screens
at most ``[ui] refresh_hz`` times a second.  Operator actions go through
``hub.act`` in named workers (group ``actions``) so the UI never waits on a
kill's grace period.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES

from monitor.config import Config, ConfigError
from monitor.events import Level
from monitor.hub.reads import recent_episodes
from monitor.text import printable
from monitor.ui import ui_state
from monitor.ui.hangup import GRACE_SECONDS, StopOnSignals
from monitor.ui.host import HostApp
from monitor.ui.keymap import check_keymap as check_keys
from monitor.ui.literal import visible
from monitor.ui.live import LiveFeed, flush_interval
from monitor.ui.operator import OPERATOR_COMMANDS
from monitor.ui.render import Palette
from monitor.ui.screens.help import help_title, screen_bindings
from monitor.ui.themes import DEFAULT_THEME, DOMAIN_VARIABLES, check_theme_name, load_themes
from monitor.ui.widgets.dashboard.escalation_view import EscalationFacts

if TYPE_CHECKING:
    from monitor.hub import Hub

SEVERITY: dict[str, SeverityLevel] = {
    "delivered": "information",
    "pending": "information",
    "failed": "error",
    "refused": "warning",
    "unsupported": "warning",
}
ACTION_TITLES = {
    "ack": "Acknowledged",
    "inject": "Inject",
    "kill": "Kill",
    "false_positive": "False positive",
    "mute": "Mute",
    "pause": "Pause",
    "resume": "Resume",
    "guard": "Guard",
}

HubFactory = Callable[[], AbstractAsyncContextManager["Hub"]]


class LoopwatchApp(HostApp):
    """Live dashboard, session detail and history over one hub and store."""

    TITLE = "loopwatch"
    CSS_PATH = ["app.tcss", "dashboard.tcss", "detail.tcss", "history.tcss"]
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit loopwatch"),
        Binding("question_mark", "help", "Help", id="help", tooltip="Show this list of keys"),
    ]

    def __init__(
        self,
        config: Config | None = None,
        *,
        hub: Hub | None = None,
        hub_factory: HubFactory | None = None,
        store: Any = None,
        mode: str = "live",
        session: str | None = None,
        clock: Callable[[], float] = time.time,
        theme: str | None = None,
    ):
        super().__init__()
        self.config = config or Config()
        self.hub = hub
        self.hub_factory = hub_factory
        self._hub_context: AbstractAsyncContextManager[Hub] | None = None
        #: Why the monitor could not start (printed on stderr after the app exits).
        self.start_error = ""
        self.store = store if store is not None or hub is None else hub.store
        self.mode = mode
        self.initial_session = session
        self.clock = clock
        self.feed = LiveFeed(self._request_flush)
        self.flushes = 0
        self._flush_pending = False
        self._last_flush = 0.0
        self._unsubscribe: Callable[[], None] | None = None
        self.startup_notes: list[str] = []
        #: The loop the app runs on, for quitting from a signal handler.
        self.running_loop: asyncio.AbstractEventLoop | None = None
        self.history_filters: dict[str, Any] = {}
        self.loopwatch_themes = load_themes()
        for loaded in self.loopwatch_themes.values():
            self.register_theme(loaded)
        name = theme or self.config.ui.theme or DEFAULT_THEME
        check_theme_name(name, self.loopwatch_themes, tuple(BUILTIN_THEMES))
        self.theme = name
        self.palette = self._palette()
        check_keymap(self.config.ui.keymap)

    # -- lifecycle -------------------------------------------------------------

    async def on_mount(self) -> None:
        self.running_loop = asyncio.get_running_loop()
        if self.hub is None and self.hub_factory is not None:
            # Entered on the app's own loop; exited in on_unmount (awaited at shutdown).
            context = self.hub_factory()
            try:
                self.hub = await context.__aenter__()
            except (
                Exception
            ) as exc:  # a socket path it may not use, a port taken: said once the terminal is back
                self.start_error = str(exc) or type(exc).__name__
                self.exit(2)
                return
            self._hub_context = context
            if self.store is None:
                self.store = self.hub.store
        if self.config.ui.keymap:
            self.set_keymap(self.config.ui.keymap)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self.hub is not None:
            self.feed.seed(self.hub.sessions(), self.hub.recent_detections(), recent_episodes(self.hub))
            self._unsubscribe = self.hub.subscribe(self.feed.push)
        for note in self.startup_notes:
            self.notify(visible(note), markup=False, timeout=12)
        if self.mode == "history":
            from monitor.ui.screens.history import HistoryScreen

            self.push_screen(HistoryScreen())
        elif self.mode == "open":
            self.open_session(self.initial_session or "", read_only=self.hub is None)
        else:
            from monitor.ui.screens.dashboard import DashboardScreen

            self.push_screen(DashboardScreen())
            if self.initial_session:
                self.open_session(self.initial_session)

    async def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._hub_context is not None:
            context, self._hub_context = self._hub_context, None
            await context.__aexit__(None, None, None)

    # -- live updates ------------------------------------------------------------

    def _request_flush(self) -> None:
        """Called by the feed for every update: schedule at most one flush."""
        if self._flush_pending or not self.is_running:
            return
        self._flush_pending = True
        interval = self._flush_interval()
        delay = max(0.0, self._last_flush + interval - time.monotonic()) if interval > 0 else 0.0
        if delay <= 0.001:
            self.call_later(self.flush_live)
        else:
            self.set_timer(delay, self.flush_live, name="flush-live")

    def _flush_interval(self) -> float:
        """The adaptive interval (:func:`flush_interval`); the hub is asked to
        coalesce session snapshots over the same interval, so that it builds
        one per changed session per flush rather than one per 50 ms."""
        interval = flush_interval(self.config.ui.refresh_hz, len(self.feed.sessions))
        if self.hub is not None:
            self.hub.publish_interval = interval
        return interval

    def flush_live(self) -> None:
        """Hand the accumulated batch to every screen that shows live data."""
        self._flush_pending = False
        self._last_flush = time.monotonic()
        batch = self.feed.drain()
        if not batch:
            return
        self.flushes += 1
        for notice in batch.notices:
            self.notify_waiting(notice)
        for screen in self.screen_stack:
            apply = getattr(screen, "apply_live", None)
            if apply is not None and getattr(screen, "ready", False):
                try:
                    apply(batch)
                except NoMatches:  # the screen is being torn down
                    pass

    def notify_waiting(self, notice: Any) -> None:
        """A session has waited for the person too long: say so (agent text literally, no markup)."""
        waited = max(0.0, self.clock() - notice.since)
        asks = f": {printable(notice.asks)}" if notice.asks else ""
        self.notify(
            f"{printable(notice.session)} has waited {waited / 60:.0f} min for you ({notice.why}){asks}",
            title="Waiting for input",
            severity="warning",
            markup=False,
            timeout=10,
        )

    # -- themes --------------------------------------------------------------------

    def _palette(self) -> Palette:
        return Palette.from_variables({**DOMAIN_VARIABLES, **self.current_theme.variables})

    def _theme_changed(self, _theme: Any) -> None:
        self.palette = self._palette()
        for screen in self.screen_stack:
            restyle = getattr(screen, "restyle", None)
            if restyle is not None and getattr(screen, "ready", False):
                try:
                    restyle()
                except NoMatches:
                    pass

    # -- navigation --------------------------------------------------------------

    def open_session(self, session: str, *, read_only: bool = False) -> None:
        from monitor.ui.screens.detail import SessionDetailScreen

        live = self.hub is not None and session in self.feed.sessions
        self.push_screen(SessionDetailScreen(session, read_only=read_only or not live))

    def action_history(self) -> None:
        if self.store is None:
            self.notify("No database: history needs a store.", severity="warning", markup=False)
            return
        from monitor.ui.screens.history import HistoryScreen

        self.push_screen(HistoryScreen())

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's Screenshot: into ~/Downloads when it exists, else the current directory
        (Textual's default fails with no reason when ~/Downloads is missing)."""
        from platformdirs import user_downloads_path

        if path is None:
            downloads = user_downloads_path()
            path = str(downloads if downloads.is_dir() else Path.cwd())
        if not os.access(path, os.W_OK | os.X_OK):
            self.notify(
                visible(f"Cannot save a screenshot: {path} is not a writable directory."),
                title="Screenshot",
                severity="error",
                markup=False,
            )
            return None
        return super().deliver_screenshot(filename, path, time_format)

    def go_back(self) -> None:
        """Pop the current screen; from the session `loopwatch open` showed, go to the history
        of sessions (esc is "back", not "quit": q quits); quit from the first screen."""
        if len(self.screen_stack) > 2:
            self.pop_screen()
        elif self.mode == "open" and self.store is not None:
            from monitor.ui.screens.history import HistoryScreen

            self.mode = "history"
            self.switch_screen(HistoryScreen())
        else:
            self.exit(0)

    def action_help(self) -> None:
        from monitor.ui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.key_help(self.screen), title=help_title(self.screen)))

    def key_help(self, screen: Screen | None = None) -> list[tuple[str, str, str]]:
        """(key now, binding id, description) for every loopwatch binding, or
        for those that work on ``screen`` (its own, its widgets', the app's)."""
        rows = []
        keymap = self.config.ui.keymap
        for binding in all_bindings() if screen is None else screen_bindings(screen):
            key = keymap.get(binding.id, binding.key) if binding.id else binding.key
            rows.append(
                (
                    self.get_key_display(Binding(key.split(",")[0], "")),
                    binding.id or "",
                    binding.tooltip or binding.description,
                )
            )
        return rows

    # -- operator actions ------------------------------------------------------------

    def escalation_facts(self, info: Any) -> EscalationFacts:
        """The policy's view of ``info`` for the escalation panel."""
        occurrences, acked = 0, None
        last = info.last_detection
        proposed = last.proposed if last is not None else Level.NONE
        if self.hub is not None and last is not None:
            occurrences, acked = self.hub.pattern_history(info.id, last.detector, last.pattern)
        keymap = self.config.ui.keymap
        keys = {k: keymap.get(k, default) for k, default in (("ack", "a"), ("inject", "i"), ("kill", "K"))}
        return EscalationFacts(
            ladder=tuple(self.config.escalation.ladder),
            occurrences=occurrences,
            acked_until=acked,
            proposed=proposed,
            auto_inject=self.config.control.auto_inject,
            auto_kill=self.config.control.auto_kill,
            keys=keys,
        )

    def perform(self, kind: str, session: str, **fields: Any) -> None:
        """Carry out an operator action in a worker; show the outcome."""
        self.run_worker(
            self._perform(kind, session, **fields),
            name=f"{kind}:{session}",
            group="actions",
            exit_on_error=False,
        )

    async def _perform(self, kind: str, session: str, **fields: Any) -> Any:
        title = ACTION_TITLES.get(kind, kind)
        try:
            if self.hub is None:
                raise LookupError("no monitor is running (read-only)")
            record = await self.hub.act(kind, session, **fields)
        except Exception as exc:  # the hub should not raise; never take the UI down
            self.notify(visible(f"{session}: {exc}"), title=f"{title} failed", severity="error", markup=False)
            return None
        detail = f" — {record.detail}" if record.detail else ""
        self.notify(
            visible(f"{session}: {record.outcome}{detail}"),
            title=title,
            severity=SEVERITY.get(record.outcome, "information"),
            markup=False,
        )
        return record

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for action, (title, help_text) in OPERATOR_COMMANDS.items():
            if hasattr(screen, f"action_{action}") and screen.check_action(action, ()) is True:
                yield SystemCommand(title, help_text, getattr(screen, f"action_{action}"))
        if self.store is not None:
            yield SystemCommand("History", "Browse past sessions in the database", self.action_history)
        yield SystemCommand("Help", "Show every key and its keymap id", self.action_help)
        for name in sorted(self.loopwatch_themes):
            yield SystemCommand(
                f"Theme: {name}",
                f"Switch to the {name} theme",
                lambda n=name: setattr(self, "theme", n),
                discover=False,
            )


def bindings_by_screen() -> dict[str, list[Binding]]:
    """Each screen's (and widget's) bindings with an id, by its name; the app's own as ``app``."""
    from monitor.ui.screens.bulk_kill import BulkKillScreen
    from monitor.ui.screens.columns import ColumnsScreen
    from monitor.ui.screens.dashboard import DashboardScreen
    from monitor.ui.screens.detail import SessionDetailScreen
    from monitor.ui.screens.event_view import EventViewScreen
    from monitor.ui.screens.help import HelpScreen
    from monitor.ui.screens.history import HistoryScreen
    from monitor.ui.screens.inject import InjectScreen
    from monitor.ui.screens.kill import KillScreen
    from monitor.ui.screens.mute import MuteScreen
    from monitor.ui.screens.repeat_diff import RepeatDiffScreen
    from monitor.ui.widgets.detail.event_stream import EventStream
    from monitor.ui.widgets.detail.search import SearchBar

    owners = {
        "app": LoopwatchApp,
        "dashboard": DashboardScreen,
        # the event stream and its search bar are parts of the detail screen
        "detail": (SessionDetailScreen, EventStream, SearchBar),
        "history": HistoryScreen,
        "inject": InjectScreen,
        "kill": KillScreen,
        "kill marked": BulkKillScreen,
        "columns": ColumnsScreen,
        "mute": MuteScreen,
        "help": HelpScreen,
        "event": EventViewScreen,
        "repeat diff": RepeatDiffScreen,
    }
    screens: dict[str, list[Binding]] = {}
    for name, owner in owners.items():
        classes = owner if isinstance(owner, tuple) else (owner,)
        screens[name] = [b for cls in classes for b in cls.BINDINGS if isinstance(b, Binding) and b.id]
    return screens


def all_bindings() -> list[Binding]:
    """Every binding with an id that loopwatch defines (for help and keymap checks)."""
    seen: dict[str, Binding] = {}
    for bindings in bindings_by_screen().values():
        for binding in bindings:
            seen.setdefault(binding.id or "", binding)
    return list(seen.values())


def check_keymap(keymap: dict[str, str]) -> None:
    """Raise a :class:`ConfigError` naming ``ui.keymap.<id>``: unknown action, no such key, a clash."""
    check_keys(keymap, bindings_by_screen())


# -- entry points ----------------------------------------------------------------


def run_app(
    config: Config,
    hub_factory: HubFactory,
    *,
    theme: str | None = None,
    session: str | None = None,
    notes: Iterable[str] = (),
    last_resort: Iterable[Callable[[], None]] = (),
) -> int:
    """Run the live monitor; returns the exit status.

    ``hub_factory()`` returns an async context manager that starts the hub (and
    whatever feeds it: sources, store) on entry, yields the running
    :class:`~monitor.hub.Hub`, and stops it all on exit (such as
    :meth:`LiveMonitor.running <monitor.hub.live.LiveMonitor.running>`); it is
    entered on the app's own event loop.  Raises :class:`ConfigError` (naming
    ``ui.theme`` or ``ui.keymap.<id>``) before touching the terminal if the UI config is bad.
    SIGTERM and SIGHUP quit like ``q``; if the app cannot (a dead terminal),
    the database is flushed, ``last_resort`` runs and the process exits.
    """
    validate_ui(config, theme)
    app = LoopwatchApp(config, hub_factory=hub_factory, theme=theme, session=session)
    app.startup_notes = list(notes)
    app.ui_state_path = ui_state.default_path()
    app.monitor = getattr(hub_factory, "__self__", None)  # LiveMonitor.running, DemoRun.running
    return _run(app, last_resort)


def _run(app: LoopwatchApp, last_resort: Iterable[Callable[[], None]] = ()) -> int:
    def quit_app() -> None:
        if app.running_loop is not None:
            app.running_loop.call_soon_threadsafe(app.exit)

    def flush_store() -> None:
        # Only a store this app's hub writes to (history and open only read).
        if app.hub is not None and app.store is not None:
            app.store.flush(timeout=GRACE_SECONDS)

    with StopOnSignals(quit_app) as stop:
        stop.last_resort += [flush_store, *last_resort]
        status = int(app.run() or 0)
    if app.start_error:
        sys.stderr.write(f"loopwatch: cannot watch: {printable(app.start_error)}\n")
    return status


def run_history(
    config: Any,
    store: Any = None,
    *,
    theme: str | None = None,
    agent: str | None = None,
    since: float | None = None,
    level: str | None = None,
    text: str | None = None,
    limit: int | None = None,
) -> int:
    """Browse past sessions in ``store`` (read-only; its writer need not be started).

    ``run_history(path, **filters)`` (a database path, config from the default
    file) is accepted too.  The filters pre-fill the history screen."""
    if not isinstance(config, Config):
        from monitor.config import load_config
        from monitor.store import Store

        store = Store(config)
        try:
            config = load_config()
        except ConfigError:
            config = Config()
    validate_ui(config, theme)
    app = LoopwatchApp(config, store=store, mode="history", theme=theme)
    app.history_filters = {"agent": agent, "since": since, "level": level, "text": text}
    return _run(app)


def run_open(config: Config, store: Any, session: str, *, theme: str | None = None) -> int:
    """Show one stored session read-only, exactly like a live one."""
    validate_ui(config, theme)
    return _run(LoopwatchApp(config, store=store, mode="open", session=session, theme=theme))


def validate_ui(config: Config, theme: str | None = None) -> None:
    """Check ``[ui]`` (theme name, keymap ids) without starting anything."""
    check_theme_name(theme or config.ui.theme or DEFAULT_THEME, load_themes(), tuple(BUILTIN_THEMES))
    check_keymap(config.ui.keymap)
