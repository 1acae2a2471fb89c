"""Config that would break a run is refused at load time, naming the key (issue 32, item 13).

Real TOML files through ``load_config`` and the real CLI: a nudge template
that names a position (``{0}``), reaches into an object
(``{summary.__class__}``) or cannot format; numbers out of their bounds
(``flush_ms`` of 2^63, ``max_line_bytes = 0``, ``max_connections = 0``, nan,
inf); TOML nested 3,000 deep.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import ConfigError, load_config
from tests.test_watch_headless import ROOT, env_for, loop_lines


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "template, says",
    [
        ("{0}", "{0} is not a field"),
        ("{}", "{} is not a field"),
        ("{summary.__class__.__mro__}", "{summary.__class__.__mro__} is not a field"),
        ("{summary[0]}", "is not a field"),
        ("{secret}", "{secret} is not a field"),
        ("{count:{summary}}", "cannot hold another field"),
        ("{summary:d}", "cannot be formatted"),
        ("You've {summary", "not a valid template"),
    ],
)
def test_a_bad_nudge_template_is_refused(tmp_path, template, says):
    path = config_file(tmp_path, f"[escalation.nudges]\nwarn = {json.dumps(template)}\n")
    with pytest.raises(ConfigError, match="escalation.nudges.warn") as refused:
        load_config(path)
    assert says in str(refused.value)


def test_documented_templates_still_load(tmp_path):
    text = '[escalation.nudges]\nwarn = "[ops] You\'ve {summary}. {advice} ({tool} x{count:>3}, {detector}) {{literal}}"\n'
    config = load_config(config_file(tmp_path, text))
    assert "{summary}" in config.escalation.nudges["warn"]


@pytest.mark.parametrize(
    "section, line, says",
    [
        ("store", "flush_ms = 9223372036854775807", "store.flush_ms"),
        ("store", "batch_size = 0", "store.batch_size"),
        ("sources", "max_line_bytes = 0", "sources.max_line_bytes"),
        ("sources", "max_connections = 0", "sources.max_connections"),
        ("sources", "idle_timeout_seconds = nan", "finite"),
        ("sources", "idle_timeout_seconds = inf", "finite"),
        ("store", "retention_days = inf", "finite"),
        ("ui", "refresh_hz = 0", "ui.refresh_hz"),
        ("detectors.exact_repeat", "threshold = 99999999999999", "at most"),
    ],
)
def test_numbers_out_of_bounds_are_refused(tmp_path, section, line, says):
    with pytest.raises(ConfigError, match=section.replace(".", r"\.")) as refused:
        load_config(config_file(tmp_path, f"[{section}]\n{line}\n"))
    assert says in str(refused.value)


def test_toml_nested_3000_deep_is_a_config_error(tmp_path):
    path = config_file(tmp_path, "x = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


@pytest.mark.parametrize(
    "text",
    [
        '[escalation.nudges]\nwarn = "{0}"\n',
        "[store]\nflush_ms = 9223372036854775807\n",
        "x = " + "[" * 3000 + "]" * 3000,
    ],
    ids=["template", "flush_ms", "nested"],
)
def test_the_cli_says_so_and_exits_2_without_a_traceback(tmp_path, text):
    path = config_file(tmp_path, text)
    log = tmp_path / "agent.jsonl"
    log.write_text(loop_lines("s1", 4))
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "scan", "--config", str(path), str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(tmp_path),
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and str(path) in done.stderr
