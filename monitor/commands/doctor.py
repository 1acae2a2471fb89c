"""``loopwatch doctor``: why does nothing show up?

One line per check, each ``OK`` or what to do (``FIX``), or ``--`` for what
is optional and off:

* the monitor: is its socket there, owned by you with no access for others,
  and does a monitor answer on it (with which version);
* hooks for Claude Code and Codex: in which settings files loopwatch's
  entries are, whether any event is missing, whether the command they run
  exists, and when each agent's hook last fired and last reached a monitor
  (from the contact record each hook call leaves, see :mod:`monitor.hooks`);
* watched paths (``PATH`` arguments, the config's ``[sources] paths``, and
  Claude's and Codex's own directories): whether they exist and which formats
  were detected in their most recent files;
* the database: writable, and its size;
* the OTLP endpoint of the running monitor, if it has one: does it answer;
* ``[control] guard``: on or off by default;
* ``[alerts]``: a test alert sent to each configured one (desktop, webhook,
  command), and whether this machine has a desktop notifier at all.

Exit status 0 when every line is OK (or optional), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

HELP = "check the monitor, hooks, watched paths, database, OTLP endpoint and alerts; say what to fix"
#: Recent files per watched path whose format is sniffed.
SNIFF_FILES = 5
#: Lines read from the head of each file to find its first valid record.
SNIFF_LINES = 20
CONNECT_TIMEOUT = 1.0


@dataclass(frozen=True)
class Check:
    status: str  # "OK" | "FIX" | "--"
    what: str
    detail: str

    def __str__(self) -> str:
        return f"{self.status:<3} {self.what}: {self.detail}"


def configure(parser: argparse.ArgumentParser) -> None:
    from monitor.commands.common import add_config_options

    parser.add_argument("paths", nargs="*", metavar="PATH", help="paths you watch (checked too)")
    parser.add_argument(
        "--socket", metavar="PATH", help="the monitor's socket (default: the config's or the usual)"
    )
    parser.add_argument("--db", metavar="PATH", help="the database (default: the config's or the usual)")
    parser.add_argument(
        "--project",
        metavar="DIR",
        default=".",
        help="the project whose hook settings are checked too (default: the current directory)",
    )
    add_config_options(parser)


def _ago(ts: float, now: float) -> str:
    seconds = max(0.0, now - ts)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# -- the monitor ----------------------------------------------------------------------------------


def check_socket(path: Path) -> list[Check]:
    """Is a monitor listening on ``path``, and is the socket safe (ours, private)?"""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return [
            Check(
                "FIX",
                "monitor",
                f"no socket at {path}: start one with `loopwatch watch` (or `loopwatch watch --headless`)",
            )
        ]
    except OSError as exc:
        return [Check("FIX", "monitor", f"{path}: cannot stat: {exc.strerror}")]
    checks = []
    if not stat.S_ISSOCK(st.st_mode):
        return [Check("FIX", "monitor", f"{path} is not a socket: move it away and start `loopwatch watch`")]
    uid = os.getuid()
    problems = []
    if st.st_uid != uid:
        problems.append(f"owned by uid {st.st_uid}, not you (uid {uid})")
    if st.st_mode & 0o077:
        problems.append(f"mode {stat.S_IMODE(st.st_mode):04o} lets others connect (want 0600)")
    try:
        parent = path.parent.stat()
        if parent.st_uid != uid:
            problems.append(f"its directory {path.parent} is owned by uid {parent.st_uid}")
        if parent.st_mode & 0o022:
            problems.append(
                f"its directory {path.parent} is writable by others (mode {stat.S_IMODE(parent.st_mode):04o})"
            )
    except OSError:
        pass
    version = _hello(path)
    if version is None:
        checks.append(
            Check(
                "FIX",
                "monitor",
                f"{path} exists but no monitor answers: a stale socket? "
                "start `loopwatch watch` (it replaces a dead socket)",
            )
        )
    else:
        checks.append(Check("OK", "monitor", f"loopwatch {version} answers on {path}"))
    mode = f"owner you, mode {stat.S_IMODE(st.st_mode):04o}"
    if problems:
        checks.append(
            Check(
                "FIX",
                "socket",
                "; ".join(problems) + ": stop the monitor, remove the socket, and start it as yourself",
            )
        )
    else:
        checks.append(Check("OK", "socket", mode))
    return checks


def _hello(path: Path) -> str | None:
    """The monitor's version if one answers a hello on ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        sock.connect(os.fspath(path))
        sock.sendall(b'{"type":"hello","agent":"loopwatch-doctor"}\n')
        buffer = b""
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while b"\n" not in buffer and time.monotonic() < deadline:
            chunk = sock.recv(4096)
            if not chunk:
                break
            buffer += chunk
        reply = json.loads(buffer.split(b"\n", 1)[0] or b"{}")
        if isinstance(reply, dict) and reply.get("type") == "welcome":
            return str(reply.get("version") or "?")
        return None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


# -- hooks ----------------------------------------------------------------------------------------


def _hook_files(agent: str, project: Path) -> list[Path]:
    from monitor.commands.install_hook import settings_path

    files = [settings_path(agent, None), settings_path(agent, str(project))]
    if agent == "claude":
        files.append(project / ".claude" / "settings.local.json")
    seen: list[Path] = []
    for path in files:
        if path not in seen:
            seen.append(path)
    return seen


def _our_events(path: Path, agent: str) -> tuple[dict[str, str], str | None]:
    """{event: command} of our entries in ``path``, or an error."""
    from monitor.commands.install_hook import is_ours, load_settings

    try:
        settings = load_settings(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {}, str(exc)
    found: dict[str, str] = {}
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return found, None
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else []:
                if is_ours(handler, agent):
                    found[event] = handler["command"]
    return found, None


def _command_runs(command: str) -> bool:
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words:
        return False
    program = words[0]
    if "/" in program:
        return os.access(program, os.X_OK)
    import shutil

    return shutil.which(program) is not None


def check_hooks(project: Path, now: float) -> list[Check]:
    from monitor.hooks import AGENTS, state_dir

    checks = []
    for agent, label in (("claude", "Claude Code"), ("codex", "Codex")):
        what = f"{label} hook"
        installed: list[tuple[Path, dict[str, str]]] = []
        for path in _hook_files(agent, project):
            events, error = _our_events(path, agent)
            if error:
                checks.append(Check("FIX", what, f"{path}: {error}"))
            elif events:
                installed.append((path, events))
        if agent == "codex":
            checks += _codex_features()
        contact = _contact(state_dir() / f"hook-{AGENTS[agent]}.json")
        if not installed:
            checks.append(
                Check(
                    "--",
                    what,
                    f"not installed (optional: `loopwatch install-hook {agent}` lets "
                    "loopwatch see and steer live sessions)",
                )
            )
            continue
        checks += _installed_checks(agent, what, installed)
        checks.append(_contact_check(agent, label, contact, now))
    return checks


def _installed_checks(agent: str, what: str, installed: list[tuple[Path, dict[str, str]]]) -> list[Check]:
    """One check per hook file of ``agent`` with loopwatch in it: complete, runnable?"""
    from monitor.commands.install_hook import AGENT_EVENTS

    found = []
    for path, events in installed:
        missing = [e for e in AGENT_EVENTS[agent] if e not in events]
        broken = sorted({c for c in events.values() if not _command_runs(c)})
        if broken:
            found.append(
                Check(
                    "FIX",
                    what,
                    f"{path}: runs `{broken[0]}`, which is not there: run "
                    f"`loopwatch install-hook {agent}` again",
                )
            )
        elif missing:
            found.append(
                Check(
                    "FIX",
                    what,
                    f"{path}: {', '.join(missing)} missing: run `loopwatch install-hook {agent}` again",
                )
            )
        else:
            found.append(Check("OK", what, f"installed in {path} ({len(events)} events: {_covers(events)})"))
    return found


def _covers(events: dict[str, str]) -> str:
    """What the installed events give the monitor, in one line ("tool calls, tool results, …")."""
    from monitor.commands.install_hook import COVERAGE

    covered: list[str] = []
    for event in events:
        what = COVERAGE.get(event)
        if what and what not in covered:
            covered.append(what)
    return ", ".join(covered) or "nothing loopwatch reads"


def _contact_check(agent: str, label: str, contact: dict[str, Any], now: float) -> Check:
    """Whether the hook last fired and reached a monitor (its contact record)."""
    fired, reached = contact.get("fired"), contact.get("reached")
    if not isinstance(fired, (int, float)):
        hint = (
            "Codex skips a hook until you trust it: open /hooks in codex and trust the loopwatch entries"
            if agent == "codex"
            else "start a session (an existing session reads its hooks when it starts)"
        )
        return Check("FIX", f"{label} hook contact", f"never fired: {hint}")
    elif not isinstance(reached, (int, float)):
        return Check(
            "FIX",
            f"{label} hook contact",
            f"last fired {_ago(fired, now)} but never reached a monitor: start "
            "`loopwatch watch` (same user, same socket)",
        )
    elif reached < fired:
        return Check(
            "FIX",
            f"{label} hook contact",
            f"last fired {_ago(fired, now)} with no monitor to reach (last reached one "
            f"{_ago(reached, now)}): start `loopwatch watch`",
        )
    else:
        return Check(
            "OK",
            f"{label} hook contact",
            f"last fired and reached the monitor {_ago(reached, now)} ({contact.get('event', '?')})",
        )


def _codex_features() -> list[Check]:
    """Hooks turned off in Codex's config.toml (``[features] hooks = false``), or the
    deprecated ``codex_hooks`` key still there."""
    import tomllib

    from monitor.formats.locations import codex_home

    path = codex_home() / "config.toml"
    try:
        features = tomllib.loads(path.read_text(encoding="utf-8")).get("features", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    if not isinstance(features, dict):
        return []
    if features.get("hooks") is False or ("hooks" not in features and features.get("codex_hooks") is False):
        return [Check("FIX", "Codex hook", f"{path} turns hooks off ([features] hooks = false): remove it")]
    if "codex_hooks" in features:
        return [
            Check(
                "--",
                "Codex hook",
                f"{path}: [features] codex_hooks is a deprecated alias (Codex "
                "0.130.0+ warns): hooks are on by default since 0.124.0",
            )
        ]
    return []


def _contact(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- watched paths --------------------------------------------------------------------------------


def detect_formats(path: Path, limit: int = SNIFF_FILES) -> dict[str, int]:
    """{format: files} among the ``limit`` most recent ``*.jsonl`` files under ``path``."""
    from monitor.formats import sniff
    from monitor.safeopen import open_regular_stream

    if path.is_file():
        files = [path]
    else:
        candidates = []
        for pattern in ("*.jsonl", "*.ndjson"):
            for file in path.rglob(pattern):
                if file.name.endswith(".inbox.jsonl"):
                    continue
                try:
                    candidates.append((file.stat().st_mtime, file))
                except OSError:
                    continue
        files = [file for _mtime, file in sorted(candidates, reverse=True)[:limit]]
    found: dict[str, int] = {}
    for file in files:
        name = "unknown"
        try:
            with open_regular_stream(file, follow=file == path) as stream:
                for _ in range(SNIFF_LINES):
                    raw = stream.readline(1 << 20)
                    if not raw:
                        break
                    try:
                        record = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        cls = sniff(record)
                        if cls is not None:
                            name = cls.name
                            break
        except OSError:
            name = "unreadable"
        found[name] = found.get(name, 0) + 1
    return found


def check_location(where: Any) -> Check:
    """What one agent's default location holds (``watch --<flag>`` watches it)."""
    flag = f"watch --{where.flag}"
    if where.kind == "glob":
        import glob

        matches = sorted(glob.glob(where.path), key=_mtime, reverse=True)
        if not matches:
            return Check(
                "--", where.agent, f"{where.path}: nothing yet (no such agent here, or it has not run yet)"
            )
        found = _formats_of([Path(m) for m in matches[:SNIFF_FILES]])
        return Check(
            "OK", where.agent, f"{where.path}: {len(matches):,} file(s): {found} (watched with `{flag}`)"
        )
    path = Path(where.path)
    if not path.exists():
        return Check("--", where.agent, f"{path} does not exist (no such agent here, or it has not run yet)")
    if where.kind == "file":
        return Check("OK", where.agent, f"{path}: {_database_summary(path)} (watched with `{flag}`)")
    formats = detect_formats(path)
    detected = ", ".join(f"{name} ({count})" for name, count in sorted(formats.items())) or "no files yet"
    return Check("OK", where.agent, f"{path}: {detected} (watched with `{flag}`)")


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _formats_of(files: list[Path]) -> str:
    from monitor.formats import documents

    found: dict[str, int] = {}
    for file in files:
        kind = documents.kind_of(file) or next(iter(detect_formats(file)), "unknown")
        found[kind] = found.get(kind, 0) + 1
    return ", ".join(f"{name} ({count})" for name, count in sorted(found.items()))


def _database_summary(path: Path) -> str:
    """What an agent's database (or another file) holds: its format, sessions and rows."""
    import sqlite3

    from monitor.formats import documents, sqlite_db

    kind = documents.kind_of(path)
    if kind not in documents.DATABASE_FORMATS:
        return kind or "not a format loopwatch reads"
    table = "part" if kind == "opencode" else "messages"
    try:
        connection = sqlite_db.open_readonly(path, once=True)
    except sqlite_db.DatabaseError as exc:
        return f"{kind}: {exc}"
    try:
        sessions, rows = connection.execute(
            f"SELECT count(DISTINCT session_id), count(*) FROM {table}"  # noqa: S608 (a constant)
        ).fetchone()
    except sqlite3.Error as exc:
        return f"{kind}: {sqlite_db.describe(exc)}"
    finally:
        connection.close()
    return f"{kind} ({sessions:,} session(s), {rows:,} {'parts' if kind == 'opencode' else 'messages'})"


def check_paths(paths: list[str]) -> list[Check]:
    checks = []
    for raw in paths:
        path = Path(raw).expanduser()
        if any(ch in raw for ch in "*?["):
            checks.append(Check("--", "watched path", f"{raw}: a glob (matches are checked by `watch`)"))
            continue
        if not path.exists():
            checks.append(
                Check(
                    "FIX",
                    "watched path",
                    f"{path} does not exist: check the path (watch picks a "
                    "file up when it appears, a directory must exist)",
                )
            )
            continue
        if path.is_file() and path.suffix in (".db", ".sqlite", ".sqlite3"):
            summary = _database_summary(path)
            status = "OK" if summary.startswith(("opencode (", "goose (")) else "FIX"
            checks.append(Check(status, "watched path", f"{path}: {summary}"))
            continue
        formats = detect_formats(path)
        if not formats:
            checks.append(
                Check(
                    "FIX", "watched path", f"{path}: no *.jsonl files yet; is the agent writing its log here?"
                )
            )
        elif set(formats) <= {"unknown", "unreadable"}:
            checks.append(
                Check(
                    "FIX",
                    "watched path",
                    f"{path}: no known format in its recent files: pass --format or check what writes there",
                )
            )
        else:
            detected = ", ".join(f"{name} ({count})" for name, count in sorted(formats.items()))
            checks.append(Check("OK", "watched path", f"{path}: {detected}"))
    from monitor.formats.locations import AGENTS, locations

    for agent in AGENTS:
        checks += [check_location(where) for where in locations(agent)]
    return checks


# -- database ----------------------------------------------------------------------------------------


def check_db(path: Path) -> list[Check]:
    if not path.exists():
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if os.access(parent, os.W_OK):
            return [Check("OK", "database", f"{path} will be created on the first `watch`")]
        return [
            Check(
                "FIX",
                "database",
                f"{path} cannot be created ({parent} is not writable): pass --db or set [store] path",
            )
        ]
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        return [
            Check(
                "FIX",
                "database",
                f"{path} is not writable (the file or its directory): fix its permissions or pass --db",
            )
        ]
    import sqlite3

    size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=CONNECT_TIMEOUT)
        try:
            damage = [
                " ".join(str(row[0]).split())
                for row in connection.execute("PRAGMA quick_check(3)").fetchall()
            ]
            if damage != ["ok"]:
                raise sqlite3.DatabaseError(f"damaged (quick_check: {'; '.join(damage)[:200]})")
            sessions = connection.execute("SELECT count(*) FROM sessions").fetchone()[0]
            losses = _losses(connection)
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return [
            Check(
                "FIX",
                "database",
                f"{path}: {exc}: move it away (a new one is made) or pass --db; "
                f"`sqlite3 {path} .recover | sqlite3 recovered.db` saves what it can",
            )
        ]
    checks = [Check("OK", "database", f"{path}: writable, {_size(size)}, {sessions:,} sessions")]
    return checks + _disk_space(path) + losses


#: Free space below which the database's disk is reported (the store keeps rows in memory when it is full).
LOW_DISK_BYTES = 16 * 1024 * 1024


def _disk_space(path: Path) -> list[Check]:
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return []
    free = st.f_bavail * st.f_frsize
    if free >= LOW_DISK_BYTES:
        return []
    return [
        Check(
            "FIX",
            "database disk",
            f"only {_size(free)} free where {path.name} is: a monitor keeps rows in memory while "
            "the disk is full and loses what does not fit; free some space or move the database (--db)",
        )
    ]


def _losses(connection: Any) -> list[Check]:
    """The last run that lost rows, from ``store_losses`` (a full disk, a full queue)."""
    import sqlite3

    try:
        row = connection.execute(
            "SELECT ts, dropped, failed, reason FROM store_losses ORDER BY id DESC LIMIT 1"
        ).fetchone()
    except sqlite3.Error:  # a database from before the table
        return []
    if row is None:
        return []
    ts, dropped, failed, reason = row
    return [
        Check(
            "--",
            "database losses",
            f"a run at {time.strftime('%Y-%m-%d %H:%M', time.localtime(ts))} lost "
            f"{(dropped or 0) + (failed or 0):,} rows (last: {reason or '-'}); `loopwatch history` lists them",
        )
    ]


# -- OTLP ----------------------------------------------------------------------------------------------


def check_otlp(monitor: dict[str, Any]) -> list[Check]:
    endpoint = monitor.get("otlp")
    if not endpoint:
        return [
            Check(
                "--",
                "OTLP",
                "off (optional: `watch --otlp` receives OpenTelemetry from agents and "
                "Collectors; see docs/integrations.md)",
            )
        ]
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    try:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT)
        connection.request("POST", "/v1/logs", body=b"{}", headers={"Content-Type": "application/json"})
        status = connection.getresponse().status
        connection.close()
    except OSError as exc:
        return [Check("FIX", "OTLP", f"{endpoint} does not answer ({exc}): is the monitor still running?")]
    if status in (200, 401):
        note = " (token required)" if status == 401 else ""
        return [Check("OK", "OTLP", f"{endpoint}/v1/logs and /v1/traces answer{note}")]
    return [Check("FIX", "OTLP", f"{endpoint}/v1/logs answered HTTP {status}")]


def check_otlp_export(monitor: dict[str, Any]) -> list[Check]:
    """Where detections are exported (the running monitor's target, else the config's) and whether it answers."""
    headers: dict[str, str] = {}
    try:
        from monitor.config import load_config

        export = load_config().export
        headers = export.otlp_headers
    except Exception:  # a bad config file is reported by `watch`, not here
        export = None
    url = monitor.get("otlp_export") or (export.otlp_url if export is not None else "")
    if not url:
        return [Check("--", "OTLP export", "off (optional: `watch --otlp-export URL` sends detections out)")]
    from monitor.otlp_export import check

    ok, said = check(url, headers)
    return [Check("OK" if ok else "FIX", "OTLP export", said)]


def check_otlp_pending() -> list[Check]:
    """OTLP records a stopped monitor accepted and left for the next ``watch --otlp``."""
    from monitor.paths import hook_state_dir
    from monitor.sources.otlp_pending import waiting

    files = waiting(hook_state_dir())
    if not files:
        return []
    names = ", ".join(str(path) for path in files[:3]) + (" …" if len(files) > 3 else "")
    return [
        Check(
            "--",
            "OTLP pending",
            f"{len(files)} file(s) of OTLP records accepted by a stopped monitor ({names}): "
            "the next `watch --otlp` reads them first",
        )
    ]


def running_monitor_state() -> dict[str, Any]:
    """What the running monitor wrote about itself (see :func:`write_monitor_state`), if it still runs."""
    from monitor.hooks import state_dir

    data = _contact(state_dir() / "monitor.json")
    pid = data.get("pid")
    if not isinstance(pid, int):
        return {}
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return {}
    except PermissionError:
        pass
    return data


def write_monitor_state(**fields: Any) -> Path | None:
    """A running monitor notes its pid, socket, database and OTLP endpoint for ``doctor``."""
    from monitor.hooks import state_dir, write_state

    path = state_dir() / "monitor.json"
    # Checked like the hook's own files: a private directory, no link followed.
    data = json.dumps({"pid": os.getpid(), "started": time.time(), **fields}).encode()
    return path if write_state(path, data) else None


def clear_monitor_state() -> None:
    from monitor.hooks import state_dir

    path = state_dir() / "monitor.json"
    if _contact(path).get("pid") == os.getpid():
        path.unlink(missing_ok=True)


# -- the command -----------------------------------------------------------------------------------------


def diagnose(
    *, socket_path: Path, db_path: Path, paths: list[str], project: Path, now: float | None = None
) -> list[Check]:
    now = time.time() if now is None else now
    monitor = running_monitor_state()
    if monitor.get("socket") and Path(monitor["socket"]) != socket_path:
        socket_path = Path(monitor["socket"])
    checks = check_socket(socket_path)
    checks += check_hooks(project, now)
    checks += check_paths(paths)
    checks += check_db(Path(monitor["db"]) if monitor.get("db") else db_path)
    checks += check_otlp(monitor)
    checks += check_otlp_export(monitor)
    checks += check_otlp_pending()
    return checks


def report(checks: list[Check], out: TextIO) -> int:
    for check in checks:
        out.write(f"{check}\n")
    failed = sum(check.status == "FIX" for check in checks)
    out.write("all well\n" if not failed else f"{failed} to fix\n")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    from monitor.commands.common import ConfigError, config_from_args, fail
    from monitor.config import default_socket_path
    from monitor.store import resolve_db_path

    try:
        config = config_from_args(args)
    except ConfigError as exc:
        return fail(str(exc))
    socket_path = Path(args.socket or config.sources.socket or default_socket_path()).expanduser()
    db_path = resolve_db_path(args.db, config.store)
    paths = list(args.paths) + [p for p in config.sources.paths if p not in args.paths]
    checks = diagnose(
        socket_path=socket_path, db_path=db_path, paths=paths, project=Path(args.project).expanduser()
    )
    checks += check_ui(config)
    checks += check_guard(config)
    checks += check_alerts(config)
    from monitor.commands.doctor_live import check_pause, check_waiting

    checks += [Check(*line) for line in check_waiting(config) + check_pause()]
    return report(checks, sys.stdout)


def check_guard(config: Any) -> list[Check]:
    """``[control] guard``: whether calls continuing a flagged loop are denied by default."""
    control = config.control
    if not control.guard:
        return [Check("--", "guard", "off by default ([control] guard = true; `b` turns it on per session)")]
    return [
        Check(
            "OK",
            "guard",
            f"on: a call that continues a loop at {control.guard_level.label} is denied "
            "(hook sessions: `loopwatch install-hook claude|codex`)",
        )
    ]


def check_alerts(config: Any) -> list[Check]:
    """``[alerts]``: a test alert to each configured sink (a notification, a POST, the command)."""
    from monitor.alerts import try_alerts

    return [Check(status, f"alerts: {sink}", detail) for sink, status, detail in try_alerts(config.alerts)]


def check_ui(config: Any) -> list[Check]:
    """``[ui]``: the theme and keymap the TUI will use."""
    from monitor.commands.common import ui_config_problem

    problem = ui_config_problem(config)
    return [Check("FIX", "[ui]", problem) if problem else Check("OK", "[ui]", "theme and keymap valid")]
