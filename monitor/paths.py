"""Where loopwatch keeps things: the socket, the config and data directories, the hook's state.

Standard library only (platformdirs is imported when a directory is asked
for): the client embedded in agents and ``loopwatch hook`` import this module,
and neither should pay for the configuration machinery or the detectors.
"""

from __future__ import annotations

import os
from pathlib import Path

SOCKET_ENV = "LOOPWATCH_SOCKET"
ADDRESS_ENV = "LOOPWATCH_ADDRESS"
TOKEN_ENV = "LOOPWATCH_TOKEN"
CONFIG_DIR_ENV = "LOOPWATCH_CONFIG_DIR"
DATA_DIR_ENV = "LOOPWATCH_DATA_DIR"
STATE_DIR_ENV = "LOOPWATCH_STATE_DIR"
#: Control messages for an agent that logs to files go to ``<log>.inbox.jsonl``.
INBOX_SUFFIX = ".inbox.jsonl"


def default_socket_path() -> Path:
    """``$XDG_RUNTIME_DIR/loopwatch.sock``, else ``/tmp/loopwatch-<uid>/loopwatch.sock``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "loopwatch.sock"
    return Path(f"/tmp/loopwatch-{os.getuid()}") / "loopwatch.sock"


def socket_path() -> Path:
    """The monitor's socket as an agent finds it: ``$LOOPWATCH_SOCKET``, else the default."""
    configured = os.environ.get(SOCKET_ENV)
    return Path(configured).expanduser() if configured else default_socket_path()


def inbox_path(log_path: str | Path) -> Path:
    """``<log>.inbox.jsonl`` beside the log."""
    log = Path(log_path)
    return log.with_name(log.name + INBOX_SUFFIX)


def user_config_dir() -> Path:
    import platformdirs

    return Path(os.environ.get(CONFIG_DIR_ENV) or platformdirs.user_config_dir("loopwatch"))


def user_data_dir() -> Path:
    import platformdirs

    return Path(os.environ.get(DATA_DIR_ENV) or platformdirs.user_data_dir("loopwatch"))


def default_config_path() -> Path:
    return user_config_dir() / "config.toml"


def hook_state_dir() -> Path:
    """Where hook calls leave their traces (``$LOOPWATCH_STATE_DIR``, else the
    XDG state directory, found without platformdirs to keep a hook call fast)."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "loopwatch"
