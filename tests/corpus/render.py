"""Print an agent run for a person to read: every unit numbered, long texts clipped, no detection.

    python tests/corpus/render.py FILE [--width N]

The labelling guide (docs/real-runs.md) asks readers to label runs blind: they see the run and nothing that
loopwatch's detectors say about it.  This script reads the raw file itself (stdlib only; `.gz`, and `.zst`
when the `zstandard` package is installed) instead of loopwatch's readers, so a reader sees what the agent
wrote, numbered in the unit a label uses (the table in the guide): JSONL lines, trajectory steps, message
indices, history indices, Markdown lines.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CLIP = 700  # characters of one text shown before it is clipped (head and tail kept)
#: Keys that only identify or time a record: left out so the work stands out.
NOISE = frozenset(
    {
        "id",
        "uuid",
        "parentId",
        "parentUuid",
        "timestamp",
        "time",
        "ts",
        "processed_at",
        "signature",
        "thinkingSignature",
        "usage",
        "sessionId",
        "session_id",
        "requestId",
        "llm_metrics",
        "tool_call_metadata",
    }
)


def quiet(value: Any) -> Any:
    """``value`` without its identifying and timing keys, at any depth."""
    if isinstance(value, dict):
        return {k: quiet(v) for k, v in value.items() if k not in NOISE}
    if isinstance(value, list):
        return [quiet(v) for v in value]
    return value


def read_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        return gzip.decompress(raw)
    if path.suffix == ".zst":
        import zstandard  # type: ignore[import-not-found]

        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return raw


def clip(text: Any, limit: int | None = None) -> str:
    """``text`` on one logical block, its middle cut when long (the size of the cut said)."""
    limit = limit or CLIP
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    text = text.replace("\r", "")
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 4 :]
    return f"{head} …[{len(text) - len(head) - len(tail)} chars cut]… {tail}"


def block_text(content: Any) -> str:
    """Text of a message content: a string or a list of typed blocks (OpenAI / Anthropic / Gemini)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            parts.append(_block(block))
    return "\n".join(p for p in parts if p)


def _block(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind in ("image", "input_image"):
        return "(image)"
    if kind in ("text", "input_text", "output_text", "summary_text") or (kind is None and "text" in block):
        return str(block.get("text", ""))
    if kind == "toolCall":
        return f"TOOL_CALL {block.get('name')}: {clip(block.get('arguments'))}"
    if kind == "thinking":
        return "(thinking) " + str(block.get("thinking", ""))
    if kind == "tool_use":
        return (
            f"TOOL_USE {block.get('name')} id={block.get('id')} input={clip(args_text(block.get('input')))}"
        )
    if kind == "tool_result":
        err = " ERROR" if block.get("is_error") else ""
        return f"TOOL_RESULT{err} id={block.get('tool_use_id')}: {clip(block_text(block.get('content')))}"
    if "functionCall" in block or "functionResponse" in block:
        return clip(block)
    return clip(block)


def args_text(value: Any) -> str:
    """Tool arguments as ``key: value`` lines, string values as written (a JSON string is decoded first)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if not isinstance(decoded, dict):
            return value
        value = decoded
    if not isinstance(value, dict):
        return "" if value is None else json.dumps(value, ensure_ascii=False)
    parts = []
    for key, item in value.items():
        if key == "command" and isinstance(item, list) and all(isinstance(a, str) for a in item):
            # Codex shell calls: ["bash", "-lc", SCRIPT] shows SCRIPT; else the words joined.
            item = item[-1] if len(item) == 3 and item[1] in ("-lc", "-c") else " ".join(item)
        parts.append(
            f"{key}: {item}" if isinstance(item, str) else f"{key}: {json.dumps(item, ensure_ascii=False)}"
        )
    return "\n".join(parts)


def output_text(value: Any) -> str:
    """A Codex tool output: ``{"output", "metadata": {"exit_code"}}`` JSON text shown as exit code and text."""
    if isinstance(value, dict) and "content" in value:
        value = block_text(value["content"])
    if isinstance(value, list):
        return block_text(value)
    if not isinstance(value, str):
        return "" if value is None else json.dumps(value, ensure_ascii=False)
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
        meta = decoded.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return (f"(exit code {code}) " if code is not None else "") + decoded["output"]
    return value


def emit(unit: str, text: str) -> None:
    lines = text.splitlines() or [""]
    print(f"[{unit}] {lines[0]}")
    for line in lines[1:]:
        print(f"      {line}")


# ---------------------------------------------------------------- JSONL formats (unit: the line)


def jsonl_record(record: Any) -> str:
    if not isinstance(record, dict):
        return clip(record)
    if "payload" in record and isinstance(record.get("payload"), dict):  # Codex rollout
        return _codex(record["type"] if isinstance(record.get("type"), str) else "?", record["payload"])
    kind = record.get("type")
    if (
        kind is None and "instructions" in record and "id" in record
    ):  # Codex rollout before the envelope format
        return f"(session header) instructions: {clip(record.get('instructions'), 300)}"
    if kind is None and record.get("record_type") == "state":
        return "(state)"
    if _codex_bare_item(record):
        return _codex("response_item", record)
    if kind in _GEMINI_TYPES and "message" not in record and ("content" in record or "toolCalls" in record):
        return gemini_message(record)  # Gemini CLI chat JSONL: a message record
    if kind is None and "$set" in record:  # Gemini CLI chat JSONL: an update of the session's fields
        return f"(update) {clip(quiet(record['$set']), 300)}"
    if kind is None and "projectHash" in record and "sessionId" in record:
        return "(session header)"
    message = record.get("message")
    if isinstance(message, dict) and "content" in message:  # Claude Code
        role = message.get("role", kind)
        return f"{role}: {clip(block_text(message.get('content')), CLIP * 2)}"
    if kind in ("tool_call", "tool_result", "message", "usage", "session_start", "session_end"):  # native
        rest = quiet({k: v for k, v in record.items() if k not in ("type", "session")})
        return f"{kind}: {clip(rest)}"
    if kind in ("progress", "file-history-snapshot", "queue-operation"):
        return f"({kind})"
    if isinstance(message, dict):  # OpenClaw / pi: {"type": "message", "message": {role, content, …}}
        role = message.get("role", kind)
        rest = quiet({k: v for k, v in message.items() if k not in ("role", "content", "api", "provider")})
        text = block_text(message.get("content"))
        return f"{role}: {clip(text, CLIP * 2)}" + (f"\n{clip(rest, 300)}" if rest else "")
    rest = quiet({k: v for k, v in record.items() if k != "type"})
    return f"{kind or record.get('kind') or record.get('role')}: {clip(rest, CLIP * 2)}"


#: Response items a Codex rollout from before the envelope format holds bare, one a line.
_CODEX_BARE = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "web_search_call",
    }
)


def _codex_bare_item(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    if kind in _CODEX_BARE and ("call_id" in record or "action" in record):
        return True
    if kind == "reasoning" and "summary" in record:
        return True
    content = record.get("content")
    return (
        kind == "message"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") in ("input_text", "output_text") for b in content)
    )


def _codex(kind: str, payload: dict[str, Any]) -> str:
    ptype = payload.get("type")
    if ptype == "message":
        return f"{payload.get('role')}: {clip(block_text(payload.get('content')), CLIP * 2)}"
    if ptype in ("function_call", "custom_tool_call"):
        args = payload.get("arguments", payload.get("input"))
        return f"CALL {payload.get('name')} id={payload.get('call_id')}: {clip(args_text(args))}"
    if ptype == "local_shell_call":
        return f"CALL shell id={payload.get('call_id')}: {clip(args_text(payload.get('action')))}"
    if isinstance(ptype, str) and ptype.endswith("_output") and "call_id" in payload:
        return f"OUTPUT id={payload.get('call_id')}: {clip(output_text(payload.get('output')))}"
    if ptype in ("token_count", None) or kind == "turn_context":
        return f"({kind}{'/' + ptype if ptype else ''})"
    if ptype == "reasoning":
        summary = payload.get("summary")
        return f"(reasoning) {clip(block_text(summary) if isinstance(summary, list) else summary, 300)}"
    if kind == "event_msg" and ptype == "user_message":
        return f"user (typed): {clip(payload.get('message'), CLIP * 2)}"
    if kind == "event_msg" and ptype in ("agent_message", "agent_reasoning"):
        text = payload.get("message", payload.get("text"))
        return f"({ptype}) {clip(text, 300)}"
    return f"{kind}/{ptype}: {clip(payload, 240)}"


def render_jsonl(lines: list[bytes]) -> None:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            nul = line.count(0)
            shown = clip(line.replace(b"\0", b"").decode("utf-8", "replace"), 200)
            emit(f"L{number}", f"(not JSON{f', {nul} NUL bytes left out' if nul else ''}) {shown}")
            continue
        if isinstance(record, dict) and isinstance(record.get("history"), list) and len(lines) == 1:
            render_history(record)  # an OpenHands evaluation output line: one whole run
            return
        emit(f"L{number}", jsonl_record(record))


# ---------------------------------------------------------------- Gemini CLI chats (JSON document or JSONL)

_GEMINI_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})


def gemini_message(message: dict[str, Any]) -> str:
    """A Gemini CLI chat message: its text, its thoughts' subjects, each tool call and its result as text."""
    lines = [f"{message.get('type')}: {clip(block_text(message.get('content')), CLIP * 2)}"]
    thoughts = message.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        subjects = "; ".join(
            str(t.get("subject") or t.get("description") or "") for t in thoughts if isinstance(t, dict)
        )
        lines.append(f"(thoughts) {clip(subjects, 300)}")
    for call in message.get("toolCalls") or ():
        if not isinstance(call, dict):
            lines.append(f"TOOL_CALL {clip(call, 500)}")
            continue
        lines.append(f"TOOL_CALL {call.get('name')}: {clip(args_text(call.get('args')))}")
        lines.append(f"RESULT {call.get('status')}: {clip(_gemini_result(call))}")
    return "\n".join(lines)


def _gemini_result(call: dict[str, Any]) -> str:
    """A tool call's output: the ``functionResponse.response`` output or error, else its ``resultDisplay``."""
    result = call.get("result")
    texts = []
    for part in result if isinstance(result, list) else [result]:
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse", {}).get("response")
        if isinstance(response, dict):
            for key in ("output", "error"):
                if response.get(key):
                    item = response[key]
                    texts.append(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    display = call.get("resultDisplay")
    if not texts and display:
        texts.append(display if isinstance(display, str) else json.dumps(display, ensure_ascii=False))
    return "\n".join(texts)


# ---------------------------------------------------------------- JSON documents


def render_document(doc: Any) -> None:
    if isinstance(doc, dict):
        for key in ("instance_id", "task", "problem_statement"):
            if key in doc:
                emit(key, clip(doc[key], 1500))
        steps = doc.get("trajectory")
        if isinstance(steps, list) and steps and isinstance(steps[0], dict):
            if "action" in steps[0] or "observation" in steps[0]:
                return render_swe_agent(steps, doc.get("info"))
            return render_steps(steps, "step")
        if isinstance(doc.get("agent_steps"), list):
            render_steps(doc["agent_steps"], "step")
            return emit("final", clip({k: doc.get(k) for k in ("success", "final_result")}, 800))
        if isinstance(doc.get("messages"), list):
            render_messages(doc["messages"])
            return render_info(doc.get("info"))
        if isinstance(doc.get("history"), list):
            return render_history(doc)
        return emit("doc", clip(doc, 4000))
    if isinstance(doc, list):
        if doc and all(isinstance(m, dict) and "role" in m for m in doc[:5]):
            return render_messages(doc)
        return render_steps(doc, "event")
    emit("doc", clip(doc))


def render_swe_agent(steps: list[Any], info: Any) -> None:
    for index, step in enumerate(steps, 1):
        if not isinstance(step, dict):
            emit(f"step {index}", clip(step))
            continue
        text = f"THOUGHT: {clip(step.get('thought', ''), 500)}\nACTION: {clip(step.get('action', ''), 500)}"
        text += f"\nOBSERVATION: {clip(step.get('observation', ''))}"
        emit(f"step {index}", text)
    render_info(info)


def render_messages(messages: list[Any]) -> None:
    for index, message in enumerate(messages, 1):
        if not isinstance(message, dict):
            emit(f"msg {index}", clip(message))
            continue
        if message.get("type") in _GEMINI_TYPES and "role" not in message:  # a Gemini CLI chat document
            emit(f"msg {index}", gemini_message(message))
            continue
        role = message.get("role") or message.get("type") or "?"
        text = block_text(message.get("content", message.get("parts")))
        for call in message.get("tool_calls") or message.get("toolCalls") or ():
            text += f"\nTOOL_CALL {clip(call, 500)}"
        emit(f"msg {index}", f"{role}: {clip(text, CLIP * 2)}")


def render_history(doc: dict[str, Any]) -> None:
    emit("instance", str(doc.get("instance_id", "")))
    render_steps(doc["history"], "hist")
    for key in ("error", "report", "test_result"):
        if doc.get(key):
            emit(key, clip(doc[key], 600))


def render_steps(steps: list[Any], name: str) -> None:
    for index, step in enumerate(steps, 1):
        emit(f"{name} {index}", step_text(step))


def step_text(step: Any) -> str:
    if not isinstance(step, dict):
        return clip(step)
    if step.get("type") == "llm_call" and isinstance(step.get("output"), dict):  # a span export (Vorflux)
        output = step["output"]
        calls = "".join(
            f"\nTOOL_CALL {clip(quiet(c.get('function', c)), 500)}" for c in output.get("tool_calls") or ()
        )
        return f"assistant: {clip(output.get('content') or '', CLIP * 2)}{calls}"
    if step.get("type") == "tool_call" and "tool" in step:
        result = quiet(step.get("result"))
        return f"TOOL {step['tool']}: {clip(quiet(step.get('arguments')), 500)}\nRESULT: {clip(result, CLIP * 2)}"
    if "llm_response" in step or "tool_results" in step:  # Trae Agent
        return trae_step(step)
    parts = []
    for key in ("source", "kind", "action", "observation", "role", "state"):
        if isinstance(step.get(key), str):
            parts.append(f"{key}={step[key]}")
    head = " ".join(parts)
    skip = {
        "source",
        "kind",
        "role",
        "state",
        "id",
        "timestamp",
        "cause",
        "llm_metrics",
        "tool_call_metadata",
    }
    body = {
        k: v for k, v in step.items() if k not in skip and not (isinstance(v, str) and f"{k}={v}" in head)
    }
    return f"{head}\n{clip(body, CLIP * 2)}"


def trae_step(step: dict[str, Any]) -> str:
    parts = [f"state={step.get('state')}"]
    for message in step.get("llm_messages") or ():
        if isinstance(message, dict) and message.get("content"):
            parts.append(f"{message.get('role')}: {clip(message['content'], CLIP)}")
    response = step.get("llm_response") or {}
    if isinstance(response, dict):
        parts.append(f"assistant: {clip(response.get('content') or '', CLIP * 2)}")
        for call in response.get("tool_calls") or ():
            parts.append(f"TOOL_CALL {clip(quiet(call), 500)}")
    for result in step.get("tool_results") or ():
        parts.append(f"TOOL_RESULT {clip(quiet(result), CLIP)}")
    for key in ("reflection", "error"):
        if step.get(key):
            parts.append(f"{key}: {clip(step[key], 500)}")
    return "\n".join(parts)


def render_info(info: Any) -> None:
    if isinstance(info, dict):
        keep = {k: info[k] for k in ("exit_status", "submission", "model_stats") if k in info}
        if keep:
            emit("info", clip(keep, 600))


# ---------------------------------------------------------------- Markdown (Aider)


def render_markdown(text: str) -> None:
    """Every line with its number; long runs of quoted output keep their head and tail."""
    lines = text.split("\n")  # numbered as an editor (and loopwatch) numbers them
    if lines and lines[-1] == "":
        lines.pop()
    number = 0
    while number < len(lines):
        block = list(_quoted_block(lines, number))
        if len(block) > 14:
            for n in block[:8]:
                emit(f"L{n + 1}", lines[n])
            print(f"      …[{len(block) - 12} quoted lines cut]…")
            for n in block[-4:]:
                emit(f"L{n + 1}", lines[n])
            number = block[-1] + 1
            continue
        emit(f"L{number + 1}", clip(lines[number], 400))
        number += 1


def _quoted_block(lines: list[str], start: int) -> Iterator[int]:
    number = start
    while number < len(lines) and lines[number].startswith(">"):
        yield number
        number += 1


def render(path: Path) -> None:
    raw = read_bytes(path)
    name = path.name.removesuffix(".gz").removesuffix(".zst")
    print(f"# {path}")
    if name.endswith(".md"):
        return render_markdown(raw.decode("utf-8", "replace"))
    try:
        doc = json.loads(raw)
    except ValueError:
        return render_jsonl(raw.splitlines())
    if name.endswith(".jsonl"):
        return render_jsonl(raw.splitlines())
    render_document(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--clip", type=int, default=CLIP, help="characters of a text shown before clipping")
    args = parser.parse_args(argv)
    globals()["CLIP"] = args.clip
    for path in args.files:
        render(path)
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    raise SystemExit(main())
