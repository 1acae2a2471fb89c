"""Themes: packaged files, user files, errors that name the key, switching live."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from monitor.config import Config, ConfigError, build_config
from monitor.events import Level
from monitor.ui.app import LoopwatchApp, check_keymap, validate_ui
from monitor.ui.themes import DOMAIN_VARIABLES, PACKAGED_THEMES, load_themes, parse_theme
from tests.scripted import frozen_clock, scripted_hub

REPO_THEMES = Path(__file__).resolve().parent.parent / "themes"
REQUIRED = {"loopwatch-dark", "loopwatch-light", "loopwatch-high-contrast", "loopwatch-ansi"}


def test_packaged_themes_are_complete_and_mirror_the_repository():
    """The four required themes parse, set every domain colour, and themes/ holds the same files."""
    themes = load_themes()
    assert REQUIRED <= set(themes)
    for name in REQUIRED:
        assert set(DOMAIN_VARIABLES) <= set(themes[name].variables), name
    assert themes["loopwatch-ansi"].ansi
    packaged = {p.name: p.read_bytes() for p in PACKAGED_THEMES.glob("*.toml")}
    repo = {p.name: p.read_bytes() for p in REPO_THEMES.glob("*.toml")}
    assert packaged == repo


def test_user_theme_file_is_loaded_and_overrides(tmp_path, monkeypatch):
    """A TOML file dropped in <config dir>/themes is offered by name."""
    monkeypatch.setenv("LOOPWATCH_CONFIG_DIR", str(tmp_path))
    (tmp_path / "themes").mkdir()
    (tmp_path / "themes" / "mine.toml").write_text(
        'name = "mine"\nprimary = "#ff00ff"\n[variables]\nlevel-warn = "#00ff00"\n'
    )
    themes = load_themes()
    assert themes["mine"].variables["level-warn"] == "#00ff00"
    validate_ui(build_config({"ui": {"theme": "mine"}}))


@pytest.mark.parametrize(
    "body, key",
    [
        ('primary = "#fff"\ncolour = "red"\n', "colour: unknown key"),
        ('primary = "not-a-colour"\n', "primary: not a colour"),
        ('primary = "#fff"\n[variables]\nlevel-warn = "nope"\n', "variables.level-warn: not a colour"),
        ("dark = true\n", "primary: required"),
        ('primary = "#fff"\ndark = "yes"\n', "dark: expected true or false"),
    ],
)
def test_bad_theme_file_names_the_key(tmp_path, body, key):
    """A broken theme file is a ConfigError naming the file and the key."""
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=key):
        parse_theme(path)


def test_unknown_theme_and_keymap_are_config_errors():
    """ui.theme and ui.keymap are validated before the terminal is touched."""
    with pytest.raises(ConfigError, match="ui.theme: unknown theme 'nope'"):
        validate_ui(build_config({"ui": {"theme": "nope"}}))
    with pytest.raises(ConfigError, match="ui.keymap.explode: unknown action"):
        check_keymap({"explode": "x"})
    check_keymap({"kill": "ctrl+k", "inject": "I", "quit": "ctrl+q"})


@pytest.mark.parametrize(
    ("keymap", "message"),
    [
        ({"kill": "ctrl+kk"}, "ui.keymap.kill: 'ctrl+kk': 'kk' is not a key name"),
        ({"kill": "foo+x"}, "foo is not a modifier"),
        ({"kill": "ctrl+k,"}, None),  # an empty part is ignored
        ({"kill": "a"}, "ui.keymap.kill: 'a' is already ack's key on the dashboard screen"),
        ({"ack": "ctrl+k", "kill": "a"}, None),  # moved out of the way: fine
        ({"kill": "f13,question_mark"}, "already help's key"),
    ],
)
def test_keymap_keys_must_exist_and_not_take_another_actions_key(keymap, message):
    """A typo in a key name or a key that would silently hide another action is an error naming it."""
    if message is None:
        check_keymap(keymap)
        return
    with pytest.raises(ConfigError, match=message.replace("+", r"\+")):
        check_keymap(keymap)


async def test_theme_switch_recolours_levels(tmp_path, monkeypatch):
    """Setting the theme (as the palette does) swaps the domain palette and restyles the table."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    config = Config()
    app = LoopwatchApp(
        config, clock=frozen_clock(), hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite")
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.flush_live()
        await pilot.pause()
        dark_warn = app.palette.level(Level.WARN).color
        table = app.screen.query_one("SessionsTable")
        rebuilds = table.rebuilds
        app.theme = "loopwatch-light"
        await pilot.pause()
        await pilot.pause()
        assert app.palette.level(Level.WARN).color != dark_warn
        assert app.palette.level(Level.WARN).color.triplet.hex == "#9a6700"
        assert table.rebuilds == rebuilds + 1
        assert table.palette is app.palette
    monkeypatch.undo()
    time.tzset()
