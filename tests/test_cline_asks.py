"""Cline / Roo Code approval asks in ``ui_messages.json`` as "waiting for input" (issue 35 §1).

No live Cline runs here; the records are built from the field names of cline/cline at
commit 21cb8d2525bcedf1f4b6890b27a74a14fe7451e4 (2026-08-22), checked 2026-12-02:

* ``apps/vscode/src/shared/ExtensionMessage.ts``: ``ClineMessage`` (``ts`` epoch ms, ``type``
  ``ask``/``say``, ``ask``, ``say``, ``text``, ``partial``), ``ClineAsk`` (the 18 kinds in
  :data:`CLINE_ASKS`) and ``TurnPhase`` (``awaiting_approval``: a tool/command/mcp/subagent
  approval; ``awaiting_followup``: ask_question / plan_mode_respond; ``completed``:
  attempt_completion; ``error``: api_req_failed; ``resumable``: resume task).
* ``apps/vscode/src/sdk/sdk-interaction-coordinator.ts``: ``handleRequestToolApproval``
  appends the approval ask (auto-approved calls ask nothing) and returns a promise the
  person's click resolves; ``handleAskQuestion`` appends ``ask: "followup"`` with the text
  ``JSON.stringify({question, options})`` and awaits the answer the same way.
* ``apps/vscode/src/sdk/message-translator.ts``, ``buildToolApprovalAskMessage``: the ask is
  ``command`` (text: the command), ``use_mcp_server`` (an MCP payload), ``use_subagents``
  (``{prompts}``) or ``tool`` (a ``ClineSayTool`` JSON: ``tool``, ``path``, ``content`` …).

* Roo Code, RooCodeInc/Roo-Code at commit cb836567180a3ff1da6d082f3178b90c3bd22a70
  (2026-04-14), ``packages/types/src/message.ts``: ``clineAsks`` (:data:`ROO_ASKS`), sorted as
  ``interactiveAsks`` (followup, command, tool, use_mcp_server), ``idleAsks``
  (completion_result, api_req_failed, resume_completed_task, mistake_limit_reached,
  auto_approval_max_req_reached), ``resumableAsks`` (resume_task) and ``nonBlockingAsks``
  (command_output: "not associated with an actual approval").

A real task folder in ``tmp_path`` is tailed by a running watcher; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config
from monitor.formats.cline_asks import WAITING_ASKS, waits, what_it_asks
from monitor.hub.live import LiveMonitor
from monitor.sources.paths import StartPolicy

#: ``ClineAsk`` at the commit above, in its order.
CLINE_ASKS = (
    "followup",
    "plan_mode_respond",
    "act_mode_respond",
    "command",
    "command_output",
    "completion_result",
    "tool",
    "api_req_failed",
    "resume_task",
    "resume_completed_task",
    "mistake_limit_reached",
    "browser_action_launch",
    "use_mcp_server",
    "new_task",
    "condense",
    "summarize_task",
    "report_bug",
    "use_subagents",
)
#: Roo Code's ``clineAsks`` at the commit above.
ROO_ASKS = (
    "followup",
    "command",
    "command_output",
    "completion_result",
    "tool",
    "api_req_failed",
    "resume_task",
    "resume_completed_task",
    "mistake_limit_reached",
    "use_mcp_server",
    "auto_approval_max_req_reached",
)
TASK = "1764658800000"
T0 = 1_764_658_800_000  # 2025-12-02T07:00:00Z in epoch ms, as Cline writes ts
DEADLINE = 30.0


def _say(ts: int, say: str, text: str = "") -> dict[str, Any]:
    return {"ts": ts, "type": "say", "say": say, "text": text, "conversationHistoryIndex": 1}


def _ask(ts: int, ask: str, text: str = "", **more: Any) -> dict[str, Any]:
    return {"ts": ts, "type": "ask", "ask": ask, "text": text, "conversationHistoryIndex": 1, **more}


def _task(root: Path) -> Path:
    """A task folder whose history ends on an ``execute_command`` call (Cline's native tool use)."""
    folder = root / "tasks" / TASK
    folder.mkdir(parents=True)
    history = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nclean the build\n</task>"}], "ts": T0},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I will remove the build folder."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "execute_command",
                    "input": {"command": "rm -rf build", "requires_approval": True},
                },
            ],
            "ts": T0 + 4000,
        },
    ]
    (folder / "api_conversation_history.json").write_text(json.dumps(history))
    return folder


def _write(folder: Path, records: list[Any] | str) -> None:
    text = records if isinstance(records, str) else json.dumps(records)
    (folder / "ui_messages.json").write_text(text)


@asynccontextmanager
async def _watching(root: Path):
    live = LiveMonitor(
        Config(), paths=[str(root)], start_policy=StartPolicy(mode="recent"), use_db=False, use_socket=False
    )
    async with live.running() as hub:
        problems: list[Any] = []
        submit = hub.submit

        async def observed(events: list[Any], found: list[Any], **kwargs: Any) -> Any:
            problems.extend(found)
            return await submit(events, found, **kwargs)

        hub.submit = observed

        async def until(ok: Callable[[Any], bool]) -> Any:
            async with asyncio.timeout(DEADLINE):
                while True:
                    await live.files.sync()
                    await hub.join()
                    info = hub.session(TASK)
                    if info is not None and ok(info):
                        return info
                    await asyncio.sleep(0.01)  # the parser's turn (bounded by the deadline)

        yield live, problems, until


async def test_a_command_approval_waits_until_the_next_ui_record(tmp_path: Path):
    """The task's UI ends on a command approval ask: waiting (permission, since the ask, the
    command); a ``say`` appended to ``ui_messages.json`` alone ends it, without the history
    read again; a followup question then waits again, asking its question."""
    folder = _task(tmp_path)
    ui = [
        _say(T0, "task", "clean the build"),
        _say(T0 + 1000, "api_req_started", json.dumps({"tokensIn": 10, "tokensOut": 5})),
        _ask(T0 + 5000, "command", "rm -rf build\n"),
    ]
    _write(folder, ui)
    async with _watching(tmp_path) as (live, problems, until):
        info = await until(lambda i: i.waiting_why == "permission")
        assert info.waiting_for == "rm -rf build"
        assert info.waiting_since == pytest.approx((T0 + 5000) / 1000)
        assert info.agent == "cline"
        events = info.events
        before = live.files.bytes_read

        ui.append(_say(T0 + 65_000, "command_output", "removed"))
        _write(folder, ui)
        info = await until(lambda i: not i.waiting_why)
        assert not info.waiting_since and not info.waiting_for
        assert info.events == events + 1  # the resolution, once; the history's events not again
        assert live.files.bytes_read - before == (folder / "ui_messages.json").stat().st_size

        question = {"question": "Also clear the [bold]cache[/]?\x1b[2J", "options": ["yes", "no"]}
        ui.append(_ask(T0 + 70_000, "followup", json.dumps(question)))
        _write(folder, ui)
        info = await until(lambda i: i.waiting_why == "question")
        assert info.waiting_for == "Also clear the [bold]cache[/]?\x1b[2J"  # literal (escaped where shown)
        assert info.waiting_since == pytest.approx((T0 + 70_000) / 1000)
        assert info.events == events + 2

        _write(folder, ui)  # rewritten unchanged: nothing new
        ui.append(_say(T0 + 80_000, "user_feedback", "yes"))
        _write(folder, ui)
        info = await until(lambda i: not i.waiting_why)
        assert info.events == events + 3


async def test_a_half_written_or_malformed_ui_file_loses_nothing(tmp_path: Path):
    """A ``ui_messages.json`` caught half written is read again once whole; an ask without a
    time is reported at its record's place; the watcher goes on."""
    folder = _task(tmp_path)
    whole = [_say(T0, "task", "clean the build"), _ask(T0 + 5000, "tool", json.dumps({"tool": "readFile"}))]
    text = json.dumps(whole)
    _write(folder, text[: len(text) // 2])
    async with _watching(tmp_path) as (live, problems, until):
        await until(lambda i: i.events >= 3)  # the history's events
        _write(folder, text)
        info = await until(lambda i: i.waiting_why == "permission")
        assert info.waiting_for == "readFile"
        whole += [_say(T0 + 6000, "tool"), {"type": "ask", "ask": "command", "text": "make"}, 7, None]
        _write(folder, whole)
        info = await until(lambda i: not i.waiting_why)
        assert any(
            p.line == 4 and "ts is not a time" in p.reason and p.source.endswith("ui_messages.json")
            for p in problems
        )
        assert sorted(p.line for p in problems if "expected a UI message" in p.reason) == [5, 6]


def test_every_cline_ask_is_classified_and_only_command_output_does_not_wait():
    assert set(WAITING_ASKS) | {"command_output"} == set(CLINE_ASKS) | set(ROO_ASKS)
    assert WAITING_ASKS["tool"] == WAITING_ASKS["command"] == WAITING_ASKS["use_mcp_server"] == "permission"
    assert WAITING_ASKS["followup"] == "question" and WAITING_ASKS["resume_task"] == "input"
    assert WAITING_ASKS["completion_result"] == "idle"


def test_partial_and_not_waiting_asks_are_no_wait_and_ids_are_stable():
    records = [
        _ask(T0, "command_output", "building..."),
        _ask(T0 + 1000, "followup", '{"question": "Wh', partial=True),
        _ask(T0 + 2000, "api_req_failed", "429 rate limited"),
        _ask(T0 + 3000, "use_mcp_server", json.dumps({"serverName": "github", "toolName": "create_issue"})),
    ]
    events, problems = waits(records, "ui_messages.json", TASK)
    assert not problems
    shown = [(e.line, e.status, e.content, e.ts) for e in events]
    assert shown == [
        (3, "input", "429 rate limited", T0 / 1000 + 2),
        (4, "resolved", "", T0 / 1000 + 3),
        (4, "permission", "github", T0 / 1000 + 3),
    ]
    again, _ = waits(records, "ui_messages.json", TASK)
    assert [(e.line, e.status) for e in again] == [(e.line, e.status) for e in events]


def test_what_an_ask_asks_is_clipped_and_taken_from_its_json():
    assert what_it_asks("tool", json.dumps({"tool": "editedExistingFile", "path": "src/a.py"})) == (
        "editedExistingFile src/a.py"
    )
    assert what_it_asks("use_subagents", json.dumps({"prompts": ["review the diff"]})) == "review the diff"
    assert what_it_asks("resume_task", "") == "resume_task"
    assert what_it_asks("command", "{not json") == "{not json"
    assert len(what_it_asks("command", "x" * 5000)) == 300


async def test_a_restart_delivers_no_ask_twice_and_still_shows_the_wait(tmp_path: Path):
    """Two watchers, one after the other, on one database: the second reads nothing again
    (the UI file's position is kept) and shows the task waiting since the same ask; the
    answer, written while none ran, ends it."""
    from tests.test_restart import counts, run_once

    root = tmp_path / "globalStorage"
    folder = _task(root)
    ui = [_say(T0, "task", "clean the build"), _ask(T0 + 5000, "command", "make clean")]
    _write(folder, ui)
    db = tmp_path / "x.db"
    first = await run_once([root], db)
    info = first.hub.session(TASK)
    assert info.waiting_why == "permission" and info.waiting_for == "make clean"
    again = await run_once([root], db)
    assert again.hub.events_total == 0
    info = again.hub.session(TASK)
    assert info.waiting_why == "permission" and info.waiting_since == pytest.approx((T0 + 5000) / 1000)
    ui.append(_say(T0 + 9000, "command_output", "ok"))
    _write(folder, ui)
    third = await run_once([root], db)
    assert third.hub.events_total == 1
    assert not third.hub.session(TASK).waiting_why
    events, distinct, _, _ = counts(db)
    assert events == distinct
