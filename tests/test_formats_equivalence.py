"""The same session gives the same detections whether written natively, by Claude Code or by Codex.

Each native scenario (a few written here plus every one in ``tests/scenarios``)
is rendered as Claude Code transcripts and as Codex rollouts (one file per
session, as those agents write them).  All three are decoded by the real
adapters and run through one engine each, in event-time order across files
(as ``watch`` sees several files grow); the detections — (detector, level,
count) — must be identical.

Every real transcript kept in ``tests/fixtures`` is decoded too, and its
counts (events, tool calls, tool results) are pinned per file, so a change to
an adapter that loses or invents events shows here.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.detect.engine import Engine
from monitor.events import Event, Level
from monitor.formats.lines import session_from_path
from tests.formatkit import decode_file, write_jsonl

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BASE_TS = 1_750_000_000.0


# -- scenarios ----------------------------------------------------------------


def _loop_same_call() -> list[dict]:
    out: list[dict] = [
        {"type": "session_start", "agent": "demo"},
        {"type": "message", "role": "user", "content": "tidy the repo"},
    ]
    for i in range(5):
        out += [
            {"type": "tool_call", "id": f"c{i}", "name": "bash", "args": {"command": "ls build/"}},
            {"type": "tool_result", "id": f"c{i}", "content": "", "is_error": False},
        ]
    return out


def _loop_same_error_with_chatter() -> list[dict]:
    out: list[dict] = [{"type": "session_start", "agent": "demo"}]
    for i in range(4):
        out += [
            {"type": "message", "role": "assistant", "content": f"Attempt {i}: running the tests."},
            {"type": "tool_call", "id": f"t{i}", "name": "pytest", "args": {"path": "tests/"}},
            {
                "type": "tool_result",
                "id": f"t{i}",
                "is_error": True,
                "content": "ModuleNotFoundError: No module named 'foo'",
            },
            {"type": "usage", "input_tokens": 1000 + i, "output_tokens": 40},
        ]
    return out


def _user_turn_breaks_the_streak() -> list[dict]:
    call = {"type": "tool_call", "name": "read", "args": {"path": "a.py"}}
    out: list[dict] = [{"type": "session_start", "agent": "demo"}]
    for i in range(2):
        out += [dict(call, id=f"a{i}"), {"type": "tool_result", "id": f"a{i}", "content": "x = 1"}]
    out += [{"type": "message", "role": "user", "content": "look again"}, {"type": "compaction"}]
    for i in range(2):
        out += [dict(call, id=f"b{i}"), {"type": "tool_result", "id": f"b{i}", "content": "x = 1"}]
    return out


def _cycle() -> list[dict]:
    out: list[dict] = [{"type": "session_start", "agent": "demo"}]
    for i in range(4):
        out += [
            {"type": "tool_call", "id": f"r{i}", "name": "read", "args": {"path": "a.py"}},
            {"type": "tool_result", "id": f"r{i}", "content": "def f(): pass"},
            {"type": "tool_call", "id": f"e{i}", "name": "edit", "args": {"path": "a.py", "text": "pass"}},
            {"type": "tool_result", "id": f"e{i}", "content": "ok"},
            {"type": "tool_call", "id": f"p{i}", "name": "pytest", "args": {}},
            {"type": "tool_result", "id": f"p{i}", "content": "1 failed", "is_error": True},
        ]
    return out


INLINE = {
    "same_call": _loop_same_call,
    "same_error_with_chatter": _loop_same_error_with_chatter,
    "user_turn_breaks_the_streak": _user_turn_breaks_the_streak,
    "cycle": _cycle,
}


def _corpus() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.glob("*.jsonl"))


def _load_scenario(name: str) -> list[dict]:
    if name in INLINE:
        records = INLINE[name]()
    else:
        records = [
            json.loads(line)
            for line in (SCENARIOS / f"{name}.jsonl").read_text().splitlines()
            if line.strip()
        ]
    # Every record gets an explicit time and session, so that all renderings agree.
    out = []
    for index, record in enumerate(records):
        record = dict(record)
        record.setdefault("session", name)
        if record.get("ts") is None:
            record["ts"] = BASE_TS + 3 * index
        elif isinstance(record["ts"], str):
            record["ts"] = datetime.fromisoformat(record["ts"]).timestamp()
        out.append(record)
    return out


# -- renderers ----------------------------------------------------------------


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def render_claude(records: list[dict]) -> list[dict]:
    """One session's native records as a Claude Code transcript."""
    out = []
    for n, r in enumerate(records):
        base = {
            "sessionId": r["session"],
            "uuid": f"u{n}",
            "timestamp": _iso(r["ts"]),
            "version": "2.1.39",
            "cwd": "/work",
            "isSidechain": False,
            "userType": "external",
        }
        kind = r["type"]
        if kind == "message" and r["role"] == "user":
            out.append(dict(base, type="user", message={"role": "user", "content": r.get("content", "")}))
        elif kind == "message" and r["role"] == "assistant":
            out.append(
                dict(
                    base,
                    type="assistant",
                    message={
                        "id": f"msg{n}",
                        "role": "assistant",
                        "content": [{"type": "text", "text": r.get("content", "")}],
                    },
                )
            )
        elif kind == "message":  # system text reaches Claude as a meta record
            out.append(
                dict(
                    base, type="user", isMeta=True, message={"role": "user", "content": r.get("content", "")}
                )
            )
        elif kind == "tool_call":
            out.append(
                dict(
                    base,
                    type="assistant",
                    message={
                        "id": f"msg{n}",
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": r.get("id"),
                                "name": r["name"],
                                "input": r.get("args") or {},
                            }
                        ],
                    },
                )
            )
        elif kind == "tool_result":
            out.append(
                dict(
                    base,
                    type="user",
                    message={
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": r.get("id"),
                                "content": r.get("content", ""),
                                "is_error": bool(r.get("is_error")),
                            }
                        ],
                    },
                )
            )
        elif kind == "usage":
            out.append(
                dict(
                    base,
                    type="assistant",
                    message={
                        "id": f"msg{n}",
                        "role": "assistant",
                        "content": [],
                        "usage": {
                            "input_tokens": r.get("input_tokens") or 0,
                            "output_tokens": r.get("output_tokens") or 0,
                        },
                    },
                )
            )
        elif kind == "compaction":
            out.append(
                dict(
                    base,
                    type="system",
                    subtype="compact_boundary",
                    content="Conversation compacted",
                    compactMetadata={"trigger": "auto"},
                )
            )
        elif kind == "session_start":
            out.append(
                dict(base, type="progress", data={"type": "hook_progress", "hookEvent": "SessionStart"})
            )
        # session_end: Claude Code writes nothing when a session ends
    return out


def render_codex(records: list[dict]) -> list[dict]:
    """One session's native records as a Codex rollout."""
    out = []
    totals = {"input": 0, "output": 0}
    started = False
    for r in records:
        ts = _iso(r["ts"])

        def item(kind: str, payload: dict) -> dict:
            return {"timestamp": ts, "type": kind, "payload": payload}

        if not started:
            out.append(item("session_meta", {"id": r["session"], "cli_version": "0.104.0", "cwd": "/work"}))
            started = True
        kind = r["type"]
        text = r.get("content", "")
        if kind == "message" and r["role"] == "user":
            out.append(
                item(
                    "response_item",
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
                )
            )
            out.append(item("event_msg", {"type": "user_message", "message": text, "images": []}))
        elif kind == "message" and r["role"] == "assistant":
            out.append(item("event_msg", {"type": "agent_message", "message": text}))
            out.append(
                item(
                    "response_item",
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    },
                )
            )
        elif kind == "message":
            out.append(
                item(
                    "response_item",
                    {
                        "type": "message",
                        "role": "developer",
                        "content": [{"type": "input_text", "text": text}],
                    },
                )
            )
        elif kind == "tool_call":
            out.append(
                item(
                    "response_item",
                    {
                        "type": "function_call",
                        "name": r["name"],
                        "call_id": r.get("id"),
                        "arguments": json.dumps(r.get("args") or {}),
                    },
                )
            )
        elif kind == "tool_result":
            output = {"output": text, "metadata": {"exit_code": 1 if r.get("is_error") else 0}}
            out.append(
                item(
                    "response_item",
                    {"type": "function_call_output", "call_id": r.get("id"), "output": json.dumps(output)},
                )
            )
        elif kind == "usage":
            last = {"input_tokens": r.get("input_tokens") or 0, "output_tokens": r.get("output_tokens") or 0}
            totals["input"] += last["input_tokens"]
            totals["output"] += last["output_tokens"]
            total = {
                "input_tokens": totals["input"],
                "output_tokens": totals["output"],
                "total_tokens": totals["input"] + totals["output"],
            }
            for _ in range(2):  # Codex writes every token count twice
                out.append(
                    item(
                        "event_msg",
                        {
                            "type": "token_count",
                            "info": {"total_token_usage": total, "last_token_usage": dict(last)},
                        },
                    )
                )
        elif kind == "compaction":
            out.append(item("compacted", {"message": "summary"}))
    return out


# -- running ------------------------------------------------------------------


def _by_session(records: list[dict]) -> dict[str, list[dict]]:
    sessions: dict[str, list[dict]] = {}
    for record in records:
        sessions.setdefault(record["session"], []).append(record)
    return sessions


def _detections(paths: list[Path]) -> Counter:
    """Decode every file, merge by event time (ties in file order), run one engine."""
    streams = []
    for order, path in enumerate(paths):
        events, decoder = decode_file(path)
        assert decoder.problem_count == 0, [str(p) for p in decoder.problems]
        streams.append([(e.ts, order, i, e) for i, e in enumerate(events)])
    engine = Engine()
    found: Counter = Counter()
    for _, _, _, event in heapq.merge(*streams, key=lambda t: t[:3]):
        for detection in engine.process(event).detections:
            found[(detection.detector, detection.level.label, detection.count)] += 1
    return found


def _render_all(records: list[dict], tmp_path: Path) -> dict[str, list[Path]]:
    native = write_jsonl(tmp_path / "native.jsonl", records)
    claude_dir = tmp_path / "claude"
    codex_dir = tmp_path / "codex"
    claude_dir.mkdir()
    codex_dir.mkdir()
    claude, codex = [], []
    # A call the harness made by itself ("harness": true) has no place in a Claude Code or Codex
    # transcript; the native log shows it, and no detector counts it (analysis/origin.py).
    agents = [r for r in records if not r.get("harness")]
    for n, (session, items) in enumerate(_by_session(agents).items()):
        claude.append(write_jsonl(claude_dir / f"{n:02d}.jsonl", render_claude(items)))
        codex.append(write_jsonl(codex_dir / f"{n:02d}.jsonl", render_codex(items)))
    return {"native": [native], "claude": claude, "codex": codex}


@pytest.mark.parametrize("name", [*INLINE, *_corpus()])
def test_same_detections_in_every_format(tmp_path: Path, name: str):
    """Native, Claude-format and Codex-format renderings of a scenario yield the same detections."""
    records = _load_scenario(name)
    paths = _render_all(records, tmp_path)
    native = _detections(paths["native"])
    assert _detections(paths["claude"]) == native
    assert _detections(paths["codex"]) == native


def test_the_inline_loops_are_caught():
    """The equivalence is not vacuous: the inline loop scenarios do reach warn natively."""
    for name in ("same_call", "same_error_with_chatter", "cycle"):
        records = _load_scenario(name)
        engine = Engine()
        levels = [d.level for r in records for d in engine.process(_native_event(r)).detections]
        assert max(levels, default=Level.NONE) >= Level.WARN, name


def _native_event(record: dict) -> Event:
    from monitor.formats.native import NativeDecoder

    decoder = NativeDecoder("inline.jsonl", session_from_path("inline.jsonl"))
    return decoder.decode(record, 1, BASE_TS)[0]


# -- the real transcripts -------------------------------------------------------

#: Per file under tests/fixtures: (events, tool calls, tool results).  A
#: mini-swe-agent run has one call more than results: its last action submits
#: and ends the run; the short Codex rollout ends on a call still running.
REAL_COUNTS: dict[str, tuple[int, int, int]] = {
    "claude-code/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl": (12, 2, 2),
    "claude-code/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl": (4, 0, 0),
    "claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl": (695, 186, 186),
    "claude-code/short.jsonl": (8, 2, 2),
    "claude-code/subagent.jsonl": (56, 16, 16),
    "claude-code/tool_heavy.jsonl": (22, 6, 6),
    "claude-code-more/coverage-test-fix.jsonl": (50, 13, 13),
    "claude-code-more/python-to-rust-port.jsonl": (135, 39, 39),
    "codex/rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl": (338, 104, 104),
    "codex/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl": (283, 118, 118),
    "codex/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl": (5, 1, 0),
    "codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl": (24, 5, 5),
    "mini-swe-agent-gemini3/astropy__astropy-13398.traj.json": (146, 34, 33),
    "mini-swe-agent-gemini3/astropy__astropy-8707.traj.json": (230, 55, 54),
    "mini-swe-agent-gemini3/django__django-10914.traj.json": (194, 46, 45),
    "mini-swe-agent-gemini3/django__django-11095.traj.json": (144, 35, 34),
    "mini-swe-agent-gemini3/django__django-11138.traj.json": (449, 100, 99),
    "mini-swe-agent-gemini3/django__django-11163.traj.json": (56, 13, 12),
    "mini-swe-agent-gemini3/django__django-11206.traj.json": (99, 23, 22),
    "mini-swe-agent-gemini3/django__django-11333.traj.json": (136, 33, 32),
    "mini-swe-agent-gemini3/django__django-11433.traj.json": (161, 37, 36),
    "mini-swe-agent-gemini3/django__django-11477.traj.json": (136, 33, 32),
    "mini-swe-agent-gemini3/django__django-12304.traj.json": (175, 42, 41),
    "mini-swe-agent-gemini3/django__django-13297.traj.json": (377, 88, 87),
    "mini-swe-agent-gemini3/django__django-13406.traj.json": (155, 37, 36),
    "mini-swe-agent-gemini3/django__django-13786.traj.json": (121, 27, 26),
    "mini-swe-agent-gemini3/django__django-14034.traj.json": (169, 39, 38),
    "mini-swe-agent-gemini3/django__django-14349.traj.json": (341, 61, 60),
    "mini-swe-agent-gemini3/django__django-14792.traj.json": (152, 37, 36),
    "mini-swe-agent-gemini3/django__django-15467.traj.json": (99, 23, 22),
    "mini-swe-agent-gemini3/django__django-15563.traj.json": (350, 85, 84),
    "mini-swe-agent-gemini3/django__django-15863.traj.json": (82, 18, 17),
    "mini-swe-agent-gemini3/django__django-16100.traj.json": (207, 50, 49),
    "mini-swe-agent-gemini3/django__django-16255.traj.json": (72, 17, 16),
    "mini-swe-agent-gemini3/django__django-16493.traj.json": (99, 23, 22),
    "mini-swe-agent-gemini3/matplotlib__matplotlib-22719.traj.json": (226, 54, 53),
    "mini-swe-agent-gemini3/matplotlib__matplotlib-23412.traj.json": (204, 50, 49),
    "mini-swe-agent-gemini3/matplotlib__matplotlib-25775.traj.json": (383, 94, 93),
    "mini-swe-agent-gemini3/matplotlib__matplotlib-25960.traj.json": (219, 53, 52),
    "mini-swe-agent-gemini3/pydata__xarray-4094.traj.json": (116, 28, 27),
    "mini-swe-agent-gemini3/pydata__xarray-4695.traj.json": (282, 68, 67),
    "mini-swe-agent-gemini3/pylint-dev__pylint-6528.traj.json": (390, 95, 94),
    "mini-swe-agent-gemini3/pytest-dev__pytest-6202.traj.json": (183, 44, 43),
    "mini-swe-agent-gemini3/pytest-dev__pytest-7432.traj.json": (143, 34, 33),
    "mini-swe-agent-gemini3/sphinx-doc__sphinx-8548.traj.json": (335, 82, 81),
    "mini-swe-agent-gemini3/sphinx-doc__sphinx-8595.traj.json": (280, 69, 68),
    "mini-swe-agent-gemini3/sphinx-doc__sphinx-9258.traj.json": (426, 98, 97),
    "mini-swe-agent-gemini3/sphinx-doc__sphinx-9320.traj.json": (173, 40, 39),
    "mini-swe-agent-gemini3/sympy__sympy-13551.traj.json": (115, 27, 26),
    "mini-swe-agent-gemini3/sympy__sympy-15976.traj.json": (184, 42, 41),
    "mini-swe-agent-gemini3/sympy__sympy-16597.traj.json": (264, 65, 64),
    "mini-swe-agent-gemini3/sympy__sympy-21596.traj.json": (201, 47, 46),
    "swe-agent/pydicom__pydicom-1458.traj": (40, 12, 12),
    "openhands-v1/cd94562403b9487ebdd4018e3f531dfd": (8, 2, 2),
    "openhands-eval/output.jsonl": (40, 18, 18),
    "cline/1769053680585/api_conversation_history.json": (149, 47, 46),
    "aider/mozgoslav/.aider.chat.history.md": (
        66,
        2,
        2,
    ),  # 7 "Add file to the chat?" answered yes; aider's own error
    "gemini-cli/gemini-cli-pomodoro-timer.json": (55, 11, 11),
    "opencode/opencode.db": (86, 21, 21),
    "goose/sessions.db": (
        0,
        0,
        0,
    ),  # a real Goose database with no messages (tests/sqlitekit.py fills copies)
    "copilot-cli/session-state/049410b4-c1df-44ee-87a5-caa1c349091e/events.jsonl": (9, 2, 2),
    "copilot-cli/session-state/f27af309-ccf3-41da-8f07-b3dcbffd4c90/events.jsonl": (7, 1, 1),
}


def _decode_any(path: Path) -> tuple[list[Event], int]:
    from monitor.formats import documents

    if documents.claims(path):
        events, problems = documents.load(path)
        return events, len(problems)
    events, decoder = decode_file(path)
    return events, decoder.problem_count


def test_every_real_transcript_is_counted():
    """The pinned counts cover every real transcript kept (none forgotten, none stale)."""
    kept = {
        str(_transcript(p).relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert kept == set(REAL_COUNTS)


def _transcript(path: Path) -> Path:
    """The transcript a file is part of: itself, or the OpenHands V1
    conversation folder it is in (its events, base_state.json, the lock),
    or the Cline history a ``ui_messages.json`` completes."""
    if path.name == "ui_messages.json" and (path.parent / "api_conversation_history.json").is_file():
        return path.parent / "api_conversation_history.json"
    for folder in (path.parent, path.parent.parent):
        if (folder / "events").is_dir() and any((folder / "events").glob("event-*.json")):
            return folder
    return path


@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_real_transcript_counts(name: str):
    """Each real transcript decodes without a problem into its pinned number of
    events, tool calls and tool results, every result answering a call."""
    from monitor.events import Kind

    events, problems = _decode_any(FIXTURES / name)
    calls = [e for e in events if e.kind is Kind.TOOL_CALL]
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert problems == 0
    assert (len(events), len(calls), len(results)) == REAL_COUNTS[name]
    assert {r.call_id for r in results} <= {c.call_id for c in calls}
