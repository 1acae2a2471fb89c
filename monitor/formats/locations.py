"""Where agents keep their transcripts by default (``watch --claude`` / ``--codex``).

* Claude Code: ``~/.claude/projects/<encoded-cwd>/<session>.jsonl`` (and
  ``<session>/subagents/agent-*.jsonl``).  ``$CLAUDE_CONFIG_DIR`` moves the
  whole ``~/.claude`` folder, so it is respected too.
* Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``
  (``$CODEX_HOME`` defaults to ``~/.codex``).

The functions only compute paths; the folders may not exist yet.
"""

from __future__ import annotations

import os
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


__all__ = ["claude_home", "claude_projects_dir", "codex_home", "codex_sessions_dir"]
