"""Where agents keep their sessions by default (``watch --claude``, ``--codex``, ``--opencode`` …).

* Claude Code: ``~/.claude/projects/<encoded-cwd>/<session>.jsonl`` (and
  ``<session>/subagents/agent-*.jsonl``).  ``$CLAUDE_CONFIG_DIR`` moves the
  whole ``~/.claude`` folder, so it is respected too.
* Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``
  (``$CODEX_HOME`` defaults to ``~/.codex``).
* Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.json`` / ``.jsonl``.
* OpenCode: ``$XDG_DATA_HOME/opencode/opencode.db`` (default ``~/.local/share``).
* Goose: ``$XDG_DATA_HOME/goose/sessions/sessions.db``.
* Cursor: agent transcripts under ``~/.cursor/projects/<project>/agent-transcripts/``.
* GitHub Copilot CLI: ``$COPILOT_HOME/session-state/`` (default ``~/.copilot``).
* Aider: ``.aider.chat.history.md`` in the project it works in (the current folder).

:data:`AGENTS` lists them with the ``watch`` flag that adds each.

The functions only compute paths; the folders may not exist yet.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def claude_home() -> Path:
    """Claude Code's configuration folder (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def claude_projects_dir() -> Path:
    """The folder holding one sub-folder of session transcripts per project."""
    return claude_home() / "projects"


def codex_home() -> Path:
    """Codex's home folder (``$CODEX_HOME`` or ``~/.codex``)."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".codex"


def codex_sessions_dir() -> Path:
    """The folder holding Codex rollouts by date (``sessions/YYYY/MM/DD``)."""
    return codex_home() / "sessions"


def data_home() -> Path:
    """``$XDG_DATA_HOME`` (default ``~/.local/share``), where OpenCode and Goose keep their databases."""
    configured = os.environ.get("XDG_DATA_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".local" / "share"


def copilot_home() -> Path:
    configured = os.environ.get("COPILOT_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".copilot"


@dataclass(frozen=True)
class Location:
    """Where one agent keeps its sessions: a folder (watched recursively), a file or a glob."""

    agent: str
    flag: str
    kind: str  # "dir" | "file" | "glob"
    path: str


def locations(flag: str) -> list[Location]:
    """The default locations ``watch --<flag>`` adds (computed now: environment variables count)."""
    home = Path.home()
    gemini = home / ".gemini" / "tmp"
    table: dict[str, tuple[str, list[tuple[str, Path | str]]]] = {
        "claude": ("Claude Code transcripts", [("dir", claude_projects_dir())]),
        "codex": ("Codex rollouts", [("dir", codex_sessions_dir())]),
        "gemini": (
            "Gemini CLI chats",
            [("glob", f"{gemini}/*/chats/session-*.json"), ("glob", f"{gemini}/*/chats/session-*.jsonl")],
        ),
        "opencode": ("OpenCode sessions", [("file", data_home() / "opencode" / "opencode.db")]),
        "goose": ("Goose sessions", [("file", data_home() / "goose" / "sessions" / "sessions.db")]),
        "cursor": ("Cursor agent transcripts", [("dir", home / ".cursor" / "projects")]),
        "copilot": ("Copilot CLI sessions", [("dir", copilot_home() / "session-state")]),
        "aider": ("Aider chat history", [("file", Path.cwd() / ".aider.chat.history.md")]),
    }
    label, where = table[flag]
    return [Location(label, flag, kind, str(path)) for kind, path in where]


#: The agents ``watch`` has a flag for, in the order ``doctor`` lists them.
AGENTS = ("claude", "codex", "gemini", "opencode", "goose", "cursor", "copilot", "aider")


__all__ = [
    "AGENTS",
    "Location",
    "claude_home",
    "claude_projects_dir",
    "codex_home",
    "codex_sessions_dir",
    "copilot_home",
    "data_home",
    "locations",
]
