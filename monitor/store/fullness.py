"""A full disk under the store: when to retry, and saying so once.

The writer keeps a batch it could not commit because the disk is full (in
memory, bounded) and retries it after a back-off; :class:`DiskFull` is that
state, and the warnings a run gives when the disk fills, when the spill
file cannot grow, and how it ended: written again (:meth:`DiskFull.resumed`),
or still full when the store closed (:meth:`DiskFull.gave_up`).  Either way
the statement gives the run's count of lost rows, and :attr:`DiskFull.stated`
keeps that count, so the store's closing word on losses is not said twice.
A disk that fills again after it had room is a new episode, told again, up to
:data:`EPISODES_TOLD` of them a run (a disk that keeps filling and emptying
would otherwise fill the log); the next says that later ones go untold, and
the closing word still gives the run's losses.
"""

from __future__ import annotations

import errno
import logging
import time

log = logging.getLogger("loopwatch.store")

#: A full disk is retried after this, doubling up to RETRY_MAX seconds.
RETRY_MIN = 0.1
RETRY_MAX = 2.0
#: While closing, give up on a disk that stays full after this (what is queued is counted lost).
CLOSE_SECONDS = 5.0
#: Full-disk episodes told one by one in a run (when the disk fills, when it has room again).
EPISODES_TOLD = 3


def no_space(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


class DiskFull:
    """Whether the disk is full now, when to try again, what was said (the writer's lock held)."""

    def __init__(self, max_pending: int):
        self.max_pending = max_pending
        self.since: float | None = None  # monotonic time the disk was found full
        self.retry_at = 0.0
        self._delay = RETRY_MIN
        self._said: set[str] = set()  # the spill message: once a run
        self.episodes = 0  # times the disk was found full after having room
        #: The run's count of lost rows as the last statement of how a full disk ended gave it.
        self.stated: int | None = None

    @property
    def full(self) -> bool:
        return self.since is not None

    def waiting(self, now: float) -> bool:
        """Full, and not yet time to try again."""
        return self.since is not None and now < self.retry_at

    def failed(self, error: str) -> None:
        """A batch failed on a full disk: back off (doubling) before the next try."""
        now = time.monotonic()
        if self.since is not None:
            self._delay = min(self._delay * 2, RETRY_MAX)
            self.retry_at = now + self._delay
            return
        self.since = now
        self._delay = RETRY_MIN
        self.retry_at = now + self._delay
        self.episodes += 1
        if self.episodes <= EPISODES_TOLD:
            log.warning(
                "the disk holding the database is full%s (%s): keeping up to %d rows in memory "
                "and retrying; rows beyond that are counted as lost",
                " again" if self.episodes > 1 else "",
                error,
                self.max_pending,
            )
        elif self.episodes == EPISODES_TOLD + 1:
            log.warning(
                "the disk holding the database is full again (%s; %d times this run): "
                "later full-disk episodes are not told one by one; the losses are counted",
                error,
                self.episodes,
            )

    def spill_failed(self) -> None:
        self._once(
            "spill",
            "the disk holding the spill file is full: rows beyond the %d kept in memory "
            "are counted as lost until it has room",
            self.max_pending,
        )

    def resumed(self, dropped: int) -> None:
        """A batch was committed: the disk has room again."""
        since, self.since = self.since, None
        if since is None or self.episodes > EPISODES_TOLD:
            return
        log.warning(
            "the database is being written again after %.1f s of a full disk; %d rows lost this run",
            time.monotonic() - since,
            dropped,
        )
        self.stated = dropped

    def gave_up(self, lost: int, dropped: int, sessions: int) -> None:
        """Closing, the disk stayed full: the ``lost`` rows still waiting are given up
        (``dropped``, the run's count, includes them), and the newest state of
        ``sessions`` sessions.  Said whatever was said before: it is how the run ends."""
        since, self.since = self.since, None
        if since is None:
            return
        log.warning(
            "the disk holding the database was still full when the store closed (after %.1f s of "
            "a full disk): %d rows that were waiting are lost; %d rows lost this run%s",
            time.monotonic() - since,
            lost,
            dropped,
            f" (and the latest state of {sessions} sessions)" if sessions else "",
        )
        self.stated = dropped

    def _once(self, key: str, message: str, *args: object) -> None:
        """Say ``message`` unless it was said this run."""
        if key not in self._said:
            self._said.add(key)
            log.warning(message, *args)
