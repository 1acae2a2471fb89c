"""The dashboard's layout, kept across restarts: sort, filter, attention view, columns, panes.

One JSON file, ``ui.json`` in loopwatch's state directory (``$LOOPWATCH_STATE_DIR``, else
``$XDG_STATE_HOME/loopwatch``, where the hook keeps its traces too).  Written the way the hook
writes its state: the directory must be a real directory of ours that nobody else can write
to (never a symbolic link), the file goes to a new temporary file (``O_EXCL | O_NOFOLLOW``)
renamed over the old one, so a link planted at either is never written through.  A file that
cannot be read or is damaged is ignored (the defaults), never an error: it is only a layout.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from monitor.hooks import state_dir_problem
from monitor.paths import hook_state_dir
from monitor.ui.widgets.dashboard.columns import COLUMNS
from monitor.ui.widgets.dashboard.sorting import COLUMN_KEYS

STATE_FILE = "ui.json"
#: Larger than any layout: a bigger file is not ours to parse.
MAX_BYTES = 64 * 1024


@dataclass
class DashboardLayout:
    sort_column: str | None = None
    sort_reverse: bool = False
    filter_text: str = ""
    attention_only: bool = False
    hidden_columns: list[str] = field(default_factory=list)
    reason_wide: bool = False
    reason_lines: int = 1
    log_shown: bool = False


def default_path() -> Path:
    return hook_state_dir() / STATE_FILE


def _clean(raw: Any) -> DashboardLayout:
    """Only known keys with values of the right type (a hand-edited file may hold anything)."""
    layout = DashboardLayout()
    if not isinstance(raw, dict):
        return layout
    for item in fields(DashboardLayout):
        value = raw.get(item.name)
        default = getattr(layout, item.name)
        if item.name == "sort_column":
            if value is None or value in COLUMN_KEYS:
                layout.sort_column = value
        elif item.name == "hidden_columns":
            if isinstance(value, list):
                known = {c.key for c in COLUMNS}
                layout.hidden_columns = [v for v in value if isinstance(v, str) and v in known]
        elif item.name == "reason_lines":
            if value in (1, 2) and not isinstance(value, bool):
                layout.reason_lines = value
        elif isinstance(value, type(default)):
            setattr(layout, item.name, value[:200] if isinstance(value, str) else value)
    return layout


def load(path: Path | None) -> DashboardLayout:
    if path is None:
        return DashboardLayout()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return DashboardLayout()
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return DashboardLayout()
    if len(data) > MAX_BYTES:
        return DashboardLayout()
    try:
        return _clean(json.loads(data))
    except ValueError:
        return DashboardLayout()


def save(path: Path | None, layout: DashboardLayout) -> str | None:
    """Write ``layout`` to ``path``; the reason it was not written, or None."""
    if path is None:
        return None
    directory = path.parent
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create {directory}: {exc.strerror or exc}"
    problem = state_dir_problem(directory)
    if problem is not None:
        return problem
    temp = directory / f".{path.name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temp, flags, 0o600)
    except OSError as exc:
        return f"cannot write {temp}: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(layout), handle, indent=1)
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        return f"cannot write {path}: {exc.strerror or exc}"
    return None
