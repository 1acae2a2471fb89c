"""Alerts: a webhook (a real local HTTP server), a command (a real process), the
desktop notifier's absence, the rate limit, the bounded queue, the hub and doctor.

Nothing sleeps: the webhook server hands each request to a queue the test reads
with a deadline; the command writes a file the test polls for.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from monitor.alerts import SCHEMA, Alerts, alert_body, try_alerts
from monitor.config import ConfigError, build_config
from monitor.detect.base import Detection
from monitor.events import Event, Kind, Level
from monitor.hub import Hub
from tests.doctorkit import run_doctor

#: Hang guard for waiting on a thread or a process (not a performance assertion).
DEADLINE = 20.0
#: A command that writes its stdin to the file named by its argument.
RECORDER = "import sys, os; data = sys.stdin.buffer.read(); open(sys.argv[1] + '.tmp', 'wb').write(data); os.replace(sys.argv[1] + '.tmp', sys.argv[1])"


class Webhook:
    """A real HTTP server on 127.0.0.1: answers ``codes`` in turn (then 204), keeps each body."""

    def __init__(self, codes: list[int] | None = None):
        self.codes = list(codes or [])
        self.bodies: queue.Queue[dict] = queue.Queue()
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                outer.hits += 1
                code = outer.codes.pop(0) if outer.codes else 204
                if code < 300:
                    outer.bodies.put(body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _detection(session: str = "s", level: Level = Level.WARN, pattern: str = "call:1") -> Detection:
    return Detection(
        "exact_repeat",
        level,
        1.0,
        "bash called 4 times with identical arguments",
        pattern,
        count=4,
        tool="bash",
        session=session,
        ts=time.time(),
        nudge="[loopwatch] You've called bash 4 times.",
    )


def _looping_events(session: str, now: float) -> list[Event]:
    """The same failing call six times, with its results."""
    events = []
    for i in range(6):
        call = Event(
            Kind.TOOL_CALL, session, now + i, tool="bash", args={"command": "ls /nope"}, call_id=f"c{i}"
        )
        events.append(call)
        events.append(
            Event(Kind.TOOL_RESULT, session, now + i + 0.5, call_id=f"c{i}", content="ls: no", is_error=True)
        )
    return events


def _settings(**table):
    return build_config({"alerts": table}).alerts


def test_webhook_gets_the_documented_json_and_is_retried_with_back_off(monkeypatch):
    monkeypatch.setattr("monitor.alerts.BACKOFF_SECONDS", 0.01)
    with Webhook([503, 500]) as hook:
        alerts = Alerts(_settings(webhook=hook.url, retries=3))
        alerts.start()
        try:
            assert alerts.offer(_detection(), agent="claude-code")
            body = hook.bodies.get(timeout=DEADLINE)
        finally:
            alerts.stop()
        assert hook.hits == 3  # two failures, then delivered
        assert body["schema"] == SCHEMA and body["test"] is False
        assert (body["session"], body["level"], body["detector"], body["agent"]) == (
            "s",
            "warn",
            "exact_repeat",
            "claude-code",
        )
        assert body["nudge"].startswith("[loopwatch]") and body["detection"]["pattern"] == "call:1"
        assert alerts.counts.sent == 1 and alerts.counts.failed == 0


def test_a_webhook_that_refuses_is_not_retried():
    with Webhook([400]) as hook:
        alerts = Alerts(_settings(webhook=hook.url, retries=3))
        status, detail = alerts.post(alert_body(_detection()))
    assert status == "FIX" and "HTTP 400" in detail and hook.hits == 1


def test_an_unreachable_webhook_gives_up_after_its_retries(monkeypatch):
    monkeypatch.setattr("monitor.alerts.BACKOFF_SECONDS", 0.01)
    with Webhook() as hook:
        url = hook.url
    alerts = Alerts(_settings(webhook=url, retries=2, timeout_seconds=2))
    status, detail = alerts.post(alert_body(_detection()))
    assert status == "FIX" and "after 3 attempts" in detail


def test_the_command_gets_the_alert_on_stdin_without_a_shell(tmp_path: Path):
    out = tmp_path / "alert.json"
    # A shell would expand $HOME and the `;`: the argv reaches the program as it is.
    alerts = Alerts(_settings(command=[sys.executable, "-c", RECORDER, str(out)]))
    status, detail = alerts.run_command(alert_body(_detection(session="s; echo $HOME")))
    assert status == "OK", detail
    body = json.loads(out.read_text())
    assert body["session"] == "s; echo $HOME" and body["detector"] == "exact_repeat"


def test_a_command_that_hangs_is_killed_after_its_timeout():
    alerts = Alerts(
        _settings(command=[sys.executable, "-c", "import time; time.sleep(60)"], timeout_seconds=0.5)
    )
    status, detail = alerts.run_command(alert_body(_detection()))
    assert status == "FIX" and "killed" in detail


def test_a_missing_command_or_notifier_says_so(monkeypatch):
    alerts = Alerts(_settings(command=["/nonexistent/notify-me"]))
    assert alerts.run_command(alert_body(_detection())) == ("FIX", "/nonexistent/notify-me: not found")
    monkeypatch.setattr("monitor.alerts.shutil.which", lambda name: None)
    results = {sink: (status, detail) for sink, status, detail in try_alerts(_settings(desktop=True))}
    assert results["desktop"][0] == "FIX" and "no desktop notifier" in results["desktop"][1]
    results = {sink: (status, detail) for sink, status, detail in try_alerts(_settings())}
    assert results["desktop"][0] == "--" and "no notifier on this machine" in results["desktop"][1]


def test_one_alert_per_session_and_pattern_in_the_interval():
    now = [1000.0]
    alerts = Alerts(_settings(command=["true"], every_seconds=300), clock=lambda: now[0])
    assert alerts.offer(_detection())
    assert not alerts.offer(_detection())  # the same loop again: rate-limited
    assert alerts.offer(_detection(pattern="call:2"))  # another loop of the session
    assert alerts.offer(_detection(session="t"))  # another session
    assert not alerts.offer(_detection(level=Level.NOTICE, pattern="call:3"))  # below the level
    now[0] += 301
    assert alerts.offer(_detection())
    assert alerts.counts.limited == 1


def test_a_full_queue_drops_and_counts_never_blocks():
    alerts = Alerts(_settings(command=["true"], every_seconds=0))  # not started: nothing drains
    offered = [alerts.offer(_detection(pattern=f"p{i}")) for i in range(100)]
    assert offered.count(True) == 64 and alerts.counts.dropped == 36


def test_alert_settings_are_validated():
    with pytest.raises(ConfigError, match="alerts.webhook"):
        build_config({"alerts": {"webhook": "file:///etc/passwd"}})
    with pytest.raises(ConfigError, match=r"alerts.command\[1\]"):
        build_config({"alerts": {"command": ["notify", 3]}})
    with pytest.raises(ConfigError, match="alerts.level"):
        build_config({"alerts": {"level": "loud"}})
    with pytest.raises(ConfigError, match="alerts.retries"):
        build_config({"alerts": {"retries": 50}})
    assert build_config({"alerts": {"level": "critical"}}).alerts.level == Level.CRITICAL


async def test_the_hub_sends_an_alert_when_a_session_reaches_warn(tmp_path: Path):
    with Webhook() as hook:
        hub = Hub(build_config({"alerts": {"webhook": hook.url}}))
        await hub.start()
        try:
            await hub.submit(_looping_events("looper", time.time()))
            await hub.join()
            body = await asyncio.to_thread(hook.bodies.get, True, DEADLINE)
            flagged = [d for d in hub.recent_detections() if d.level >= Level.WARN]
            summary = hub.engine.summary("looper")
            episodes = {e.number for e in (*summary.episodes, *summary.closed_episodes)}
            limited = hub.alerts.counts.limited
        finally:
            await hub.stop()
    assert body["session"] == "looper" and body["level"] in ("warn", "critical", "terminate")
    # The same loop escalating is one episode: one alert per episode in the interval,
    # its higher rungs rate-limited, and no alert per repeat.
    assert 1 <= hook.hits <= len(episodes) < len(flagged) and limited > 0


def test_doctor_sends_a_test_alert_to_each_configured_one(tmp_path: Path):
    out = tmp_path / "doctor-alert.json"
    with Webhook() as hook:
        command = json.dumps([sys.executable, "-c", RECORDER, str(out)])
        config = f'[control]\nguard = true\n[alerts]\nwebhook = "{hook.url}"\ncommand = {command}\n'
        result = run_doctor(tmp_path, config, timeout=DEADLINE)
        posted = hook.bodies.get(timeout=DEADLINE)
    lines = result.stdout.splitlines()
    assert any(line.startswith("OK  alerts: webhook: HTTP 204") for line in lines), result.stdout
    assert any(line.startswith("OK  alerts: command") for line in lines), result.stdout
    assert posted["test"] is True and json.loads(out.read_text())["test"] is True
    assert any(line.startswith("OK  guard: on: a call that continues a loop at critical") for line in lines)


async def test_a_failing_alert_is_reported_to_the_hubs_subscribers(tmp_path: Path):
    from monitor.updates import ProblemReported
    from tests.socketkit import Updates

    hub = Hub(build_config({"alerts": {"command": ["/nonexistent/page-me"]}}))
    await hub.start()
    updates = Updates(hub)
    try:
        await hub.submit(_looping_events("looper", time.time()))
        await hub.join()
        update = await updates.wait(lambda u: isinstance(u, ProblemReported) and u.problem.source == "alerts")
    finally:
        await hub.stop()
    assert "alert to command failed" in update.problem.reason and "not found" in update.problem.reason
