"""Sources: where live events come from (log files, agent sockets, hooks).

A source turns bytes into :class:`~monitor.events.Event` objects through a
:class:`~monitor.formats.lines.LineDecoder` and hands them to a :class:`Sink`
(in practice the :class:`~monitor.hub.Hub`).  Sources never raise on bad
input: it becomes a :class:`~monitor.formats.base.Problem` handed on with the
events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from monitor.events import Event
from monitor.formats.base import Problem


class Sink(Protocol):
    """What a source feeds: the hub's input side."""

    async def submit(self, events: Sequence[Event], problems: Sequence[Problem] = ()) -> None:
        """Queue events (and bad-input reports); awaits while the consumer is full."""

    def register_channel(self, session: str, channel: Any) -> None:
        """Make ``channel`` the way to reach ``session``'s agent."""


class LiveSink(Sink, Protocol):
    """The rest of the hub a network source uses (typed here, so sources never import the hub)."""

    def saturated(self) -> bool:
        """The consumer is full: a sender that can retry later should be told to."""

    def confirm_pid(self, session: str, identity: Any, how: str) -> None:
        """The agent of ``session`` proved ``identity`` is its process."""

    async def join(self) -> None:
        """Wait until everything submitted so far has been processed."""

    async def processed(self) -> None:
        """The same, without publishing early: the socket ingest paces itself on it."""

    def subscribe(
        self, callback: Callable[[object], None], kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        """Receive the consumer's updates (:mod:`monitor.updates`)."""


__all__ = ["LiveSink", "Sink"]
