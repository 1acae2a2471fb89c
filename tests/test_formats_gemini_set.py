"""Gemini CLI JSON-lines chats: the ``$set`` and ``$rewindTo`` records.

The files are laid out as Gemini CLI's own code writes them (google-gemini/gemini-cli 5411f113,
packages/core/src/services/chatRecordingService.ts): the header of ``initialize``, each message of
``recordMessage`` / ``recordToolCalls`` followed by ``updateMetadata({lastUpdated})``, the checkpoint
``{"$set": {"messages", "lastUpdated"}}`` of ``updateMessagesFromHistory`` (the whole history, the
existing messages with their ``content`` replaced by the history's parts, new turns as ``newMessage``),
and ``{"$rewindTo": id}`` of ``rewindTo``.  The messages are the real chat of
tests/fixtures/gemini-cli; the metadata ``$set`` records are those of the CLI's own tests
(packages/core/src/services/sessionSummaryUtils.test.ts, memoryService.test.ts).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from monitor.events import Event, Kind
from monitor.formats import gemini
from tests.formatkit import counts, decode_file, write_jsonl

REAL = "gemini-cli/gemini-cli-pomodoro-timer.json"
#: getInitialChatHistory's first turn (packages/core/src/utils/environmentContext.ts).
ENV = {
    "id": "environment-context-id",
    "timestamp": "2025-10-21T20:04:20.900Z",
    "type": "user",
    "content": [{"text": "<session_context>\nThis is the Gemini CLI. ...\n</session_context>"}],
}


def _chat(real_fixtures: Path) -> dict[str, Any]:
    chat: dict[str, Any] = json.loads((real_fixtures / REAL).read_bytes())
    return chat


def _records(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """The header, then each message as the recorder appends it (an unfinished copy of a
    message with calls first), each followed by its ``$set`` of ``lastUpdated``."""
    records: list[dict[str, Any]] = [{k: v for k, v in chat.items() if k != "messages"}]
    for message in chat["messages"]:
        if message.get("toolCalls"):
            records.append(
                dict(
                    message,
                    toolCalls=[dict(c, result=None, status="executing") for c in message["toolCalls"]],
                )
            )
        records.append(message)
        records.append({"$set": {"lastUpdated": message["timestamp"]}})
    return records


def _as_history(message: dict[str, Any]) -> dict[str, Any]:
    """A message as ``updateMessagesFromHistory`` writes it again: ``{...existing, content:
    turn.content.parts}`` (a model turn's parts: its thoughts, text and function calls)."""
    again = copy.deepcopy(message)
    if message["type"] == "gemini":
        parts: list[dict[str, Any]] = [{"text": "**Planning** the next step", "thought": True}]
        if isinstance(message.get("content"), str) and message["content"]:
            parts.append({"text": message["content"]})
        parts += [
            {"functionCall": {"id": c["id"], "name": c["name"], "args": c["args"]}}
            for c in message.get("toolCalls", [])
        ]
        again["content"] = parts
    elif isinstance(message.get("content"), str):
        again["content"] = [{"text": message["content"]}]
    return again


def _key(event: Event) -> tuple[Any, ...]:
    return (event.kind, event.role, event.content, event.tool, event.call_id)


def test_a_metadata_set_is_skipped_and_counted(real_fixtures: Path, tmp_path: Path):
    chat = _chat(real_fixtures)
    plain = write_jsonl(tmp_path / "plain.jsonl", [r for r in _records(chat) if "$set" not in r])
    records = _records(chat)
    records.insert(1, {"$set": {"sessionId": chat["sessionId"]}})  # initialize, on resume
    records.insert(2, {"$set": {"directories": ["/work/pomodoro"]}})  # recordDirectories
    records += [
        {"$set": {"summary": "Add dark mode to the app", "memoryScratchpad": {"version": 1}}},
        {"$set": {"memoryScratchpad": {"version": 1, "workflowSummary": "stale_workflow | paths stale.ts"}}},
    ]
    path = write_jsonl(tmp_path / "session-2025-10-21T20-04-0b23371a.jsonl", records)
    events, decoder = decode_file(path)
    assert decoder.format == "gemini" and decoder.problems == []
    assert [_key(e) for e in events] == [_key(e) for e in decode_file(plain)[0]]
    assert decoder.decoder is not None
    assert decoder.decoder.skipped["$set"] == len(chat["messages"]) + 4


def test_a_checkpoint_of_the_messages_adds_only_what_is_new(real_fixtures: Path, tmp_path: Path):
    chat = _chat(real_fixtures)
    messages = chat["messages"]
    messages[1]["content"] = ""  # a model turn recorded with its calls only: its thought is no text
    records = _records(chat)
    before = decode_file(write_jsonl(tmp_path / "before.jsonl", records))[0]
    # initialize: the history synced in, the CLI's environment turn first (never a message record).
    records.insert(1, {"$set": {"messages": [ENV], "lastUpdated": "2025-10-21T20:04:21Z"}})
    # A sync after a cancelled turn and on resume: every message again, in the history's form, a
    # model turn's thought parts, tool outputs masked,
    # the CLI's own ``<id>_response`` turns, and a turn it had not recorded (bootstrapped history).
    history = [ENV] + [_as_history(m) for m in messages if m["type"] in ("user", "gemini")]
    for message in history:
        for call in message.get("toolCalls", []):
            call["result"] = [
                {
                    "functionResponse": {
                        "id": call["id"],
                        "name": call["name"],
                        "response": {"output": "<masked>"},
                    }
                }
            ]
    answered = [m for m in messages if m.get("toolCalls")]
    history += [
        {
            "id": f"{m['id']}_response",
            "timestamp": m["timestamp"],
            "type": "user",
            "content": m["toolCalls"][0]["result"],
        }
        for m in answered
    ]
    fresh = {
        "id": "bootstrapped",
        "timestamp": "2025-10-21T20:30:00Z",
        "type": "gemini",
        "content": [{"text": "A turn only the history had."}],
    }
    records.append({"$set": {"messages": history + [fresh], "lastUpdated": "2025-10-21T20:30:00Z"}})
    path = write_jsonl(tmp_path / "session-2025-10-21T20-04-0b23371a.jsonl", records)
    events, decoder = decode_file(path)
    assert decoder.problems == []
    keys = [_key(e) for e in events]
    assert keys == [_key(e) for e in before] + [
        (Kind.MESSAGE, "assistant", "A turn only the history had.", None, None)
    ]
    assert events[-1].line == len(records) and events[-1].ts == 1761078600.0
    worked = [k for k in keys if k[0] is not Kind.USAGE]
    assert len(set(worked)) == len(worked)  # nothing twice: not a message, a call or a result
    assert counts(events)["usage"] == counts(before)["usage"]
    assert counts(events)["tool_calls"] == counts(events)["tool_results"] == 11
    assert decoder.decoder is not None and decoder.decoder.skipped["$set context"] == 2
    # /compress: the snapshot recorded, then the history replaced by it and the last turns.
    snapshot = {
        "id": "snap",
        "timestamp": "2025-10-21T20:31:00Z",
        "type": "user",
        "content": [{"text": "<state_snapshot>done</state_snapshot>"}],
    }
    records += [snapshot, {"$set": {"lastUpdated": snapshot["timestamp"]}}]
    records.append(
        {"$set": {"messages": [ENV, snapshot, *history[-4:]], "lastUpdated": "2025-10-21T20:31:01Z"}}
    )
    records.append({"$rewindTo": "snap"})  # /rewind: what was emitted stays
    compressed = decode_file(write_jsonl(path, records))
    assert [_key(e) for e in compressed[0]] == keys + [
        (Kind.MESSAGE, "user", "<state_snapshot>done</state_snapshot>", None, None)
    ]
    assert compressed[1].problems == []
    assert compressed[1].decoder is not None and compressed[1].decoder.skipped["$rewindTo"] == 1


def test_bad_set_records_are_reported_where_they_are(real_fixtures: Path, tmp_path: Path):
    chat = _chat(real_fixtures)
    records: list[dict[str, Any] | str] = list(_records(chat))
    good = decode_file(write_jsonl(tmp_path / "good.jsonl", records))[0]
    first = chat["messages"][0]
    records.insert(3, '{"$set": {"messages": [{"id": "' + first["id"] + '", "type": "us')  # cut off mid-write
    records.insert(5, {"$set": "lastUpdated"})
    records.insert(6, {"$set": {"messages": {"0": first}}})
    records.insert(
        7, {"$set": {"messages": [{"type": "user", "content": "no id"}, dict(first, type="robot"), ENV]}}
    )
    path = write_jsonl(tmp_path / "s.jsonl", records)
    events, decoder = decode_file(path)
    assert [str(p).split(": ", 1)[0] for p in decoder.problems] == [f"{path}:{n}" for n in (4, 6, 7)]
    assert "$set: expected an object, got str" in str(decoder.problems[1])
    assert "$set: messages: expected a list, got dict" in str(decoder.problems[2])
    assert [_key(e) for e in events] == [_key(e) for e in good]  # nothing else lost, nothing twice
    assert decoder.decoder is not None
    skipped = decoder.decoder.skipped
    assert (
        skipped["$set message without an id"],
        skipped["$set message unreadable"],
        skipped["$set context"],
    ) == (1, 1, 1)


def test_a_checkpoint_past_the_memory_of_ids_repeats_nothing(
    real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(gemini, "_MEMORY", 4)
    chat = _chat(real_fixtures)
    records = _records(chat)
    before = decode_file(write_jsonl(tmp_path / "before.jsonl", records))[0]
    records.append({"$set": {"messages": chat["messages"], "lastUpdated": "2025-10-21T20:30:00Z"}})
    events, decoder = decode_file(write_jsonl(tmp_path / "s.jsonl", records))
    assert [_key(e) for e in events] == [_key(e) for e in before]
    assert (
        decoder.decoder is not None
        and decoder.decoder.skipped["$set message forgotten"] == len(chat["messages"]) - 4
    )
