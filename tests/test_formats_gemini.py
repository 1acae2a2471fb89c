"""Gemini CLI chats: the JSON document (real, tests/fixtures/gemini-cli) and its JSON-lines form."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from monitor.events import Kind
from monitor.formats import documents
from tests.formatkit import counts, decode_file, write_jsonl
from tests.watchkit import scanned, watched

REAL = "gemini-cli/gemini-cli-pomodoro-timer.json"


def test_the_real_chat(real_fixtures: Path):
    path = real_fixtures / REAL
    assert documents.kind_of(path) == "gemini"
    events, problems = documents.load(path)
    assert problems == []
    assert counts(events) == {
        "session_start": 1,
        "user_messages": 5,
        "assistant_messages": 14,
        "tool_calls": 11,
        "tool_results": 11,
        "usage": 13,
    }
    assert events[0].agent == "gemini-cli"
    assert events[0].meta["session_id"] == "0b23371a-ce2e-4b1c-81a0-44af5d94d9ce"
    failed = [e for e in events if e.kind is Kind.TOOL_RESULT and e.is_error]
    assert [(e.line, e.tool, e.meta) for e in failed] == [(18, "replace", {"status": "error"})]
    first = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert first.content.startswith("Successfully created and wrote to new file")
    assert events[1].ts == 1761077060.819  # the first message's own time


def _as_lines(real_fixtures: Path, tmp_path: Path) -> Path:
    """The real chat in the JSON-lines layout newer Gemini CLI versions append: a header, one
    message a line, a ``$set`` update, and a message appended again once its calls finished."""
    chat = json.loads((real_fixtures / REAL).read_bytes())
    header = {k: v for k, v in chat.items() if k != "messages"}
    records: list[dict] = [header]
    for message in chat["messages"]:
        if message.get("toolCalls"):
            unfinished = dict(
                message, toolCalls=[dict(c, result=None, status="executing") for c in message["toolCalls"]]
            )
            records.append(unfinished)
            records.append({"$set": {"lastUpdated": message["timestamp"]}})
        records.append(message)
    return write_jsonl(tmp_path / "session-2025-10-21T20-04-0b23371a.jsonl", records)


def test_the_json_lines_form_reads_as_the_document(real_fixtures: Path, tmp_path: Path):
    path = _as_lines(real_fixtures, tmp_path)
    events, decoder = decode_file(path)
    assert decoder.format == "gemini" and decoder.problems == []
    document, _ = documents.load(real_fixtures / REAL)
    assert counts(events) == counts(document)
    calls = [e.call_id for e in events if e.kind is Kind.TOOL_CALL]
    assert len(calls) == len(set(calls)) == 11  # a call re-appended is not a new call


def test_bad_records(tmp_path: Path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"sessionId": "s", "projectHash": "h", "startTime": "2025-10-21T20:04:20.819Z"},
            {"id": "1", "timestamp": "2025-10-21T20:05:00Z", "type": "robot", "content": "x"},
            {"id": "2", "timestamp": "yesterday", "type": "user", "content": "x"},
            {"id": "3", "timestamp": "2025-10-21T20:06:00Z", "type": "gemini", "content": [{"text": "ok"}]},
        ],
    )
    events, decoder = decode_file(path)
    assert [p.line for p in decoder.problems] == [2, 3]
    assert counts(events) == {"session_start": 1, "assistant_messages": 1}


def test_scan_and_watch_agree(real_fixtures: Path, tmp_path: Path):
    document = tmp_path / "chats" / "session-2025-10-21T20-04-0b23371a.json"
    document.parent.mkdir()
    shutil.copy(real_fixtures / REAL, document)
    assert watched(document, tmp_path) == scanned(document)
    lines = _as_lines(real_fixtures, tmp_path)
    assert watched(lines, tmp_path / "x") == scanned(lines)


def _shell_message(n: int, command: str, output: str) -> dict:
    """A Gemini CLI message with one finished ``run_shell_command`` call, as the CLI writes it."""
    call_id = f"run_shell_command_17771230013{n:02d}_0"
    response = {
        "functionResponse": {"id": call_id, "name": "run_shell_command", "response": {"output": output}}
    }
    return {
        "id": f"m{n}",
        "timestamp": f"2026-04-25T13:16:{n:02d}.000Z",
        "type": "gemini",
        "content": "",
        "toolCalls": [
            {
                "id": call_id,
                "name": "run_shell_command",
                "args": {"command": command, "description": command},
                "result": [response],
                "status": "success",
                "timestamp": f"2026-04-25T13:16:{n:02d}.100Z",
            }
        ],
    }


def test_a_shell_result_is_what_the_command_printed_and_its_exit_code(tmp_path: Path):
    """``run_shell_command``'s result is an envelope whose status is "success" whenever the command
    ran: the exit code is read from it (nonzero: an error), the content is the command's output, and
    the fields around it (the PGID, new every call) are not."""
    header = {"sessionId": "s", "projectHash": "h", "startTime": "2026-04-25T13:04:08.408Z", "kind": "main"}
    outputs = [
        ("cd TP-Tutor", "Output: (empty)\nProcess Group PGID: 17576"),
        (
            "git add .",
            "Output: fatal: not a git repository (or any of the parent directories): .git\n"
            "Exit Code: 128\nProcess Group PGID: 17580",
        ),
        (  # the older envelope: every field, "(none)" when empty
            "gcloud config get-value project",
            "Command: gcloud config get-value project\nDirectory: (root)\n"
            "Output: Your active configuration is: [cloudshell-8500]\ntreino-indoor-ohx4v\n"
            "Error: (none)\nExit Code: 0\nSignal: 0\nBackground PIDs: (none)\nProcess Group PGID: 8385",
        ),
        ("npm run build", "Output: vite build\nError: Build failed\nExit Code: 1\nProcess Group PGID: 9001"),
    ]
    records = [header] + [_shell_message(n, command, out) for n, (command, out) in enumerate(outputs)]
    events, decoder = decode_file(write_jsonl(tmp_path / "session-2026-04-25T13-04-16a02704.jsonl", records))
    assert decoder.format == "gemini" and decoder.problems == []
    results = [e for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(e.content, e.is_error, e.meta.get("exit_code")) for e in results] == [
        ("", False, None),
        ("fatal: not a git repository (or any of the parent directories): .git", True, 128),
        ("Your active configuration is: [cloudshell-8500]\ntreino-indoor-ohx4v", False, 0),
        ("vite build\nError: Build failed", True, 1),
    ]


def test_a_lone_cd_then_the_command_twice_with_the_same_results_is_a_cycle(tmp_path: Path):
    """Gemini CLI runs every shell call in the project's directory: ``cd shop-app`` as a call of its
    own changes nothing, and the listing after it shows the home directory each time.  The two
    passes differ only in the envelope's PGID, which is no output: the same results, a cycle."""
    from monitor.events import Level
    from monitor.scan import scan

    home = (
        "Directory listing for /home/dev:\n[DIR] .cache\n[DIR] .config\n[DIR] .npm\n[DIR] shop-app\n"
        ".bashrc (3553 bytes)\n.gitconfig (29 bytes)\n.profile (807 bytes)"
    )
    not_a_repo = (
        "Output: fatal: not a git repository (or any of the parent directories): .git\nExit Code: 128"
    )
    steps = [
        ("run_shell_command", {"command": "cd shop-app"}, "Output: (empty)"),
        ("run_shell_command", {"command": "git add ."}, not_a_repo),
        ("run_shell_command", {"command": "cd shop-app"}, "Output: (empty)"),
        ("list_directory", {"dir_path": "."}, home),
        ("run_shell_command", {"command": "cd shop-app"}, "Output: (empty)"),
        ("list_directory", {"dir_path": "."}, home),
        ("run_shell_command", {"command": "git add ."}, not_a_repo),
    ]
    header = {"sessionId": "s", "projectHash": "h", "startTime": "2026-04-25T13:04:08.408Z", "kind": "main"}
    records: list[dict] = [header]
    for n, (tool, args, output) in enumerate(steps):
        if tool == "run_shell_command":
            output += f"\nProcess Group PGID: {17576 + 4 * n}"
        call_id = f"{tool}_17771230013{n:02d}_0"
        response = {"functionResponse": {"id": call_id, "name": tool, "response": {"output": output}}}
        call = {"id": call_id, "name": tool, "args": args, "result": [response], "status": "success"}
        at = f"2026-04-25T13:16:{2 * n:02d}.000Z"
        records.append({"id": f"m{n}", "timestamp": at, "type": "gemini", "content": "", "toolCalls": [call]})
    path = write_jsonl(tmp_path / "session-2026-04-25T13-04-16a02704.jsonl", records)
    warned = [(d.detector, d.line) for d in scan([str(path)]).detections if d.level >= Level.WARN]
    assert ("cycle", 7) in warned
