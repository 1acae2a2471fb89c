"""A deterministic, scripted set of sessions for screenshots, snapshot tests
and the benchmark.

Everything is fixed: event times start at :data:`T0`, the clock is frozen at
:data:`NOW`, and each session is fed through a real :class:`~monitor.hub.Hub`
(and a real store when a path is given), so what the screens show is exactly
what a live monitor would show for these events.  One session carries markup
and ANSI escapes in its agent text, to show they stay literal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.config import Config
from monitor.events import Event, Kind

if TYPE_CHECKING:
    from monitor.ui.app import LoopwatchApp

#: 2026-01-01 09:00:00 UTC; tests and screenshots run with TZ=UTC.
T0 = 1_767_258_000.0
NOW = T0 + 300.0
HOSTILE = "[bold red]pwned[/] [link=https://evil.example]click[/link] \x1b[31mred\x1b[0m \x07"


def frozen_clock(now: float = NOW) -> Callable[[], float]:
    return lambda: now


class ScriptedSession:
    def __init__(self, session: str, agent: str, t0: float, source: str, pid: int | None = None):
        self.session, self.agent, self.ts, self.source = session, agent, t0, source
        self.line = 0
        self.calls = 0
        self.events: list[Event] = []
        self.add(Kind.SESSION_START, agent=agent, pid=pid)

    def add(self, kind: Kind, step: float = 2.0, **fields: Any) -> Event:
        self.line += 1
        self.ts += step
        event = Event(
            kind=kind, session=self.session, ts=self.ts, source=self.source, line=self.line, **fields
        )
        self.events.append(event)
        return event

    def say(self, content: str, role: str = "assistant") -> None:
        self.add(Kind.MESSAGE, role=role, content=content)

    def call(self, tool: str, args: dict[str, Any], result: str, *, error: bool = False) -> None:
        self.calls += 1
        call_id = f"c{self.calls}"
        self.add(Kind.TOOL_CALL, tool=tool, args=args, call_id=call_id)
        self.add(Kind.TOOL_RESULT, step=1.0, call_id=call_id, content=result, is_error=error)

    def end(self, status: str = "completed") -> None:
        self.add(Kind.SESSION_END, status=status)


def scripted_sessions(directory: Path | None = None, t0: float = T0) -> list[ScriptedSession]:
    """The scripted sessions (``directory`` names their log files)."""
    base = Path(directory) if directory is not None else Path("/var/log/agents")

    def src(name: str) -> str:
        return str(base / f"{name}.jsonl")

    scripts: list[ScriptedSession] = []

    stuck = ScriptedSession("claude-7f3a", "claude-code", t0 + 10, src("claude-7f3a"))
    stuck.say("Let me check whether the build output exists.")
    stuck.call("read_file", {"path": "src/app.py"}, "def main():\n    run()\n")
    for _ in range(6):
        stuck.call(
            "bash",
            {"command": "ls /tmp/build/out"},
            "ls: cannot access '/tmp/build/out': No such file or directory",
            error=True,
        )
    scripts.append(stuck)

    poll = ScriptedSession("codex-run-12", "codex", t0 + 20, src("codex-run-12"))
    for done in (12, 40, 71, 100):
        poll.call("bash", {"command": "pytest -q tests/"}, f"{done} passed, {100 - done} remaining")
    poll.say("All tests pass now; the fix is complete.")
    scripts.append(poll)

    cycle = ScriptedSession("swe-agent-3", "swe-agent", t0 + 5, src("swe-agent-3"))
    for _ in range(4):
        cycle.call("open_file", {"path": "django/db/models/query.py"}, "[file opened, 2,431 lines]")
        cycle.call("search_file", {"term": "def _fetch_all"}, "No matches found.")
    scripts.append(cycle)

    hostile = ScriptedSession("markup-test", HOSTILE, t0 + 30, src("markup-test"))
    for _ in range(4):
        hostile.call("echo", {"text": HOSTILE}, HOSTILE)
    scripts.append(hostile)

    honest = ScriptedSession("planner-1", "planner", t0 + 40, src("planner-1"))
    for step, path in enumerate(("README.md", "setup.cfg", "src/cli.py", "tests/test_cli.py")):
        honest.call("read_file", {"path": path}, f"contents of {path} ({step * 40 + 12} lines)")
    honest.say("I have what I need; writing the plan.")
    scripts.append(honest)

    done = ScriptedSession("codex-run-9", "codex", t0, src("codex-run-9"))
    done.call("apply_patch", {"patch": "*** Update File: src/util.py"}, "Done!")
    done.call("bash", {"command": "make test"}, "ok")
    done.end()
    scripts.append(done)
    return scripts


def scripted_events(directory: Path | None = None, t0: float = T0) -> list[Event]:
    """All scripted events, in time order across sessions."""
    events = [e for s in scripted_sessions(directory, t0) for e in s.events]
    return sorted(events, key=lambda e: (e.ts, e.session, e.line or 0))


@asynccontextmanager
async def scripted_hub(
    config: Config | None = None,
    *,
    db: Path | None = None,
    logs: Path | None = None,
    clock: Callable[[], float] | None = None,
    events: list[Event] | None = None,
    channels: bool = True,
) -> AsyncIterator[Any]:
    """A started hub (with a store if ``db``) that has processed the script.

    With ``channels`` each session gets an inbox channel next to its log file
    (``logs``, or a fixed path that is only written when something is sent),
    so injects are really delivered to ``<log>.inbox.jsonl``."""
    from monitor.control import InboxChannel
    from monitor.hub import Hub
    from monitor.store import Store

    config = config or Config()
    clock = clock or frozen_clock()
    store = Store(db, clock=clock) if db is not None else None
    if store is not None:
        store.start()
    hub = Hub(config, store, clock=clock)
    if events is None:
        events = scripted_events(logs)
    if logs is not None:
        Path(logs).mkdir(parents=True, exist_ok=True)
    if channels:
        for session in dict.fromkeys(e.session for e in events):
            source = next(e.source for e in events if e.session == session)
            hub.register_channel(session, InboxChannel(source))
    await hub.start()
    try:
        await hub.submit(events)
        await hub.join()
        if store is not None:
            store.flush()
        yield hub
    finally:
        await hub.stop()
        if store is not None:
            store.close()


def scripted_app(
    tmp_path: Path,
    events: list[Event] | None = None,
    *,
    config: Config | None = None,
    channels: bool = True,
    **app_options: Any,
) -> LoopwatchApp:
    """The real app over :func:`scripted_hub` at the frozen clock: its store is
    ``tmp_path/db.sqlite``, the sessions' logs (and inboxes) under ``tmp_path/logs``."""
    from monitor.ui.app import LoopwatchApp

    config = config or Config()
    return LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(
            config,
            db=tmp_path / "db.sqlite",
            logs=tmp_path / "logs",
            events=events,
            channels=channels,
        ),
        **app_options,
    )


async def settle(pilot: Any) -> None:
    """Let queued work run, flush the coalesced live updates, repaint."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    pilot.app.flush_live()
    await pilot.pause()


def record_history(db: Path) -> None:
    """Run the script through a hub that stores in ``db`` and stops (as after a watch)."""

    async def run() -> None:
        async with scripted_hub(Config(), db=db):
            pass

    asyncio.run(run())


async def history_app(tmp_path: Path, **app_options: Any) -> LoopwatchApp:
    """The app over a store the script was recorded in (``tmp_path/h.sqlite``), at the
    frozen clock; ``mode="history"`` unless ``app_options`` say otherwise."""
    from monitor.store import Store
    from monitor.ui.app import LoopwatchApp

    db = tmp_path / "h.sqlite"
    await asyncio.to_thread(record_history, db)
    return LoopwatchApp(Config(), store=Store(db), clock=frozen_clock(), **{"mode": "history", **app_options})
