"""Configuration: presets, the TOML file, per-tool overrides, and errors that name the key."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import PRESETS, ConfigError, build_config, load_config
from monitor.detect import REGISTRY
from monitor.detect.engine import Engine
from monitor.events import Level
from tests.eventkit import Script, by


def scan_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # A config file in the developer's own config dir must not change the outcome.
    env = {"LOOPWATCH_CONFIG_DIR": os.devnull + "-no-config", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "monitor", "scan", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


def loop_log(tmp_path: Path) -> Path:
    s = Script()
    for _ in range(4):
        s.call("web_search", {"query": "loopwatch config"}, "no results")
    return s.write(tmp_path / "loop.jsonl")


# -- presets -----------------------------------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
def test_every_detector_gets_its_preset(preset):
    """Each preset applies each detector's own overrides on top of its defaults."""
    config = build_config({}, preset=preset)
    for name, cls in REGISTRY.items():
        expected = cls.Settings(**cls.presets.get(preset, {}))
        assert config.detector_settings(name) == expected, name


def test_presets_differ_in_the_documented_direction():
    """conservative waits longer than balanced, aggressive flags sooner (exact repeat: 5 / 3 / 2)."""
    thresholds = [
        build_config({}, preset=p).detector_settings("exact_repeat").threshold
        for p in ("conservative", "balanced", "aggressive")
    ]
    assert thresholds == [5, 3, 2]


def test_preset_from_file_and_command_line(tmp_path):
    """The file names a preset; --preset overrides it; the file's own tables still apply on top."""
    path = tmp_path / "c.toml"
    path.write_text('preset = "aggressive"\n[detectors.cycle]\nenabled = false\n')
    from_file = load_config(path)
    assert from_file.preset == "aggressive"
    overridden = load_config(path, preset="conservative")
    assert overridden.preset == "conservative"
    assert overridden.detector_settings("exact_repeat").threshold == 5
    assert overridden.detector_settings("cycle").enabled is False
    assert from_file.with_preset("balanced").detector_settings("cycle").enabled is False


# -- the TOML file ---------------------------------------------------------------------------


def test_a_hand_written_file_with_every_section(tmp_path):
    """Every documented section loads and lands in the right place."""
    path = tmp_path / "config.toml"
    path.write_text(
        'preset = "balanced"\n'
        "[detectors.exact_repeat]\nthreshold = 4\nwindow = 12\n"
        "[detectors.limits]\nmax_iterations = 100\nmax_cost_usd = 10\n"
        "[tools.write_stdin]\nexempt = true\n"
        "[tools.web_search]\nthreshold = 6\n"
        '[escalation]\nladder = ["warn", "warn", "terminate"]\ncooldown_seconds = 60\n'
        '[escalation.nudges]\nwarn = "Please stop repeating {tool}."\n'
        '[store]\npath = "/tmp/x.db"\nretention_days = 30\n'
        '[sources]\npaths = ["~/agents/logs"]\nfrom_start = true\n'
        "[control]\nauto_inject = true\nkill_grace_seconds = 2.5\n"
        '[ui]\ntheme = "loopwatch-light"\nrefresh_hz = 5\nkeymap = { kill = "ctrl+k" }\n'
    )
    config = load_config(path)
    assert config.path == path
    assert config.detector_settings("exact_repeat").threshold == 4
    assert config.detector_settings("exact_repeat").window == 12
    limits = config.detector_settings("limits")
    assert limits.max_iterations == 100 and limits.max_cost_usd == 10.0
    assert isinstance(limits.max_cost_usd, float)
    assert config.tool_overrides["write_stdin"].exempt
    assert config.tool_overrides["web_search"].threshold == 6
    assert config.tool_overrides["web_search"].exempt is False
    assert config.escalation.ladder == (Level.WARN, Level.WARN, Level.TERMINATE)
    assert config.escalation.cooldown_seconds == 60.0
    assert config.escalation.nudges["warn"] == "Please stop repeating {tool}."
    assert config.escalation.nudges["critical"]  # the others keep their defaults
    assert config.store.path == "/tmp/x.db" and config.store.retention_days == 30.0
    assert config.sources.paths == ("~/agents/logs",) and config.sources.from_start
    assert config.control.auto_inject and config.control.kill_grace_seconds == 2.5
    assert config.ui.theme == "loopwatch-light" and config.ui.keymap == {"kill": "ctrl+k"}


def test_every_detector_setting_can_be_set_from_toml():
    """Each field of each detector's settings accepts a value of its own type from TOML."""
    for name, cls in REGISTRY.items():
        table = {}
        for f in dataclasses.fields(cls.Settings):
            default = getattr(cls.Settings(), f.name)
            if isinstance(default, bool):
                table[f.name] = not default
            elif isinstance(default, int):
                table[f.name] = default + 1
            elif isinstance(default, float):
                table[f.name] = default + 0.5
            elif isinstance(default, str):
                table[f.name] = default
            elif isinstance(default, tuple):
                table[f.name] = list(default)
        settings = build_config({"detectors": {name: table}}).detector_settings(name)
        for key, value in table.items():
            got = getattr(settings, key)
            assert (list(got) if isinstance(got, tuple) else got) == value, f"{name}.{key}"


def test_disabled_detectors_do_not_run():
    """enabled = false removes a detector from the engine."""
    config = build_config({"detectors": {"exact_repeat": {"enabled": False}}})
    engine = Engine(config)
    state = engine.session("s1")
    assert "exact_repeat" not in [d.name for d in state.detectors]


def test_default_config_file_in_the_user_config_dir(tmp_path):
    """Without --config, config.toml in the user config dir (LOOPWATCH_CONFIG_DIR) is used."""
    log = loop_log(tmp_path)
    confdir = tmp_path / "conf"
    confdir.mkdir()
    assert scan_cli(str(log), env={"LOOPWATCH_CONFIG_DIR": str(confdir)}).returncode == 1
    (confdir / "config.toml").write_text("[tools.web_search]\nexempt = true\n")
    quiet = scan_cli(str(log), env={"LOOPWATCH_CONFIG_DIR": str(confdir)})
    assert quiet.returncode == 0, quiet.stdout


# -- per-tool overrides ------------------------------------------------------------------------


def test_exempt_tool_is_never_flagged_but_others_are():
    """[tools.sleep] exempt = true: sleeping repeatedly is fine; the same loop on ls is not."""
    config = build_config({"tools": {"sleep": {"exempt": True}}})
    s = Script()
    for _ in range(5):
        s.call("sleep", {"seconds": 30}, "")
    for _ in range(3):
        s.call("ls", {"path": "build"}, "No such file")
    warned = by(s.run(config), "exact_repeat")
    assert warned and all(d.tool == "ls" for d in warned)


def test_raised_threshold_for_one_tool():
    """[tools.web_search] threshold = 6: five identical searches pass, the sixth warns."""
    config = build_config({"tools": {"web_search": {"threshold": 6}}})
    s = Script()
    for _ in range(5):
        s.call("web_search", {"query": "same"}, "nothing")
    assert not by(s.run(config), "exact_repeat")
    s.call("web_search", {"query": "same"}, "nothing")
    assert [d.count for d in by(s.run(config), "exact_repeat")] == [6]


# -- invalid configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "toml,key",
    [
        ("colour = 1\n", "colour"),
        ('preset = "reckless"\n', "preset"),
        ("[detectors.nope]\nthreshold = 1\n", "detectors.nope"),
        ("[detectors.exact_repeat]\nthreshhold = 4\n", "detectors.exact_repeat.threshhold"),
        ('[detectors.exact_repeat]\nthreshold = "three"\n', "detectors.exact_repeat.threshold"),
        ("[detectors.exact_repeat]\nthreshold = -1\n", "detectors.exact_repeat.threshold"),
        ("[detectors.exact_repeat]\nthreshold = true\n", "detectors.exact_repeat.threshold"),
        ('[detectors.limits]\nmax_cost_usd = "ten"\n', "detectors.limits.max_cost_usd"),
        ('[detectors.exact_repeat]\nenabled = "no"\n', "detectors.exact_repeat.enabled"),
        ("detectors = 3\n", "detectors"),
        ("[tools.bash]\nexempt = 1\n", "tools.bash.exempt"),
        ("[tools.bash]\nskip = true\n", "tools.bash.skip"),
        ('[escalation]\nladder = ["warn", "panic"]\n', "escalation.ladder[1]"),
        ("[escalation]\nladder = []\n", "escalation.ladder"),
        ('[escalation]\nladder = "warn"\n', "escalation.ladder"),
        ('[escalation.nudges]\nshout = "x"\n', "escalation.nudges.shout"),
        ("[escalation.nudges]\nwarn = 3\n", "escalation.nudges.warn"),
        ("[store]\npath = 7\n", "store.path"),
        ('[sources]\npaths = "logs"\n', "sources.paths"),
        ("[ui]\nkeymap = { kill = 1 }\n", "ui.keymap.kill"),
    ],
)
def test_invalid_config_names_the_key(tmp_path, toml, key):
    """Each mistake raises ConfigError whose message starts with the file and names the key."""
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}"), message


def test_invalid_toml_and_missing_file(tmp_path):
    """Broken TOML and a named file that does not exist are clear errors."""
    path = tmp_path / "broken.toml"
    path.write_text("[detectors\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.toml")


def test_cli_exits_2_with_the_key_on_stderr(tmp_path):
    """`loopwatch scan --config bad.toml` exits 2 and says which key is wrong; so does a bad --preset."""
    log = loop_log(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text('[detectors.exact_repeat]\nthreshold = "three"\n')
    result = scan_cli("--config", str(bad), str(log))
    assert result.returncode == 2
    assert "detectors.exact_repeat.threshold: expected an integer, got 'three'" in result.stderr
    assert result.stdout == ""
    missing = scan_cli("--config", str(tmp_path / "nope.toml"), str(log))
    assert missing.returncode == 2 and "no such config file" in missing.stderr
    preset = scan_cli("--preset", "reckless", str(log))
    assert preset.returncode == 2 and "reckless" in preset.stderr


def test_cli_config_changes_the_outcome(tmp_path):
    """The same log exits 1 by default and 0 with a config exempting the looping tool."""
    log = loop_log(tmp_path)
    good = tmp_path / "good.toml"
    good.write_text("[tools.web_search]\nexempt = true\n")
    assert scan_cli(str(log)).returncode == 1
    assert scan_cli("--config", str(good), str(log)).returncode == 0
