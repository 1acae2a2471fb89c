"""The same session gives the same detections whether written natively, by Claude Code or by Codex.

Each native scenario (a few written here plus every one in ``tests/scenarios``)
is rendered as Claude Code transcripts and as Codex rollouts (one file per
session, as those agents write them).  All three are decoded by the real
adapters and run through one engine each, in event-time order across files
(as ``watch`` sees several files grow); the detections — (detector, level,
count) — must be identical.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from monitor.detect.engine import Engine
from monitor.events import Event, Level
from monitor.formats.lines import session_from_path
from tests.formatkit import decode_file, write_jsonl

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
BASE_TS = 1_750_000_000.0


# -- scenarios ----------------------------------------------------------------

def _loop_same_call() -> list[dict]:
    out: list[dict] = [{"type": "session_start", "agent": "demo"},
                       {"type": "message", "role": "user", "content": "tidy the repo"}]
    for i in range(5):
        out += [{"type": "tool_call", "id": f"c{i}", "name": "bash", "args": {"command": "ls build/"}},
                {"type": "tool_result", "id": f"c{i}", "content": "", "is_error": False}]
    return out


def _loop_same_error_with_chatter() -> list[dict]:
    out: list[dict] = [{"type": "session_start", "agent": "demo"}]
    for i in range(4):
        out += [{"type": "message", "role": "assistant", "content": f"Attempt {i}: running the tests."},
                {"type": "tool_call", "id": f"t{i}", "name": "pytest", "args": {"path": "tests/"}},
                {"type": "tool_result", "id": f"t{i}", "is_error": True,
                 "content": "ModuleNotFoundError: No module named 'foo'"},
                {"type": "usage", "input_tokens": 1000 + i, "output_tokens": 40}]
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
        out += [{"type": "tool_call", "id": f"r{i}", "name": "read", "args": {"path": "a.py"}},
                {"type": "tool_result", "id": f"r{i}", "content": "def f(): pass"},
                {"type": "tool_call", "id": f"e{i}", "name": "edit", "args": {"path": "a.py", "text": "pass"}},
                {"type": "tool_result", "id": f"e{i}", "content": "ok"},
                {"type": "tool_call", "id": f"p{i}", "name": "pytest", "args": {}},
                {"type": "tool_result", "id": f"p{i}", "content": "1 failed", "is_error": True}]
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
        records = [json.loads(line) for line in (SCENARIOS / f"{name}.jsonl").read_text().splitlines()
                   if line.strip()]
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
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def render_claude(records: list[dict]) -> list[dict]:
    """One session's native records as a Claude Code transcript."""
    out = []
    for n, r in enumerate(records):
        base = {"sessionId": r["session"], "uuid": f"u{n}", "timestamp": _iso(r["ts"]),
                "version": "2.1.39", "cwd": "/work", "isSidechain": False, "userType": "external"}
        kind = r["type"]
        if kind == "message" and r["role"] == "user":
            out.append(dict(base, type="user", message={"role": "user", "content": r.get("content", "")}))
        elif kind == "message" and r["role"] == "assistant":
            out.append(dict(base, type="assistant", message={
                "id": f"msg{n}", "role": "assistant", "content": [{"type": "text", "text": r.get("content", "")}]}))
        elif kind == "message":  # system text reaches Claude as a meta record
            out.append(dict(base, type="user", isMeta=True, message={"role": "user", "content": r.get("content", "")}))
        elif kind == "tool_call":
            out.append(dict(base, type="assistant", message={"id": f"msg{n}", "role": "assistant", "content": [
                {"type": "tool_use", "id": r.get("id"), "name": r["name"], "input": r.get("args") or {}}]}))
        elif kind == "tool_result":
            out.append(dict(base, type="user", message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": r.get("id"), "content": r.get("content", ""),
                 "is_error": bool(r.get("is_error"))}]}))
        elif kind == "usage":
            out.append(dict(base, type="assistant", message={
                "id": f"msg{n}", "role": "assistant", "content": [],
                "usage": {"input_tokens": r.get("input_tokens") or 0, "output_tokens": r.get("output_tokens") or 0}}))
        elif kind == "compaction":
            out.append(dict(base, type="system", subtype="compact_boundary", content="Conversation compacted",
                            compactMetadata={"trigger": "auto"}))
        elif kind == "session_start":
            out.append(dict(base, type="progress", data={"type": "hook_progress", "hookEvent": "SessionStart"}))
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
            out.append(item("response_item", {"type": "message", "role": "user",
                                              "content": [{"type": "input_text", "text": text}]}))
            out.append(item("event_msg", {"type": "user_message", "message": text, "images": []}))
        elif kind == "message" and r["role"] == "assistant":
            out.append(item("event_msg", {"type": "agent_message", "message": text}))
            out.append(item("response_item", {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": text}]}))
        elif kind == "message":
            out.append(item("response_item", {"type": "message", "role": "developer",
                                              "content": [{"type": "input_text", "text": text}]}))
        elif kind == "tool_call":
            out.append(item("response_item", {"type": "function_call", "name": r["name"], "call_id": r.get("id"),
                                              "arguments": json.dumps(r.get("args") or {})}))
        elif kind == "tool_result":
            output = {"output": text, "metadata": {"exit_code": 1 if r.get("is_error") else 0}}
            out.append(item("response_item", {"type": "function_call_output", "call_id": r.get("id"),
                                              "output": json.dumps(output)}))
        elif kind == "usage":
            last = {"input_tokens": r.get("input_tokens") or 0, "output_tokens": r.get("output_tokens") or 0}
            totals["input"] += last["input_tokens"]
            totals["output"] += last["output_tokens"]
            total = {"input_tokens": totals["input"], "output_tokens": totals["output"],
                     "total_tokens": totals["input"] + totals["output"]}
            for _ in range(2):  # Codex writes every token count twice
                out.append(item("event_msg", {"type": "token_count", "info": {
                    "total_token_usage": total, "last_token_usage": dict(last)}}))
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
        for detection in engine.process(event):
            found[(detection.detector, detection.level.label, detection.count)] += 1
    return found


def _render_all(records: list[dict], tmp_path: Path) -> dict[str, list[Path]]:
    native = write_jsonl(tmp_path / "native.jsonl", records)
    claude_dir = tmp_path / "claude"
    codex_dir = tmp_path / "codex"
    claude_dir.mkdir()
    codex_dir.mkdir()
    claude, codex = [], []
    for n, (session, items) in enumerate(_by_session(records).items()):
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
        levels = [d.level for r in records for d in engine.process(_native_event(r))]
        assert max(levels, default=Level.NONE) >= Level.WARN, name


def _native_event(record: dict) -> Event:
    from monitor.formats.native import NativeDecoder

    decoder = NativeDecoder("inline.jsonl", session_from_path("inline.jsonl"))
    return decoder.decode(record, 1, BASE_TS)[0]
