"""``loopwatch open SESSION``: one stored session in the TUI, read-only.

The session is named by its id or a unique prefix of it; the screen is the
live session detail (events, sparklines per detector, detections with their
evidence, actions) without the operator actions.
"""

from __future__ import annotations

import argparse

from monitor.commands.common import ConfigError, add_ui_options, fail, ui_problem
from monitor.commands.stored import add_db_options, open_store, resolve_session

HELP = "open one recorded session in the TUI (read-only)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="session id (or a unique prefix)")
    add_db_options(parser)
    add_ui_options(parser)


def run(args: argparse.Namespace) -> int:
    from monitor.store import StoreError

    try:
        return _run(args)
    except StoreError as exc:  # a damaged database found while reading: what to do, no traceback
        return fail(str(exc))


def _run(args: argparse.Namespace) -> int:
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
        problem = ui_problem(config, args.theme, f"print it instead: `loopwatch show {session}`")
        if problem:
            return fail(problem)
        from monitor.ui.app import run_open

        return run_open(config, store, session, theme=args.theme)
    finally:
        store.close()
