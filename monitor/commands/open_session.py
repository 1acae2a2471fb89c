"""``loopwatch open SESSION``: one stored session in the TUI, read-only.

The session is named by its id or a unique prefix of it; the screen is the
live session detail (events, sparklines per detector, detections with their
evidence, actions) without the operator actions.
"""

from __future__ import annotations

import argparse

from monitor.commands.common import ConfigError, fail
from monitor.commands.stored import add_db_options, open_store, resolve_session

HELP = "open one recorded session in the TUI (read-only)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="session id (or a unique prefix)")
    add_db_options(parser)
    parser.add_argument("--theme", metavar="NAME", help="TUI theme")


def run(args: argparse.Namespace) -> int:
    from monitor.config import load_config

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        return fail(str(exc))
    store = open_store(args, config)
    if isinstance(store, str):
        return fail(store)
    try:
        try:
            session = resolve_session(store, args.session)
        except LookupError as exc:
            return fail(str(exc))
        try:
            from monitor.ui.app import run_open, validate_ui
        except ImportError as exc:
            return fail(f"the terminal UI is not available ({exc}); use `loopwatch show {session}`")
        try:
            validate_ui(config, args.theme)
        except ConfigError as exc:
            return fail(str(exc))
        return run_open(config, store, session, theme=args.theme)
    finally:
        store.close()
