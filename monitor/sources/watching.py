"""Change notifications for followed files: one ``watchfiles`` watcher per kind of root.

:class:`ChangeWatcher` keeps one recursive and one flat watcher over the roots
of the watch specs that exist, restarts them when that set changes, and hands
each changed path to ``notify``.  A watcher that fails is reported once and
retried a few seconds later; meanwhile the file source's rescans cover for it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from monitor.formats.base import Problem
from monitor.sources.paths import WatchSpec, is_under

#: A failed watcher is started again after this long.
WATCH_RETRY_SECONDS = 5.0


class ChangeWatcher:
    """Watches the roots of ``specs`` and calls ``notify`` with the paths that changed."""

    def __init__(
        self,
        specs: Sequence[WatchSpec],
        wanted: Callable[[str], bool],
        notify: Callable[[Iterable[str]], None],
        report: Callable[[list[Problem]], Awaitable[None]],
        *,
        debounce_ms: int,
        step_ms: int,
    ):
        self.specs = specs
        self.wanted = wanted
        self.notify = notify
        self.report = report
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self._watchers: dict[bool, tuple[frozenset[str], asyncio.Task, asyncio.Event]] = {}
        self._retry_at = 0.0

    def _desired_roots(self) -> dict[bool, frozenset[str]]:
        recursive = {s.root for s in self.specs if s.recursive and os.path.isdir(s.root)}
        flat = {s.root for s in self.specs if not s.recursive and os.path.isdir(s.root)}
        recursive = {r for r in recursive if not any(o != r and is_under(r, o) for o in recursive)}
        flat = {r for r in flat if not any(is_under(r, o) for o in recursive)}
        return {True: frozenset(recursive), False: frozenset(flat)}

    def ensure(self) -> None:
        """(Re)start the change watchers when the set of existing roots changed."""
        from watchfiles import awatch  # imported here: cheap import of this module

        for recursive, roots in self._desired_roots().items():
            current = self._watchers.get(recursive)
            if current is not None and current[0] == roots and not current[1].done():
                continue
            if current is not None:
                current[2].set()
                current[1].cancel()
                del self._watchers[recursive]
            if not roots:
                continue
            stop = asyncio.Event()
            changes = awatch(
                *sorted(roots),
                watch_filter=lambda _c, p: self.wanted(p),
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=stop,
                recursive=recursive,
                ignore_permission_denied=True,
            )
            task = asyncio.create_task(self._watch(changes, roots), name="loopwatch-watchfiles")
            self._watchers[recursive] = (roots, task, stop)

    def ensure_if_due(self) -> None:
        """:meth:`ensure`, unless a watcher failed a moment ago."""
        if time.monotonic() >= self._retry_at:
            self.ensure()

    async def _watch(self, changes, roots: frozenset[str]) -> None:
        try:
            async for batch in changes:
                self.notify(path for _change, path in batch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a watcher failure degrades to periodic rescans
            self._retry_at = time.monotonic() + WATCH_RETRY_SECONDS
            await self.report(
                [
                    Problem(
                        ", ".join(sorted(roots)),
                        None,
                        f"file change watcher failed ({exc}); relying on rescans",
                    )
                ]
            )

    def signal_stop(self) -> None:
        """Ask every watcher to stop (they end at their next step)."""
        for _roots, _task, stop in self._watchers.values():
            stop.set()

    async def stop(self) -> None:
        """Cancel the watchers and wait for them to end."""
        tasks = [task for _roots, task, _stop in self._watchers.values()]
        self._watchers.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
