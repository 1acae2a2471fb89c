"""Where the store's database is: the default file and the one a command uses."""

from __future__ import annotations

from pathlib import Path

from monitor.config import StoreSettings, user_data_dir

DB_NAME = "loopwatch.db"


def default_db_path() -> Path:
    return user_data_dir() / DB_NAME


def resolve_db_path(path: str | Path | None = None, settings: StoreSettings | None = None) -> Path:
    """``path``, else the configured ``[store] path``, else the default file."""
    chosen = path or (settings.path if settings is not None else "")
    return Path(chosen).expanduser() if chosen else default_db_path()
