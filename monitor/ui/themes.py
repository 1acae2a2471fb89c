"""Theme files: TOML in ``themes/`` (packaged) and ``<config dir>/themes``.

A theme file sets Textual's base colours and loopwatch's domain variables::

    name = "loopwatch-dark"
    dark = true
    primary = "#4ea1ff"
    background = "#101418"
    [variables]
    level-warn = "#f0b429"        # escalation colours are theme variables
    repeat-highlight = "#3b3215"  # background of repeated items in the window

Packaged themes live in ``monitor/ui/themes`` (the repository's ``themes/``
holds identical copies); a file in the user's config dir with the same
``name`` overrides a packaged one.
"""

from __future__ import annotations

import tomllib
from dataclasses import fields
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

from monitor.config import ConfigError, user_config_dir

PACKAGED_THEMES = Path(__file__).resolve().parent / "themes"
DEFAULT_THEME = "loopwatch-dark"

#: Domain variables every theme may set, with fallbacks for Textual's own themes.
DOMAIN_VARIABLES: dict[str, str] = {
    "level-watching": "#8b949e",
    "level-notice": "#58a6ff",
    "level-warn": "#e3b341",
    "level-critical": "#f0883e",
    "level-terminate": "#f85149",
    "repeat-highlight": "#5a4a12",
    "spark-low": "#3fb950",
    "spark-high": "#f85149",
    "status-live": "#3fb950",
    "status-idle": "#8b949e",
    "status-ended": "#6e7681",
    "status-waiting": "#d2a8ff",
}

_COLOR_KEYS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_KNOWN_KEYS = {f.name for f in fields(Theme)} - {"variables"}


def user_themes_dir() -> Path:
    return user_config_dir() / "themes"


def parse_theme(path: Path) -> Theme:
    """A :class:`Theme` from one TOML file; :class:`ConfigError` names the bad key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read theme: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: name: expected a non-empty string")
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ConfigError(f"{path}: variables: expected a table")
    kwargs: dict[str, object] = {}
    for key, value in data.items():
        if key in ("name", "variables"):
            continue
        if key not in _KNOWN_KEYS:
            raise ConfigError(
                f"{path}: {key}: unknown key (expected one of: "
                f"{', '.join(sorted(_KNOWN_KEYS | {'variables'}))})"
            )
        if key in _COLOR_KEYS:
            _check_color(path, key, value)
        elif key in ("dark", "ansi") and not isinstance(value, bool):
            raise ConfigError(f"{path}: {key}: expected true or false, got {value!r}")
        elif key in ("luminosity_spread", "text_alpha") and not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: {key}: expected a number, got {value!r}")
        kwargs[key] = value
    if "primary" not in kwargs:
        raise ConfigError(f"{path}: primary: required")
    for key, value in variables.items():
        if not isinstance(value, str):
            raise ConfigError(f"{path}: variables.{key}: expected a string, got {value!r}")
        if key in DOMAIN_VARIABLES:
            _check_color(path, f"variables.{key}", value)
    return Theme(name=name, variables=dict(variables), **kwargs)  # type: ignore[arg-type]


def _check_color(path: Path, key: str, value: object) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"{path}: {key}: expected a colour string, got {value!r}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ConfigError(f"{path}: {key}: not a colour: {value!r}") from None


def theme_files(extra_dirs: tuple[Path, ...] = ()) -> list[Path]:
    """Theme files in load order: packaged first, then the user's (which win)."""
    found: list[Path] = []
    for directory in (PACKAGED_THEMES, user_themes_dir(), *extra_dirs):
        if directory.is_dir():
            found.extend(sorted(directory.glob("*.toml")))
    return found


def load_themes(extra_dirs: tuple[Path, ...] = ()) -> dict[str, Theme]:
    """Every available loopwatch theme by name (raises on a broken file)."""
    themes: dict[str, Theme] = {}
    for path in theme_files(extra_dirs):
        theme = parse_theme(path)
        themes[theme.name] = theme
    return themes


def check_theme_name(name: str, themes: dict[str, Theme], builtin: tuple[str, ...] = ()) -> None:
    """Raise a :class:`ConfigError` naming ``ui.theme`` if ``name`` is unknown."""
    if name in themes or name in builtin:
        return
    raise ConfigError(
        f"ui.theme: unknown theme {name!r} (expected one of: "
        f"{', '.join(sorted(themes))}; or a file in {user_themes_dir()})"
    )
