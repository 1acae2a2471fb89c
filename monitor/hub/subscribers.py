"""Who hears what the hub publishes: callbacks, each for every update or for some kinds."""

from __future__ import annotations

import logging
from collections.abc import Callable

from monitor.updates import SessionChanged

log = logging.getLogger("loopwatch.hub")


class Subscribers:
    """The hub's subscribers, each a callback and the update classes it takes (``None``: all)."""

    def __init__(self) -> None:
        self._entries: list[tuple[Callable[[object], None], tuple[type, ...] | None]] = []

    def subscribe(
        self, callback: Callable[[object], None], kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        """Call ``callback`` with each update (on the hub's loop; it must not
        block), or only with those of the classes in ``kinds``; returns what
        unsubscribes it.

        Session snapshots are built to be published only while some
        subscriber takes :class:`SessionChanged` (a headless watcher's do
        not); the hub's ``sessions`` and ``session`` build them on demand either way."""
        entry = (callback, tuple(kinds) if kinds is not None else None)
        self._entries.append(entry)

        def unsubscribe() -> None:
            try:
                self._entries.remove(entry)
            except ValueError:
                pass

        return unsubscribe

    def want_sessions(self) -> bool:
        """Whether any subscriber takes :class:`SessionChanged`."""
        return any(kinds is None or SessionChanged in kinds for _callback, kinds in self._entries)

    def publish(self, update: object) -> None:
        """Tell the subscribers that take ``update``'s kind."""
        for callback, kinds in list(self._entries):
            if kinds is not None and not isinstance(update, kinds):
                continue
            try:
                callback(update)
            except Exception:  # one broken subscriber must not stop the others
                log.exception("hub subscriber %r failed", callback)
