"""Quit on SIGTERM and SIGHUP even when the terminal is already gone.

Textual writes the screen from a thread; when the terminal hangs up, that
thread dies on the first EIO, its bounded queue fills and the app's event loop
blocks in ``Queue.put`` for good, so a handler run by the loop never runs.
:class:`StopOnSignals` asks the app to quit from a plain signal handler (which
runs even while the main thread waits on a lock), and if the app has not
returned after a grace period it runs the last-resort cleanups (flush the
database, stop and remove the demo's agents) and exits the process itself.
A closed terminal does not always signal us (under `make demo`, make takes the
SIGHUP and waits), so a thread also watches the terminal and raises SIGHUP
itself when the terminal is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import termios
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["StopOnSignals", "GRACE_SECONDS"]

#: How long the app gets to quit the normal way before the process exits on its own.
GRACE_SECONDS = 5.0
#: How often the terminal is checked for having gone away.
TERMINAL_CHECK_SECONDS = 0.5

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopOnSignals:
    """Installed around ``app.run()``: SIGTERM/SIGHUP quit the app like ``q``.

    ``quit`` is called from the handler and must not block (schedule the
    app's exit on its loop); ``last_resort`` callbacks run, in order, in a
    watchdog thread only if the app is still running ``grace`` seconds later,
    then the process exits with 128 + the signal number."""

    def __init__(
        self,
        quit: Callable[[], None],
        *,
        grace: float = GRACE_SECONDS,
        exit_process: Callable[[int], Any] = os._exit,
    ) -> None:
        self.quit = quit
        self.grace = grace
        self.last_resort: list[Callable[[], None]] = []
        self.received: int | None = None
        self._exit_process = exit_process
        self._returned = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
            terminal = _terminal_fd()
            if terminal is not None:
                threading.Thread(
                    target=self._watch_terminal,
                    args=(terminal,),
                    name="loopwatch-terminal-watch",
                    daemon=True,
                ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._returned.set()
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            return
        self.received = signum
        if signum == signal.SIGHUP:
            _detach_from_terminal()
        threading.Thread(target=self._watchdog, name="loopwatch-stop-watchdog", daemon=True).start()
        try:
            self.quit()
        except Exception:  # the app may be half torn down; the watchdog still stands
            pass

    def _watch_terminal(self, fd: int) -> None:
        while not self._returned.wait(TERMINAL_CHECK_SECONDS):
            try:
                termios.tcgetattr(fd)
            except (termios.error, OSError):  # EIO: hung up, its window closed
                if self.received is None:
                    os.kill(os.getpid(), signal.SIGHUP)
                return

    def _watchdog(self) -> None:
        if self._returned.wait(self.grace):
            return
        for cleanup in self.last_resort:
            try:
                cleanup()
            except Exception as exc:  # one failed cleanup must not skip the others
                _say(f"loopwatch: cleanup after signal {self.received} failed: {exc}")
        self._exit_process(128 + (self.received or 0))


def _terminal_fd() -> int | None:
    for stream in (sys.__stdout__, sys.__stdin__):
        try:
            if stream is not None and os.isatty(stream.fileno()):
                return stream.fileno()
        except (OSError, ValueError):
            continue
    return None


def _detach_from_terminal() -> None:
    # The terminal is gone: point stdio at /dev/null so the cleanups' messages
    # and the input thread do not fail or spin on a dead tty.
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
