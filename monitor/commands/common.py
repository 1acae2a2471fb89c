"""Options and helpers shared by several subcommands."""

from __future__ import annotations

import argparse
import sys

from monitor.commands import EXIT_USAGE
from monitor.config import PRESETS, Config, ConfigError, load_config


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="TOML config file (default: config.toml in the user config dir)"
    )
    parser.add_argument(
        "--preset", choices=PRESETS, help="detection preset (default: the config's, else balanced)"
    )


def add_ui_options(parser: argparse.ArgumentParser, *, only_with: str = "") -> None:
    """The options of every command that opens the TUI (besides ``--config``)."""
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="TUI theme: loopwatch-dark (default), loopwatch-light, "
        "loopwatch-high-contrast, loopwatch-ansi or one in the config dir"
        + (f" (with {only_with})" if only_with else ""),
    )


def config_from_args(args: argparse.Namespace) -> Config:
    """Load the config the options name; raises ConfigError."""
    return load_config(getattr(args, "config", None), preset=getattr(args, "preset", None))


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"loopwatch: {message}", file=sys.stderr)
    return code


def terminal_problem(instead: str) -> str | None:
    """Why the TUI cannot run here (no terminal on stdin or stdout), or None.

    Without a terminal Textual reads end-of-file forever and spins a CPU, so
    the commands refuse first; ``instead`` says what to run rather."""
    missing = [
        name
        for name, stream in (("standard input", sys.stdin), ("standard output", sys.stdout))
        if stream is None or not stream.isatty()
    ]
    if not missing:
        return None
    return (
        f"the monitor needs a terminal, but {' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not one; {instead}"
    )


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, ending in "…" when it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def ui_config_problem(config: Config, theme: str | None = None) -> str | None:
    """What is wrong in ``[ui]`` (theme name, keymap), checked even where no TUI opens
    (``doctor``, ``watch --headless``), so a typo is found before the day it matters."""
    try:
        from monitor.ui.app import validate_ui
    except ImportError:
        return None  # no UI installed: nothing of [ui] will be used
    try:
        validate_ui(config, theme)
    except ConfigError as exc:
        return str(exc)
    return None


def ui_problem(config: Config, theme: str | None, instead: str) -> str | None:
    """What stops the TUI from opening (a bad theme or keymap, a missing UI,
    no terminal), as a message for :func:`fail`; None when it can open."""
    try:
        from monitor.ui.app import validate_ui
    except ImportError as exc:
        return f"the terminal UI is not available ({exc}); {instead}"
    try:
        validate_ui(config, theme)
    except ConfigError as exc:
        return str(exc)
    return terminal_problem(instead)


__all__ = [
    "ConfigError",
    "add_config_options",
    "add_ui_options",
    "config_from_args",
    "fail",
    "shorten",
    "terminal_problem",
    "ui_config_problem",
    "ui_problem",
]
