"""Operator actions shared by the dashboard and the detail screen.

Each action is a :class:`~textual.binding.Binding` with an ``id`` (the name to
use in ``[ui] keymap``), also offered in the command palette and clickable in
the footer.  The screen says which session is selected
(:meth:`OperatorActions.selected_info`); the app carries the action out through
``hub.act`` (recorded in the store before it happens) and shows the outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import getters
from textual.binding import Binding

from monitor.events import Level
from monitor.ui.host import HostApp, ScreenMixin
from monitor.ui.literal import visible
from monitor.ui.screens.inject import InjectScreen
from monitor.ui.screens.kill import KillScreen
from monitor.ui.screens.mute import MuteScreen
from monitor.ui.sparks import bars

OPERATOR_BINDINGS = [
    Binding("a", "ack", "Ack", id="ack", tooltip="Acknowledge the session's warning"),
    Binding("i", "inject", "Inject", id="inject", tooltip="Send the agent a message"),
    Binding("K", "kill", "Kill", id="kill", tooltip="Stop the agent's process (asks first)"),
    Binding(
        "f",
        "false_positive",
        "False+",
        id="false_positive",
        tooltip="Mark the last detection a false positive",
    ),
    Binding("m", "mute", "Mute", id="mute", tooltip="Mute a detector for this session"),
    # Not in the footer (it is full at 80 columns): in the help screen and the palette.
    Binding(
        "p",
        "pause",
        "Pause",
        show=False,
        id="pause",
        tooltip="Pause (SIGSTOP) or resume (SIGCONT) the agent's process",
    ),
    Binding(
        "b",
        "guard",
        "Guard",
        show=False,
        id="guard",
        tooltip="Deny the calls that continue a critical loop (on/off)",
    ),
]

#: Action name -> (palette title, help text).
OPERATOR_COMMANDS = {
    "ack": ("Acknowledge", "Acknowledge the selected session's warning"),
    "inject": ("Inject message", "Send the selected session's agent a message (nudge pre-filled)"),
    "kill": ("Kill session", "Stop the selected session's process (asks first)"),
    "false_positive": ("Mark false positive", "Mark the selected session's last detection a false positive"),
    "mute": ("Mute detector", "Mute one detector for the selected session"),
    "pause": ("Pause or resume", "Stop (SIGSTOP) or continue (SIGCONT) the selected session's process"),
    "guard": (
        "Guard on or off",
        "Deny, through the hook, the calls that continue the session's critical loop",
    ),
}


class OperatorActions(ScreenMixin):
    """Mixin for screens showing one selected (live) session."""

    if TYPE_CHECKING:
        app = getters.app(HostApp)

    read_only: bool = False

    def selected_info(self) -> Any | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def pin_selection(self) -> None:
        """Keep the acted-on session selected even if the action re-sorts it
        (a second key press must not hit another session)."""

    def refresh_operator_bindings(self) -> None:
        """Refresh the footer only when an action's availability changed
        (a footer refresh rebuilds its keys: too costly for every update)."""
        state = tuple(self.check_action(action, ()) for action in OPERATOR_COMMANDS)
        if state != getattr(self, "_operator_state", None):
            self._operator_state = state
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action not in OPERATOR_COMMANDS:
            return True
        if self.read_only or getattr(self.app, "hub", None) is None:
            return False  # hidden: a past session cannot be acted on
        # Availability depends only on a session being selected, so moving the
        # cursor never rebuilds the footer; an action with nothing to act on
        # says so instead.
        return True if self.selected_info() is not None else None

    def action_ack(self) -> None:
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        if info.level <= Level.NONE:
            self.app.notify(
                visible(f"{info.id} has no open warning to acknowledge."),
                title="Nothing to acknowledge",
                markup=False,
            )
            return
        self.app.perform("ack", info.id)

    def action_inject(self) -> None:
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        if self.app.hub is not None and self._refused_as_gone(
            self.app.hub, info.id, "Nothing to inject into"
        ):
            return
        nudge = info.nudge or (info.last_detection.nudge if info.last_detection else "")

        def send(text: str | None) -> None:
            if text:
                self.app.perform("inject", info.id, text=text)

        self.app.push_screen(InjectScreen(info.id, nudge, info.channel), send)

    def action_kill(self) -> None:
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        hub = self.app.hub
        if hub is None:  # check_action hides the key then
            return
        if self._refused_as_gone(hub, info.id, "Nothing to kill"):
            return
        describe = hub.describe_kill(info.id)
        refusal = hub.actions.kill_refusal(info.id)  # afresh: the process may have exited since

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.app.perform("kill", info.id)

        self.app.push_screen(KillScreen(info.id, describe, refusal), confirmed)

    def action_pause(self) -> None:
        """Reversible, so no dialog: the same proof as a kill is checked before the signal."""
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        if getattr(info, "paused", 0):
            self.app.perform("resume", info.id)
            return
        hub = self.app.hub
        if hub is not None and self._refused_as_gone(hub, info.id, "Nothing to pause"):
            return
        self.app.perform("pause", info.id)

    def action_guard(self) -> None:
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        self.app.perform("guard", info.id, text="off" if getattr(info, "guard", False) else "on")

    def _refused_as_gone(self, hub: Any, session: str, title: str) -> bool:
        """An ended or stopped session cannot be reached: say why instead of opening a dialog."""
        reason = hub.actions.unreachable(session)
        if reason:
            self.app.notify(visible(f"{session}: {reason}."), title=title, markup=False)
        return bool(reason)

    def action_false_positive(self) -> None:
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        if info.last_detection is None:
            self.app.notify(
                visible(f"{info.id} has no detection to mark."), title="Nothing to mark", markup=False
            )
            return
        self.app.perform("false_positive", info.id, detection=info.last_detection)

    def action_mute(self) -> None:
        self.pin_selection()
        info = self.selected_info()
        if info is None:
            return
        from monitor.detect import REGISTRY

        fired = []
        if info.last_detection is not None:
            fired.append(info.last_detection.detector)
        fired += [name for name, sparks in info.detector_similarity.items() if any(bars(sparks))]
        order: list[tuple[str, str]] = []
        for name in [*fired, *REGISTRY]:
            if name in info.muted or any(name == n for n, _ in order):
                continue
            note = (
                "raised the current level"
                if info.last_detection is not None and name == info.last_detection.detector
                else ("saw repetition" if name in fired else "")
            )
            order.append((name, note))

        def chosen(name: str | None) -> None:
            if name:
                self.app.perform("mute", info.id, detector=name)

        self.app.push_screen(MuteScreen(info.id, order), chosen)
