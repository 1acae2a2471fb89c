"""``loopwatch install-hook claude|codex [--project DIR | --local [DIR] | --user] [--uninstall]``.

Adds ``loopwatch hook <agent>`` to the agent's hook configuration for the
events in :data:`EVENTS` (UserPromptSubmit lets a hook-only session see user
turns, which reset the detectors' streaks; Claude Code's PostToolUseFailure
carries every failed call, SessionEnd and StopFailure end the session,
SubagentStart/SubagentStop delimit its subagents, PermissionRequest,
Notification and Elicitation say it waits for the person, Stop carries the
turn's last assistant text, PostCompact a compaction; Codex's PreCompact is
installed so that each of its events reaches the hook, which answers it with
nothing):

* Claude Code: ``~/.claude/settings.json`` (``--user``, the default),
  ``DIR/.claude/settings.json`` (``--project DIR``) or the project's own, not shared
  ``DIR/.claude/settings.local.json`` (``--local``, the current directory by default).
* Codex: ``$CODEX_HOME/hooks.json`` (``--user``) or ``DIR/.codex/hooks.json``
  (``--project DIR``), in the same Claude-style layout Codex reads.

Everything else in the file is kept as it was, including other hooks.  Running
it again changes nothing: an entry of ours that is already as wanted is never
rewritten (Codex keys its trust to a hook's exact definition, so a rewrite
would make the user review it again); one pointing at an older command is
updated in place.  ``--uninstall`` removes only our entries.  The file is
rewritten atomically (a temporary file renamed over it), and a file that is
not valid JSON is left alone with an error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HELP = "add (or --uninstall) the loopwatch hook in Claude Code's or Codex's hook settings"
#: The hook events each agent gets (https://code.claude.com/docs/en/hooks,
#: https://developers.openai.com/codex/hooks).  Codex has no PostToolUseFailure,
#: Notification or Elicitation; a Codex subagent fires SubagentStop, not Stop, and
#: its SessionEnd runs for the main thread only.  Codex's PreCompact is installed and
#: forwards nothing: PostCompact (which Codex sends for a failed compaction too, with
#: ``status``) is the compaction, and one compaction must count once.
AGENT_EVENTS = {
    "claude": (
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
        "PermissionDenied",
        "Notification",
        "Elicitation",
        "ElicitationResult",
        "PostCompact",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "SessionEnd",
    ),
    "codex": (
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "SessionEnd",
    ),
}
#: What each event gives the monitor (``doctor`` says what the installed hooks cover).
COVERAGE = {
    "PreToolUse": "tool calls",
    "PostToolUse": "tool results",
    "PostToolUseFailure": "failed calls",
    "PermissionDenied": "failed calls",
    "UserPromptSubmit": "user turns",
    "Stop": "assistant text",
    "PermissionRequest": "waiting for input",
    "Notification": "waiting for input",
    "Elicitation": "waiting for input",
    "PostCompact": "compaction",
    "SubagentStart": "subagents",
    "SubagentStop": "subagents",
    "SessionStart": "session start and pid",
    "SessionEnd": "session end",
    "StopFailure": "session end",
}
EVENTS = AGENT_EVENTS["claude"]
#: Tool events take a matcher; "*" matches every tool in both agents.
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
#: Seconds Claude Code gives the hook (it answers in well under one).
CLAUDE_TIMEOUT = 10
#: Claude Code waits for the longest SessionEnd hook when it exits: ours only reports the end,
#: so it must not raise that budget for every other SessionEnd hook the user has.  Events
#: that are only reported (never answered) need no more than the hook's own budget
#: (0.5 s) and a Python start; a permission or elicitation hook holds its dialog that long.
CLAUDE_EVENT_TIMEOUTS = {
    "SessionEnd": 2,
    "PermissionRequest": 5,
    "PermissionDenied": 5,
    "Notification": 5,
    "Elicitation": 5,
    "ElicitationResult": 5,
    "PostCompact": 5,
    "StopFailure": 5,
}
#: Codex: the same budgets, written out (a command hook Codex is not told otherwise may
#: hold the turn 600 s).  Its SessionEnd hooks get 1 s by default and 3 s at most
#: (``SESSION_END_MAX_TIMEOUT_SEC``, openai/codex#33895): ours (0.5 s and a Python
#: start) fits the default, which is written out so that nobody raises it past the cap.
CODEX_EVENT_TIMEOUTS = {
    "SessionEnd": 1,
    "PermissionRequest": 5,
    "PreCompact": 5,
    "PostCompact": 5,
    "StopFailure": 5,
}
#: Recognizes our own entries, whichever way loopwatch was invoked.
_OURS = re.compile(r"(?:^|[\s/'\"])(?:loopwatch|-m\s+monitor)['\"]?\s+hook\s+(?P<agent>claude|codex)\b")
CODEX_TRUST_NOTE = (
    "Codex runs a hook only after you have reviewed and trusted it: start codex, open /hooks and "
    "trust the loopwatch entries ({count} of them). Until then Codex skips them without a word. "
    "Trust is keyed to the exact definition, so a changed command must be trusted again. "
    "`loopwatch doctor` shows whether the hook has ever fired."
)
CODEX_NOTE = (
    "Hooks are on by default in Codex 0.124.0 and later (the feature key is `hooks`; "
    "`codex_hooks` is a deprecated alias since 0.130.0); a project's .codex/hooks.json is loaded "
    "only in a trusted project. Codex does not accept `continue: false` on PreToolUse, so a kill "
    "there denies the call; the agent stops at its next PostToolUse or Stop hook. "
    "See docs/integrations.md."
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", choices=("claude", "codex"), help="which agent to configure")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--user",
        action="store_true",
        help="the user's settings (~/.claude/settings.json or $CODEX_HOME/hooks.json); the default",
    )
    where.add_argument(
        "--project",
        metavar="DIR",
        help="a project's settings (DIR/.claude/settings.json or DIR/.codex/hooks.json)",
    )
    where.add_argument(
        "--local",
        nargs="?",
        const=".",
        metavar="DIR",
        help="Claude Code only: the project's settings.local.json, kept out of version control "
        "(DIR/.claude/settings.local.json; DIR defaults to the current directory)",
    )
    parser.add_argument("--uninstall", action="store_true", help="remove loopwatch's entries instead")
    parser.add_argument(
        "--command",
        dest="hook_command",
        metavar="CMD",
        help="the command to install (default: this loopwatch's `hook <agent>`)",
    )


def settings_path(agent: str, project: str | None, local: bool = False) -> Path:
    """The file ``install-hook`` edits for ``agent`` (``local``: Claude Code's settings.local.json)."""
    from monitor.formats.locations import claude_home, codex_home

    if local and project is not None:
        return Path(project).expanduser() / ".claude" / "settings.local.json"
    if project is not None:
        base = Path(project).expanduser()
        return base / ".claude" / "settings.json" if agent == "claude" else base / ".codex" / "hooks.json"
    return claude_home() / "settings.json" if agent == "claude" else codex_home() / "hooks.json"


def default_command(agent: str) -> str:
    """How the agent should call this loopwatch, by absolute path: the console script installed with
    this interpreter (or on PATH), else ``python -P -m monitor`` — the agent runs hooks in the
    project's directory, and without ``-P`` a project with its own ``monitor/`` would run its code."""
    script = installed_script()
    if script:
        return f"{shlex.quote(script)} hook {agent}"
    return f"{shlex.quote(sys.executable)} -P -m monitor hook {agent}"


def installed_script() -> str | None:
    """The ``loopwatch`` console script beside this interpreter, else the one on PATH (absolute)."""
    beside = Path(sys.executable).parent / "loopwatch"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("loopwatch")
    return str(Path(found).resolve()) if found else None


def is_ours(handler: Any, agent: str | None = None) -> bool:
    """True for a hook handler that runs ``loopwatch hook`` (for ``agent`` if given)."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    match = _OURS.search(handler["command"])
    return match is not None and (agent is None or match.group("agent") == agent)


def _handler(agent: str, command: str, event: str = "") -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command}
    timeouts = CLAUDE_EVENT_TIMEOUTS if agent == "claude" else CODEX_EVENT_TIMEOUTS
    handler["timeout"] = timeouts.get(event, CLAUDE_TIMEOUT)
    return handler


def install(settings: dict[str, Any], agent: str, command: str) -> bool:
    """Add our entries to ``settings`` in place; True if anything changed."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"'hooks' is a {type(hooks).__name__}, expected an object")
    changed = False
    for event in AGENT_EVENTS.get(agent, EVENTS):
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"'hooks.{event}' is a {type(groups).__name__}, expected a list")
        found = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            for index, handler in enumerate(handlers):
                if is_ours(handler, agent):
                    if found:
                        continue  # duplicates are removed below
                    found = True
                    wanted = _handler(agent, command, event)
                    # Same command: leave it exactly as it is (a rewrite, even of a
                    # field the user tuned, would cost it its trust in Codex) -- but
                    # for a timeout still at an older default of ours.
                    if handler.get("command") != command:
                        handlers[index] = wanted
                        changed = True
                    elif handler.get("timeout") == CLAUDE_TIMEOUT != wanted.get("timeout", CLAUDE_TIMEOUT):
                        handlers[index] = {**handler, "timeout": wanted["timeout"]}
                        changed = True
        if found:
            changed |= _drop_duplicates(groups, agent)
            continue
        group = {"hooks": [_handler(agent, command, event)]}
        if event in TOOL_EVENTS:
            group = {"matcher": "*", **group}
        groups.append(group)
        changed = True
    return changed


def _drop_duplicates(groups: list[Any], agent: str) -> bool:
    """Keep only the first of our handlers for one event."""
    seen = False
    changed = False
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            continue
        kept = []
        for handler in handlers:
            if is_ours(handler, agent):
                if seen:
                    changed = True
                    continue
                seen = True
            kept.append(handler)
        handlers[:] = kept
    groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
    return changed


def uninstall(settings: dict[str, Any], agent: str) -> bool:
    """Remove our entries (and the groups and events they leave empty); True if any."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(handlers, list) and any(is_ours(h, agent) for h in handlers):
                handlers = [h for h in handlers if not is_ours(h, agent)]
                changed = True
                if not handlers:
                    continue
                group = {**group, "hooks": handlers}
            kept_groups.append(group)
        if kept_groups:
            hooks[event] = kept_groups
        elif groups:  # only ours were there
            del hooks[event]
    if changed and not hooks:
        del settings["hooks"]
    return changed


def load_settings(path: Path) -> dict[str, Any]:
    """The settings object in ``path`` (empty if the file does not exist)."""
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc}); fix or move it first") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


def write_atomically(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` as JSON in one rename, keeping its permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, ensure_ascii=False)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    from monitor.commands.common import fail

    if args.local is not None and args.agent != "claude":
        return fail("--local: only Claude Code has a settings.local.json; use --project DIR for Codex")
    project = args.local if args.local is not None else args.project
    path = settings_path(args.agent, project, local=args.local is not None)
    if project is not None and not Path(project).expanduser().is_dir():
        return fail(f"--{'local' if args.local is not None else 'project'} {project}: no such directory")
    try:
        settings = load_settings(path)
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    except ValueError as exc:
        return fail(f"{path}: {exc}")
    try:
        if args.uninstall:
            changed = uninstall(settings, args.agent)
        else:
            changed = install(settings, args.agent, args.hook_command or default_command(args.agent))
    except ValueError as exc:
        return fail(f"{path}: {exc}; not changed")
    if changed:
        try:
            if args.uninstall and not settings:
                # Nothing but our hook was in it (often we created it): leave no `{}` behind.
                path.unlink()
            else:
                write_atomically(path, settings)
        except OSError as exc:
            return fail(f"{path}: cannot write: {exc.strerror or exc}")
    if args.uninstall:
        removed = "removed the loopwatch hook" + (
            "; the file held nothing else, so it is gone" if not settings else ""
        )
        print(f"{path}: {removed if changed else 'no loopwatch hook to remove'}")
    else:
        events = AGENT_EVENTS[args.agent]
        print(
            f"{path}: {'installed' if changed else 'already installed'}: "
            f"{', '.join(events)} run `{args.hook_command or default_command(args.agent)}`"
        )
        if args.agent == "codex":
            if changed:
                print(CODEX_TRUST_NOTE.format(count=len(events)))
            else:
                print("Unchanged, so a trust you gave it in Codex's /hooks still holds.")
            print(CODEX_NOTE)
    return 0
