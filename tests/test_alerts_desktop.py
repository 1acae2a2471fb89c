"""The desktop notifier for real, and ``doctor``'s line for each configured alert.

No notification server runs here: a stand-in ``notify-send`` (Linux) or ``osascript``
(macOS) put first on PATH in tmp_path records the argv it was run with, one JSON line
per run, and exits 0.  The alert is the agent's text (a session id, a tool name in the
message): it must reach the notifier as data -- never an option, never markup, never
a terminal escape.  Nothing sleeps: the record file is polled with a deadline.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from monitor.alerts import Alerts, alert_body, desktop_notifier
from monitor.config import build_config
from monitor.detect.base import Detection
from monitor.events import Level
from monitor.hub import Hub
from tests.doctorkit import run_doctor
from tests.test_alerts import DEADLINE, RECORDER, Webhook, _looping_events

#: The agent's text, hostile: an option, markup, a terminal title escape and a screen clear.
HOSTILE_SESSION = "-rf <b>boss</b>\x1b]0;pwned\x07"
HOSTILE_MESSAGE = "--help <i>me</i> & \x1b[2J bash called 4 times"

STAND_IN = """#!{python}
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs.jsonl"), "a") as out:
    out.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


def _stand_in(bin_dir: Path, name: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    return bin_dir / "runs.jsonl"


def _runs(record: Path, count: int = 1) -> list[list[str]]:
    """The stand-in's runs, once there are ``count`` of them (hang guard: DEADLINE)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if record.exists():
            lines = record.read_text().splitlines()
            if len(lines) >= count:
                return [json.loads(line) for line in lines]
        time.sleep(0.02)  # polling a file another process writes, with a deadline
    raise AssertionError(f"the notifier ran fewer than {count} times")


def _detection(session: str = HOSTILE_SESSION, message: str = HOSTILE_MESSAGE) -> Detection:
    return Detection(
        "exact_repeat", Level.WARN, 1.0, message, "call:1", count=4, session=session, ts=time.time()
    )


def _settings(**table):
    return build_config({"alerts": table}).alerts


def test_notify_send_gets_the_alert_as_data_not_options_markup_or_escapes(tmp_path, monkeypatch):
    record = _stand_in(tmp_path / "bin", "notify-send")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sys, "platform", "linux")
    alerts = Alerts(_settings(desktop=True))
    assert alerts.notifier == [str(tmp_path / "bin" / "notify-send")]
    status, detail = alerts.notify(alert_body(_detection()))
    assert status == "OK", detail
    [argv] = _runs(record)
    assert argv[0] == "notify-send" and argv[1] == "--app-name=loopwatch"
    # Everything after `--` is an operand: a title or body starting with "-" is no option.
    assert argv[2] == "--" and len(argv) == 5
    title, body = argv[3], argv[4]
    assert title.startswith("loopwatch: -rf <b>boss</b>") and title.endswith("at warn")
    assert body == "--help &lt;i&gt;me&lt;/i&gt; &amp; ␛[2J bash called 4 times"  # markup escaped
    for text in (title, body):
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)  # no control character


def test_osascript_gets_the_alert_as_arguments_never_inside_the_script(tmp_path, monkeypatch):
    record = _stand_in(tmp_path / "bin", "osascript")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sys, "platform", "darwin")
    alerts = Alerts(_settings(desktop=True))
    assert alerts.notifier == [str(tmp_path / "bin" / "osascript")]
    hostile = 'x" with title "y" & (do shell script "touch /tmp/owned") & "'
    status, detail = alerts.notify(alert_body(_detection(message=hostile)))
    assert status == "OK", detail
    [argv] = _runs(record)
    script = [argv[i + 1] for i, part in enumerate(argv[:-3]) if part == "-e"]
    assert script == [
        "on run argv",
        "display notification (item 3 of argv) with title (item 2 of argv)",
        "end run",
    ]
    # The text is data after a fixed first argument: no quote of it can end a string in
    # the script, and an argument starting with "-" comes after the first operand.
    assert argv[-3] == "loopwatch" and argv[-1] == hostile
    assert argv[-2].startswith("loopwatch: -rf <b>boss</b>") and "\x1b" not in argv[-2]


def test_no_notifier_on_path_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "platform", "linux")
    assert desktop_notifier() is None
    status, detail = Alerts(_settings(desktop=True)).notify(alert_body(_detection()))
    assert status == "FIX" and "no desktop notifier" in detail


async def test_a_session_at_warn_notifies_the_desktop_once_per_episode(tmp_path, monkeypatch):
    """Through the hub: a loop that escalates warn → critical is one episode, one notification."""
    record = _stand_in(tmp_path / "bin", "notify-send")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sys, "platform", "linux")
    hub = Hub(build_config({"alerts": {"desktop": True}}))
    await hub.start()
    try:
        await hub.submit(_looping_events("looper", time.time()))
        await hub.join()
        summary = hub.engine.summary("looper")
        episodes = {e.number for e in (*summary.episodes, *summary.closed_episodes)}
        flagged = [d for d in hub.recent_detections() if d.level >= Level.WARN]
    finally:
        await hub.stop()  # waits for what the alert thread still has
    runs = _runs(record)
    assert len(runs) == len(episodes) == 1 < len(flagged)
    assert runs[0][3] == "loopwatch: looper at warn" and hub.alerts.counts.limited > 0


def _doctor(tmp_path: Path, config_text: str, path: str) -> list[str]:
    result = run_doctor(tmp_path, config_text, path=path, timeout=DEADLINE * 3)
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stdout.splitlines() if "alerts:" in line]


@pytest.mark.skipif(sys.platform == "darwin", reason="the stand-in is notify-send (Linux)")
def test_doctor_reports_each_alert_found_reachable_and_running(tmp_path):
    record = _stand_in(tmp_path / "bin", "notify-send")
    out = tmp_path / "doctor-alert.json"
    command = json.dumps([sys.executable, "-c", RECORDER, str(out)])
    with Webhook() as hook:
        lines = _doctor(
            tmp_path,
            f'[alerts]\ndesktop = true\nwebhook = "{hook.url}"\ncommand = {command}\n',
            f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin",
        )
    assert lines[0].startswith("OK  alerts: desktop: ") and "notify-send ran (exit 0)" in lines[0], lines
    assert lines[1].startswith("OK  alerts: webhook: HTTP 204 from "), lines
    assert lines[2].startswith("OK  alerts: command: ") and "ran (exit 0)" in lines[2], lines
    [argv] = _runs(record)
    assert argv[3] == "loopwatch: loopwatch-doctor-test at warn" and json.loads(out.read_text())["test"]


def test_doctor_reports_each_alert_not_found_unreachable_and_failing(tmp_path):
    with Webhook() as hook:
        url = hook.url  # closed when the block ends: nothing listens there any more
    command = json.dumps([sys.executable, "-c", "import sys; sys.exit('no pager configured')"])
    lines = _doctor(
        tmp_path,
        f'[alerts]\ndesktop = true\nwebhook = "{url}"\nretries = 0\ntimeout_seconds = 2\ncommand = {command}\n',
        str(tmp_path / "empty"),
    )
    assert lines[0].startswith("FIX alerts: desktop: no desktop notifier here"), lines
    assert lines[1].startswith(f"FIX alerts: webhook: {url}: ") and "after 1 attempts" in lines[1], lines
    assert lines[2].startswith("FIX alerts: command: ") and "exited with 1: no pager configured" in lines[2]


def test_doctor_says_which_alerts_are_off(tmp_path):
    _stand_in(tmp_path / "bin", "notify-send")
    lines = _doctor(tmp_path, "", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    assert lines[0].startswith("--  alerts: desktop: off (available: ") and "notify-send" in lines[0]
    assert lines[1:] == [
        "--  alerts: webhook: none ([alerts] webhook = URL)",
        "--  alerts: command: none ([alerts] command = [argv])",
    ]
