"""Alerts outside the terminal: a desktop notification, a webhook, a command.

``[alerts]`` (monitor/config.py) says where: ``desktop = true`` (``notify-send``
on Linux, ``osascript`` on macOS), ``webhook = "https://…"`` (a JSON POST,
retried with back-off), ``command = ["argv", …]`` (run without a shell, the
alert as JSON on its stdin, killed after ``timeout_seconds``).  A session
reaching ``level`` (``warn``) sends an alert when a loop episode opens or
climbs a rung at or above it, at most one per episode in ``every_seconds``
(the hub keys the rate limit on the session and the episode's number).

Nothing here blocks the hub: :meth:`Alerts.offer` puts the alert in a bounded
queue (a full queue drops it, counted) and one daemon thread delivers it.
The body is documented in docs/alerts.md (:data:`SCHEMA`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor import __version__
from monitor.formats.base import Problem
from monitor.updates import ProblemReported

log = logging.getLogger("loopwatch.alerts")

SCHEMA = "loopwatch.alert/1"
#: Alerts waiting for the thread; more are dropped (and counted), never queued without bound.
QUEUE_SIZE = 64
#: Rate-limit keys remembered (the oldest forgotten first).
MAX_KEYS = 10_000
#: First back-off between webhook attempts; doubled each retry.
BACKOFF_SECONDS = 1.0
#: What a command or the desktop may print that is kept for the report.
OUTPUT_CHARS = 300


@dataclass
class Counts:
    sent: int = 0
    failed: int = 0
    dropped: int = 0  # the queue was full
    limited: int = 0  # rate-limited


def desktop_notifier() -> list[str] | None:
    """The argv prefix of this machine's desktop notifier, or None (none available)."""
    if sys.platform == "darwin":
        found = shutil.which("osascript")
        if found:
            return [found]
    found = shutil.which("notify-send")
    return [found] if found else None


def alert_body(detection: Any, agent: str | None = None, test: bool = False) -> dict[str, Any]:
    """The JSON of one alert (docs/alerts.md)."""
    fields = detection.to_dict() if hasattr(detection, "to_dict") else dict(detection)
    return {
        "schema": SCHEMA,
        "test": test,
        "monitor": {"host": socket.gethostname(), "pid": os.getpid(), "version": __version__},
        "agent": agent,
        "session": fields.get("session"),
        "level": fields.get("level"),
        "detector": fields.get("detector"),
        "pattern": fields.get("pattern"),
        "message": fields.get("message"),
        "count": fields.get("count"),
        "tool": fields.get("tool"),
        "nudge": fields.get("nudge"),
        "where": {"file": fields.get("file"), "line": fields.get("line"), "seq": fields.get("seq")},
        "ts": getattr(detection, "ts", None) or time.time(),
        "detection": fields,
    }


class Alerts:
    """Rate-limits alerts and delivers them on their own thread."""

    def __init__(self, settings: Any, *, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.clock = clock
        self.counts = Counts()
        self.last: OrderedDict[tuple[Any, ...], float] = OrderedDict()
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_SIZE)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.notifier = desktop_notifier() if settings.desktop else None
        self.on = self.wanted(settings)
        self.results: list[tuple[str, str, str]] = []  # (sink, status, detail), the latest few
        self.report: Callable[[object], object] | None = None  # failures, to the hub's subscribers

    @staticmethod
    def wanted(settings: Any) -> bool:
        return bool(settings.desktop or settings.webhook or settings.command)

    def start(self, publish: Callable[[object], None] | None = None) -> None:
        """Start the thread; ``publish`` (the hub's, called on the running loop) hears of each failure."""
        if publish is not None:
            loop = asyncio.get_running_loop()
            self.report = lambda update: loop.call_soon_threadsafe(publish, update)
        if self.thread is None and self.on:
            self.thread = threading.Thread(target=self._run, name="loopwatch-alerts", daemon=True)
            self.thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread (what is queued is given up to ``timeout`` seconds)."""
        if self.thread is None:
            return
        self.stopping.set()
        try:
            self.queue.put_nowait(None)
        except queue.Full:
            pass
        self.thread.join(timeout)
        self.thread = None

    def offer(self, detection: Any, agent: str | None = None, key: tuple[Any, ...] | None = None) -> bool:
        """Queue an alert for ``detection`` unless rate-limited or the queue is full (never blocks).
        ``key`` is what the rate limit counts per (the hub's: session and loop episode;
        default: session, detector and pattern)."""
        if detection.level < self.settings.level or detection.suppressed:
            return False
        key = key or (detection.session, detection.detector, detection.pattern)
        now = self.clock()
        last = self.last.get(key)
        if last is not None and now - last < self.settings.every_seconds:
            self.counts.limited += 1
            return False
        try:
            self.queue.put_nowait(alert_body(detection, agent))
        except queue.Full:
            self.counts.dropped += 1
            return False
        self.last[key] = now
        self.last.move_to_end(key)
        while len(self.last) > MAX_KEYS:
            self.last.popitem(last=False)
        return True

    def _run(self) -> None:
        while True:
            body = self.queue.get()
            if body is None:
                return
            for sink, status, detail in self.deliver(body):
                if status == "OK":
                    self.counts.sent += 1
                else:
                    self.counts.failed += 1
                    log.warning("alert to %s failed: %s", sink, detail)
                    self._tell(f"alert to {sink} failed for session {body.get('session')}: {detail}")
                self.results = [*self.results[-9:], (sink, status, detail)]

    def _tell(self, reason: str) -> None:
        if self.report is None:
            return
        try:
            self.report(ProblemReported(Problem("alerts", None, reason)))
        except RuntimeError:  # the loop closed while the monitor stopped
            pass

    def deliver(self, body: dict[str, Any]) -> list[tuple[str, str, str]]:
        """Send ``body`` to every configured sink: ``(sink, "OK" | "FIX", detail)`` each."""
        s = self.settings
        done = []
        if s.desktop:
            done.append(("desktop", *self.notify(body)))
        if s.webhook:
            done.append(("webhook", *self.post(body)))
        if s.command:
            done.append(("command", *self.run_command(body)))
        return done

    def notify(self, body: dict[str, Any]) -> tuple[str, str]:
        if self.notifier is None:
            return "FIX", "no desktop notifier here (install notify-send: libnotify-bin; macOS: osascript)"
        return _run(notifier_argv(self.notifier, body), b"", self.settings.timeout_seconds)

    def post(self, body: dict[str, Any]) -> tuple[str, str]:
        """POST the JSON; retried (``retries`` times, back-off doubling from 1 s) on a
        network error or a 5xx/429 answer; a 4xx is final."""
        data = json.dumps(body, ensure_ascii=False, default=str).encode()
        delay = BACKOFF_SECONDS
        detail = ""
        for attempt in range(self.settings.retries + 1):
            request = urllib.request.Request(
                self.settings.webhook,
                data=data,
                method="POST",
                headers={"Content-Type": "application/json", "User-Agent": f"loopwatch/{__version__}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.settings.timeout_seconds) as answer:
                    return "OK", f"HTTP {answer.status} from {self.settings.webhook}"
            except urllib.error.HTTPError as exc:
                detail = f"HTTP {exc.code} from {self.settings.webhook}"
                if exc.code < 500 and exc.code != 429:
                    return "FIX", detail
            except (urllib.error.URLError, OSError, ValueError) as exc:
                detail = f"{self.settings.webhook}: {getattr(exc, 'reason', exc)}"
            if attempt < self.settings.retries and self.stopping.wait(delay):
                break  # stopping: give up the retries
            delay *= 2
        return "FIX", f"{detail} (after {self.settings.retries + 1} attempts)"

    def run_command(self, body: dict[str, Any]) -> tuple[str, str]:
        data = json.dumps(body, ensure_ascii=False, default=str).encode()
        return _run(list(self.settings.command), data, self.settings.timeout_seconds)


#: The AppleScript that shows a notification from its arguments (items 2 and 3: the first
#: is a fixed word, so that no later argument can be read as an option of osascript).
_OSASCRIPT = (
    "on run argv",
    "display notification (item 3 of argv) with title (item 2 of argv)",
    "end run",
)


def notifier_argv(notifier: list[str], body: dict[str, Any]) -> list[str]:
    """The notifier's argv for one alert.  The session id and the message are the agent's
    text: control characters become pictures (no terminal escape reaches anything), the
    text never becomes an option (``--`` before it; osascript gets it as data after a
    fixed first argument, never inside the script) nor markup (notify-send's body is
    markup to most notification servers: ``<``, ``>``, ``&`` escaped)."""
    from html import escape

    from monitor.text import printable

    title = " ".join(printable(f"loopwatch: {body.get('session')} at {body.get('level')}").split())[:200]
    text = printable(str(body.get("message") or ""))[:200]
    if Path(notifier[0]).name == "osascript":
        script = [part for line in _OSASCRIPT for part in ("-e", line)]
        return [notifier[0], *script, "loopwatch", title, text]
    return [*notifier, "--app-name=loopwatch", "--", title, escape(text, quote=False)]


def _run(argv: list[str], stdin: bytes, timeout: float) -> tuple[str, str]:
    """Run ``argv`` (no shell) with ``stdin``; ("OK" | "FIX", what happened)."""
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, timeout=timeout, shell=False, close_fds=True
        )
    except FileNotFoundError:
        return "FIX", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return "FIX", f"{argv[0]}: still running after {timeout:g} s (killed)"
    except OSError as exc:
        return "FIX", f"{argv[0]}: {exc.strerror or exc}"
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip()[:OUTPUT_CHARS]
        return "FIX", f"{argv[0]} exited with {done.returncode}" + (f": {err}" if err else "")
    return "OK", f"{argv[0]} ran (exit 0)"


def try_alerts(settings: Any) -> list[tuple[str, str, str]]:
    """What ``doctor`` shows: a test alert sent to each configured sink, and the result."""
    sample = {
        "session": "loopwatch-doctor-test",
        "level": settings.level.label,
        "detector": "doctor",
        "pattern": "test",
        "message": "a test alert from loopwatch doctor",
        "count": 0,
    }
    alerts = Alerts(settings)
    results = alerts.deliver(alert_body(sample, "loopwatch", test=True))
    if not settings.desktop:
        where = desktop_notifier()
        results.insert(
            0,
            (
                "desktop",
                "--",
                f"off ({'available: ' + where[0] if where else 'no notifier on this machine'}; "
                "[alerts] desktop = true)",
            ),
        )
    if not settings.webhook:
        results.append(("webhook", "--", "none ([alerts] webhook = URL)"))
    if not settings.command:
        results.append(("command", "--", "none ([alerts] command = [argv])"))
    return results
