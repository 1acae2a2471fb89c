"""Options and helpers shared by several subcommands."""

from __future__ import annotations

import argparse
import sys

from monitor.config import PRESETS, Config, ConfigError, load_config

EXIT_USAGE = 2


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="TOML config file (default: config.toml in the user config dir)")
    parser.add_argument("--preset", choices=PRESETS,
                        help="detection preset (default: the config's, else balanced)")


def config_from_args(args: argparse.Namespace) -> Config:
    """Load the config the options name; raises ConfigError."""
    return load_config(getattr(args, "config", None), preset=getattr(args, "preset", None))


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"loopwatch: {message}", file=sys.stderr)
    return code


__all__ = ["ConfigError", "add_config_options", "config_from_args", "fail"]
