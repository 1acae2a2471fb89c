"""Waiting for input from the sources beyond hooks (issue 35 §1): OTel, transcripts, a restart.

No live agent runs here; the payloads are built from the documented field names
(checked 2026-12-02):

* Claude Code, code.claude.com/docs/en/monitoring-usage -- the ``tool_decision`` log
  event (``tool_name``, ``tool_use_id``, ``decision`` ``accept``/``reject``, ``source``
  ``config``/``hook``/``user_permanent``/``user_temporary``/``user_abort``/``user_reject``)
  and the ``claude_code.tool.blocked_on_user`` span, a child of ``claude_code.tool``
  (``duration_ms``, ``decision``, ``source``: the time a call waited for permission).
  No log event marks the start of a permission prompt.
* Codex, openai/codex ``codex-rs/otel/src/events/session_telemetry.rs`` -- the
  ``codex.tool_decision`` log event (``tool_name``, ``call_id``, ``decision``
  lower-cased ``ReviewDecision``, ``source`` ``config``/``user``/``automated_reviewer``,
  ``ToolDecisionSource`` in ``codex-rs/otel/src/lib.rs``); no event at the approval request.
  The same file's ``codex.plugin_install_elicitation_sent`` (``plugin_install.tool_type``,
  ``.tool_id``, ``.tool_name``) and ``codex.plugin_install_suggestion``
  (``.response_action``, ``.user_confirmed``, ``.completed``): an elicitation sent, answered.
* Codex rollouts, openai/codex ``codex-rs/rollout/src/policy.rs``
  (``should_persist_event_msg``): ``ExecApprovalRequest``, ``ApplyPatchApprovalRequest``,
  ``RequestPermissions``, ``RequestUserInput`` and ``ElicitationRequest`` are *not*
  persisted; the ``function_call`` response items are, so a ``request_user_input``
  call without its ``function_call_output`` is a question still open.
* Claude Code transcripts record an ``AskUserQuestion`` ``tool_use`` (``input.questions[]
  .question``) and its ``tool_result``; permission prompts are not recorded (a call
  waiting for approval looks like one running: anthropics/claude-code, the feature
  request "Surface pending-approval state in session JSONL").
* Gemini CLI, google-gemini/gemini-cli ``packages/core/src/core/geminiChat.ts``
  (``recordCompletedToolCalls``): tool calls reach the chat file once completed, so none
  is ever recorded awaiting approval (nothing to read there).
* OpenCode, sst/opencode ``packages/opencode/src/tool/question.ts``:
  ``Tool.define("question", {parameters: {questions: [{question, header, options}]}})``.

The OTel records go through the real SDK exporters (OTLP/HTTP protobuf) to a running
receiver; transcripts are real files tailed by a running watcher; the restart is two
hubs on one SQLite database.  Nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config
from monitor.events import Event, Kind
from monitor.hub.live import LiveMonitor
from monitor.sources.paths import StartPolicy
from tests.test_otlp import _resource, receiver
from tests.test_restart import run_once

FIXTURES = Path(__file__).resolve().parent / "fixtures"

CLAUDE = "0b9c6a1e-3f2d-4e5a-9b8c-7d6e5f4a3b2c"
CODEX = "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a"


def _send_logs(endpoint: str, service: str, records: list[dict[str, Any]]) -> None:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=_resource(service))
    provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=20))
    )
    logger = provider.get_logger(service)
    for sequence, attributes in enumerate(records):
        name = attributes["event.name"]
        logger.emit(body=name, event_name=name, attributes={"event.sequence": sequence, **attributes})
    provider.force_flush()
    provider.shutdown()


def _send_blocked_spans(endpoint: str, start_ns: int, waits: list[tuple[str, str, int]]) -> None:
    """Claude Code's span tree of calls that waited: ``claude_code.tool`` with a
    ``claude_code.tool.blocked_on_user`` child (``(source, decision, seconds waited)``
    each) and then its ``claude_code.tool.execution``, with the times a real wait has."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import set_span_in_context

    provider = TracerProvider(resource=_resource("claude-code"))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    tracer = provider.get_tracer("com.anthropic.claude_code")
    at = start_ns
    for n, (source, decision, seconds) in enumerate(waits):
        call = f"toolu_wait_{n}"
        tool = tracer.start_span(
            "claude_code.tool",
            start_time=at,
            attributes={"session.id": CLAUDE, "tool_name": "Bash", "tool_use_id": call},
        )
        inside = set_span_in_context(tool)
        blocked = tracer.start_span(
            "claude_code.tool.blocked_on_user",
            context=inside,
            start_time=at + 1_000_000,
            attributes={
                "session.id": CLAUDE,
                "span.type": "claude_code.tool.blocked_on_user",
                "decision": decision,
                "source": source,
                "duration_ms": seconds * 1000,
            },
        )
        decided = at + 1_000_000 + seconds * 1_000_000_000
        blocked.end(end_time=decided)
        run = tracer.start_span(
            "claude_code.tool.execution",
            context=inside,
            start_time=decided,
            attributes={"session.id": CLAUDE, "tool_use_id": call, "success": "true"},
        )
        run.end(end_time=decided + 50_000_000)
        tool.end(end_time=decided + 60_000_000)
        at = decided + 1_000_000_000
    provider.force_flush()
    provider.shutdown()


def _watching(hub: Any) -> list[Event]:
    """Every event the receiver hands the (real) hub, in order."""
    seen: list[Event] = []
    submit = hub.submit

    async def observed(events: list[Event], problems: list[Any], **kwargs: Any) -> Any:
        seen.extend(events)
        return await submit(events, problems, **kwargs)

    hub.submit = observed
    return seen


async def test_a_blocked_on_user_span_is_the_wait_it_measured_and_rules_ask_nobody():
    """A ``claude_code.tool.blocked_on_user`` span decided by the person: a wait for
    permission from its start to the decision (over by the time the span is exported),
    kept in the history where it was; one decided by a rule (``config``) is no wait."""
    start = 1_764_000_000 * 1_000_000_000
    async with receiver() as (hub, otlp):
        seen = _watching(hub)
        await asyncio.to_thread(
            _send_blocked_spans,
            otlp.endpoint,
            start,
            [("user_temporary", "accept", 240), ("config", "accept", 0)],
        )
        await hub.join()
        waits = [(e.status, e.ts, e.content) for e in seen if e.kind is Kind.WAITING]
        began = start / 1e9 + 0.001
        assert waits == [
            ("permission", pytest.approx(began), "a permission prompt"),
            ("resolved", pytest.approx(began + 240), "accept by the user (user_temporary)"),
        ]
        calls = [e for e in seen if e.kind is Kind.TOOL_CALL]
        assert len(calls) == 2  # the tool spans are read as before
        info = hub.session(CLAUDE)
        assert info is not None and not info.waiting and info.waiting_since == 0.0
        assert info.level == 0  # a wait is never a detection
        assert otlp.rejected == 0


async def test_a_decision_by_the_person_ends_the_wait_a_hook_opened():
    """Claude Code ``tool_decision`` with ``source`` ``user_temporary`` ends the permission
    wait (here opened as the ``PermissionRequest`` hook opens it); ``config`` decisions say
    nothing; Codex's ``codex.tool_decision`` with ``source`` ``user`` does the same."""
    async with receiver() as (hub, otlp):
        seen = _watching(hub)
        now = 1_764_000_000.0
        # What `loopwatch hook claude` sends for PermissionRequest / Codex's PermissionRequest.
        asked = [
            Event(Kind.WAITING, CLAUDE, now, status="permission", content="Bash: rm -rf build/"),
            Event(Kind.WAITING, CODEX, now, status="permission", content="shell: git push"),
        ]
        await hub.submit(asked, [])
        await hub.join()
        assert hub.session(CLAUDE).waiting and hub.session(CODEX).waiting
        await asyncio.to_thread(
            _send_logs,
            otlp.endpoint,
            "claude-code",
            [
                {
                    "event.name": "claude_code.tool_decision",
                    "session.id": CLAUDE,
                    "tool_name": "Read",
                    "tool_use_id": "toolu_r",
                    "decision": "accept",
                    "source": "config",
                },
                {
                    "event.name": "claude_code.tool_decision",
                    "session.id": CLAUDE,
                    "tool_name": "Bash",
                    "tool_use_id": "toolu_b",
                    "decision": "reject",
                    "source": "user_reject",
                },
            ],
        )
        await asyncio.to_thread(
            _send_logs,
            otlp.endpoint,
            "codex_cli_rs",
            [
                {
                    "event.name": "codex.tool_decision",
                    "conversation.id": CODEX,
                    "tool_name": "shell",
                    "call_id": "call_1",
                    "decision": "approved",
                    "source": "config",
                },
                {
                    "event.name": "codex.tool_decision",
                    "conversation.id": CODEX,
                    "tool_name": "shell",
                    "call_id": "call_2",
                    "decision": "denied",
                    "source": "user",
                },
            ],
        )
        await hub.join()
        resolved = [(e.session, e.content) for e in seen if e.kind is Kind.WAITING and e.status == "resolved"]
        assert resolved == [
            (CLAUDE, "Bash: reject by the user (user_reject)"),
            (CODEX, "shell: denied by the user (user)"),
        ]
        assert not hub.session(CLAUDE).waiting and not hub.session(CODEX).waiting
        assert otlp.adapter.ignored == 2  # the rules' decisions


async def test_a_codex_plugin_install_elicitation_waits_until_its_outcome():
    """``codex.plugin_install_elicitation_sent``: the session waits (an elicitation, asking
    to install the plugin) until ``codex.plugin_install_suggestion`` says what the person did."""
    async with receiver() as (hub, otlp):
        common = {"conversation.id": CODEX, "plugin_install.tool_type": "connector"}
        sent = {
            "event.name": "codex.plugin_install_elicitation_sent",
            **common,
            "plugin_install.tool_id": "gdrive",
            "plugin_install.tool_name": "Google Drive",
        }
        await asyncio.to_thread(_send_logs, otlp.endpoint, "codex_cli_rs", [sent])
        await hub.join()
        info = hub.session(CODEX)
        assert info.waiting_why == "elicitation" and info.waiting_for == "install connector Google Drive?"
        outcome = {
            **sent,
            "event.name": "codex.plugin_install_suggestion",
            "plugin_install.response_action": "accept",
            "plugin_install.user_confirmed": True,
            "plugin_install.completed": True,
        }
        await asyncio.to_thread(_send_logs, otlp.endpoint, "codex_cli_rs", [outcome])
        await hub.join()
        assert not hub.session(CODEX).waiting_since
        assert otlp.rejected == 0


def test_claude_exit_plan_mode_waits_for_the_plan_to_be_approved():
    """``ExitPlanMode`` (``input.plan``), as a Claude Code transcript records it: the plan
    waits for the person's approval until the call's result."""
    from monitor.config import build_config
    from monitor.detect.engine import Engine

    engine = Engine(build_config({}))
    plan = "1. Add the migration\n2. Backfill the column"
    engine.process(Event(Kind.TOOL_CALL, "s", 10.0, call_id="p1", tool="ExitPlanMode", args={"plan": plan}))
    wait = engine.sessions["s"].view.input_wait
    assert wait is not None and wait.why == "question" and wait.asks == plan
    engine.process(Event(Kind.TOOL_RESULT, "s", 70.0, call_id="p1", content="User has approved your plan."))
    assert engine.sessions["s"].view.input_wait is None


# -- transcripts ----------------------------------------------------------------------------------

CLAUDE_FIXTURE = FIXTURES / "claude-code" / "subagent.jsonl"  # real (marot/spotter, fixtures README)
ASKED_AT = 33  # its line: the AskUserQuestion tool_use; line 34 holds the person's answer
ASKING = "491e126e-1e71-469c-ade2-fcc8af567c74"
CODEX_ID = "019d0000-aaaa-7bbb-8ccc-0123456789ab"


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _codex(kind: str, payload: dict[str, Any], ts: str) -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"


#: How long a test waits for the watcher to read what was written (never a fixed sleep).
DEADLINE = 30.0


@asynccontextmanager
async def _watching_files(paths: list[Path]):
    """A running watcher of ``paths`` (no database: never the user's default one) and
    ``until(session, events)``: polls it, within :data:`DEADLINE`, until ``session`` has
    ``events`` events (the files are parsed off the event loop)."""
    live = LiveMonitor(
        Config(),
        paths=[str(p) for p in paths],
        start_policy=StartPolicy(mode="recent"),
        use_db=False,
        use_socket=False,
    )
    async with live.running() as hub:

        async def until(session: str, events: int) -> Any:
            async with asyncio.timeout(DEADLINE):
                while True:
                    await live.files.sync()
                    await hub.join()
                    info = hub.session(session)
                    if info is not None and info.events >= events:
                        return info
                    await asyncio.sleep(0.01)  # the parser's turn (bounded by the deadline)

        yield hub, until


async def test_a_claude_transcript_that_ends_on_a_question_waits_across_a_restart(tmp_path: Path):
    """A real Claude Code transcript cut after its ``AskUserQuestion`` call: the session waits
    for input, since the call, asking its first question; a restart on the same database
    shows it waiting still, since the same time; the person's answer, appended, ends it."""
    lines = CLAUDE_FIXTURE.read_text().splitlines(keepends=True)
    asked = json.loads(lines[ASKED_AT - 1])
    log = tmp_path / f"{ASKING}.jsonl"
    log.write_text("".join(lines[:ASKED_AT]))
    db = tmp_path / "x.db"
    first = await run_once([log], db)
    info = first.hub.session(ASKING)
    assert info is not None and info.waiting_why == "question"
    assert info.waiting_since == pytest.approx(_epoch(asked["timestamp"]))
    assert info.waiting_for.startswith("Which rig do these beads belong to?")

    again = await run_once([log], db)
    assert again.hub.events_total == 0 and again.hub.seeded_waits == 1
    info = again.hub.session(ASKING)
    assert info.waiting_why == "question" and info.waiting_since == pytest.approx(_epoch(asked["timestamp"]))
    assert info.waiting_for.startswith("Which rig do these beads belong to?")

    with log.open("a") as out:
        out.write(lines[ASKED_AT])  # the tool_result: "User has answered your questions: …"
    third = await run_once([log], db)
    assert third.hub.events_total >= 1
    info = third.hub.session(ASKING)
    assert not info.waiting_since and not info.waiting_why


async def test_a_codex_rollout_waits_on_request_user_input_until_its_output(tmp_path: Path):
    """A tailed Codex rollout whose last record is a ``request_user_input`` function call
    (persisted; the approval and question *events* are not): waiting, asking the first
    question; its ``function_call_output`` ends it."""
    log = tmp_path / f"rollout-2026-12-02T06-00-00-{CODEX_ID}.jsonl"
    ask = {
        "type": "function_call",
        "name": "request_user_input",
        "call_id": "call_ask",
        "arguments": json.dumps(
            {
                "questions": [
                    {
                        "id": "target",
                        "header": "Target",
                        "question": "Deploy to staging or production?",
                        "options": [
                            {"label": "staging", "description": "safe"},
                            {"label": "production", "description": "live"},
                        ],
                    }
                ]
            }
        ),
    }
    log.write_text(
        _codex(
            "session_meta", {"id": CODEX_ID, "cwd": "/w", "cli_version": "0.130.0"}, "2026-12-02T06:00:00Z"
        )
        + _codex("response_item", ask, "2026-12-02T06:00:05Z")
    )
    async with _watching_files([log]) as (hub, until):
        info = await until(CODEX_ID, 2)
        assert info.waiting_why == "question"
        assert info.waiting_for == "Deploy to staging or production?"
        assert info.waiting_since == pytest.approx(_epoch("2026-12-02T06:00:05Z"))
        answer = {"type": "function_call_output", "call_id": "call_ask", "output": "staging"}
        with log.open("a") as out:
            out.write(_codex("response_item", answer, "2026-12-02T06:03:40Z"))
        info = await until(CODEX_ID, 3)
        assert not info.waiting_since and not info.waiting_why


async def test_an_opencode_question_part_waits_until_it_is_completed(tmp_path: Path):
    """OpenCode's ``question`` tool (``Tool.define("question")``, ``questions[].question``):
    a running part waits for the person; the part completed ends it."""
    from tests.test_formats_opencode_storage import LAST, SESSION, _part, _storage

    root = _storage(tmp_path)

    def question(status: str, **state: Any) -> dict[str, Any]:
        return {
            "type": "tool",
            "tool": "question",
            "callID": "call_q",
            "state": {
                "status": status,
                "input": {"questions": [{"question": "Keep the old API?", "header": "API", "options": []}]},
                "time": {"start": 1785420900000},
                **state,
            },
        }

    async with _watching_files([root]) as (hub, until):
        info = await until(SESSION, 86)  # the real session, as its storage folder holds it
        assert not info.waiting_since
        _part(root, LAST, "prt_zzz_question", question("running"))
        info = await until(SESSION, 87)
        assert info.waiting_why == "question" and info.waiting_for == "Keep the old API?"
        _part(
            root,
            LAST,
            "prt_zzz_question",
            question(
                "completed", output="User answered: yes", time={"start": 1785420900000, "end": 1785421000000}
            ),
        )
        info = await until(SESSION, 88)
        assert not info.waiting_since


# -- a restart ------------------------------------------------------------------------------------


async def test_a_permission_prompt_from_a_real_hook_is_still_waiting_after_a_restart(tmp_path: Path):
    """``loopwatch hook claude`` reports PreToolUse then PermissionRequest to a monitor that
    records to SQLite; the monitor stops and a new one starts on the same database: the
    session waits still, since the same time, for the same call; the tool's result, from
    the hook again, ends it.  The first run recorded nothing about the wait but its events."""
    from monitor.hub import Hub
    from monitor.sources.sockets import SocketServer
    from monitor.store import Store
    from tests.socketkit import short_socket_path
    from tests.test_hooks import run_hook_async
    from tests.test_waiting_input import CALL, PERMISSION_REQUEST, RESULT, SESSION

    db = tmp_path / "x.db"
    config = Config()

    @asynccontextmanager
    async def monitor():
        store = Store(db)
        store.start()
        hub = Hub(config, store)
        await hub.start()
        server = SocketServer(hub, config, unix_path=short_socket_path(tmp_path))
        await server.start()
        try:
            yield hub, server
        finally:
            await server.stop()
            await hub.stop()
            store.close()

    async with monitor() as (hub, server):
        for payload in (CALL, PERMISSION_REQUEST):
            code, _reply, err = await run_hook_async("claude", payload, server.unix_path)
            assert code == 0 and "ignored" not in err
        await hub.join()
        before = hub.session(SESSION)
        assert before.waiting_why == "permission" and before.waiting_for == "Bash: rm -rf build/"
    async with monitor() as (hub, server):
        assert hub.seeded == 1 and hub.seeded_waits == 1
        info = hub.session(SESSION)
        assert (info.waiting_since, info.waiting_why, info.waiting_for) == (
            before.waiting_since,
            "permission",
            "Bash: rm -rf build/",
        )
        await run_hook_async("claude", RESULT, server.unix_path)
        await hub.join()
        assert not hub.session(SESSION).waiting_since
    async with monitor() as (hub, _server):
        assert hub.seeded_waits == 0  # answered: nothing to take up


def test_only_the_latest_events_of_sessions_not_ended_are_read_for_a_wait(tmp_path: Path):
    """The restart's rule over what the store holds: a wait followed by its answer is
    over, an ended session waits for nobody, a wait read late (an older copy after it)
    stands; at most ``limit`` sessions are read."""
    from monitor.hub.restored_waits import read_waits
    from monitor.store import Store

    def wait(session: str, ts: float, status: str = "permission") -> Event:
        return Event(Kind.WAITING, session, ts, status=status, content="Bash: make deploy")

    events = [
        wait("open", 100.0),
        Event(Kind.MESSAGE, "open", 50.0, role="assistant", content="an older record read late"),
        wait("answered", 100.0),
        Event(Kind.TOOL_RESULT, "answered", 160.0, call_id="c1", content="ok"),
        wait("gone", 100.0),
        Event(Kind.SESSION_END, "gone", 200.0),
    ]
    for n, event in enumerate(events):
        event.seq = n + 1
    store = Store(tmp_path / "x.db")
    store.start()
    try:
        store.add_events(events)
        store.flush()
        rows = store.list_sessions()
        waits = read_waits(store, rows)
        assert set(waits) == {"open"} and waits["open"].since == 100.0
        assert waits["open"].asks == "Bash: make deploy"
        assert read_waits(store, rows, limit=0) == {}
    finally:
        store.close()


def test_odd_decision_and_span_values_are_no_wait_and_no_error():
    """A ``source`` that is no string, a span never ended with a duration that is no number
    (or not finite): nothing is made up, nothing raises."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from monitor.formats.otlp_waits import blocked_records, decision_records

    base = {"session": CLAUDE, "ts": 5.0}
    assert decision_records({"source": 7, "decision": "accept"}, base) == []
    assert decision_records({"decision": "reject"}, base) == []
    span = Span(name="claude_code.tool.blocked_on_user", start_time_unix_nano=10_000_000_000)
    for duration in ("abc", "nan", "inf", -5, None):
        records = blocked_records(span, {"source": "user_reject", "duration_ms": duration}, CLAUDE)
        assert [(r["status"], r["ts"]) for r in records] == [("permission", 10.0), ("resolved", 10.0)]
    ended = blocked_records(span, {"source": "user_temporary", "duration_ms": 1500}, CLAUDE)
    assert [r["ts"] for r in ended] == [10.0, 11.5]
    assert blocked_records(span, {"source": "config"}, CLAUDE) == []
