"""A job's output polled again after a wait is the same question, not the question in other words.

``stale_outcome`` warns at the same substantial answer to four *different* calls (asking again in
other words). ``read_background_output`` of one pid with ``delay_ms`` 5000, then 10000, then none
asks one thing -- the job's output now -- however long it waits first: polling, which ``waiting``
(its budget) and ``exact_repeat`` judge. The shapes are a Gemini CLI chat's JSON lines
(AnthonyontheHub/TP-Tutor, session-2026-04-25T02-41-ab395b98.jsonl, shortened): every message is
written once as it is streamed and once more with its tool calls.
"""

from __future__ import annotations

import json
from pathlib import Path

from monitor.detect.analysis.waits import asked
from monitor.events import Event, Kind, Level
from monitor.scan import scan

_LOG = (
    "Full Log Output:\n\r\n> tp-tutor@0.1.0 build\r\n> tsc && vite build\r\n\r\n"
    "vite v6.4.2 building for production...\r\ntransforming (1) src/main.tsxtransforming (6) "
    "node_modules/react/cjs/react.production.js"
)


def _chat(tmp_path: Path, turns: list[tuple[str, str, dict, str]]) -> Path:
    """A chat of ``turns`` (text, tool, args, output), each message partial then full."""
    lines: list[dict] = [
        {
            "sessionId": "ab395b98-93f1-4d48-8618-ba473d55ce63",
            "projectHash": "66fcc9e784cf851b66158169ea06c6385623ed67d539f65a7e9bdae68114edb0",
            "startTime": "2026-04-25T02:41:05.174Z",
            "lastUpdated": "2026-04-25T02:41:05.174Z",
            "kind": "main",
        },
        {
            "id": "u1",
            "timestamp": "2026-04-25T02:43:00.000Z",
            "type": "user",
            "content": [{"text": "the build fails: buildOfflineTranslation is missing"}],
        },
    ]
    for n, (text, tool, args, output) in enumerate(turns):
        when = f"2026-04-25T02:{44 + n // 6:02d}:{(n * 10) % 60:02d}.000Z"
        message = {
            "id": f"m{n}",
            "timestamp": when,
            "type": "gemini",
            "content": text,
            "thoughts": [],
            "tokens": {
                "input": 21808,
                "output": 26,
                "cached": 20232,
                "thoughts": 12,
                "tool": 0,
                "total": 21846,
            },
            "model": "gemini-3-flash-preview",
        }
        call_id = f"{tool}_17770850{n:05d}_0"
        call = {
            "id": call_id,
            "name": tool,
            "args": args,
            "result": [{"functionResponse": {"id": call_id, "name": tool, "response": {"output": output}}}],
            "status": "success",
            "timestamp": when,
            "resultDisplay": output,
        }
        lines += [message, {"$set": {"lastUpdated": when}}, {**message, "toolCalls": [call]}]
    path = tmp_path / "session-2026-04-25T02-41-ab395b98.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _poll(text: str, **wait: int) -> tuple[str, str, dict, str]:
    return text, "read_background_output", {**wait, "pid": 10628}, _LOG


def _grep(pattern: str, found: str) -> tuple[str, str, dict, str]:
    return f"Checking {pattern}.", "grep_search", {"pattern": pattern}, found


def _warned(path: Path) -> list[str]:
    report = scan([str(path)])
    assert report.problem_count == 0, [str(p) for p in report.problems]
    return [f"{d.detector}: {d.message}" for d in report.detections if d.level >= Level.WARN]


def test_a_hung_build_polled_after_waits_between_other_work_is_polling(tmp_path: Path):
    """The background build's log read five times, waiting 5 s, 10 s, 5 s and not at all, with a type
    check and greps between that each brought something new: one question asked again, not four."""
    turns = [
        ("I'll run the build in the background.", "run_shell_command",
         {"command": "npm run build", "is_background": True},
         "Command moved to background (PID: 10628). Output hidden. Press Ctrl+B to view."),
        _poll("I'll check the output in a moment.", delay_ms=5000),
        _poll("I'll check the build progress again shortly.", delay_ms=10000),
        ("I'll run tsc separately.", "run_shell_command", {"command": "npx tsc"},
         "Output: (empty)\nProcess Group PGID: 10674"),
        _poll("tsc passes. I'll check the background process once more.", delay_ms=5000),
        _grep("export (function|const) (resolveApiKey|buildOfflineTranslation)",
              'Found 3 matches for pattern "export (function|const) (resolveApiKey|buildOfflineTranslation)" '
              "in path \".\":\n---\nFile: src/services/linaService.ts\nL5- export const STATUS_EMOJI"),
        _grep("export async function (fetchSentenceSuggestions|fetchQuickTranslation)",
              'Found 2 matches for pattern "export async function (fetchSentenceSuggestions|'
              'fetchQuickTranslation)" in path ".":\n---\nFile: src/services/linaService.ts\nL122- const result'),
        _poll("I'll check the background build one last time."),
        ("Stopping the background processes.", "run_shell_command", {"command": "kill 10493 10628"},
         "Output: /usr/bin/bash: line 2: kill: (10628) - No such process\nProcess Group PGID: 10714"),
        _poll("Process 10628 is gone; I'll read its final output."),
    ]  # fmt: skip
    assert _warned(_chat(tmp_path, turns)) == []


def test_different_questions_with_one_answer_still_warn(tmp_path: Path):
    """The same answer to four different questions (four greps in other words, each the same single
    match) is still asking again in other words."""
    found = 'Found 1 match in path ".":\n---\nFile: src/services/linaService.ts\nL5- export const STATUS_EMOJI: Record'
    turns = [
        _grep(pattern, found)
        for pattern in ("STATUS_EMOJI", "export const STATUS_EMOJI", "STATUS_EMOJI:", "const STATUS_EMOJI")
    ]
    assert any(w.startswith("stale_outcome") for w in _warned(_chat(tmp_path, turns)))


def _call(tool: str, **args: object) -> Event:
    return Event(kind=Kind.TOOL_CALL, session="s", ts=0.0, tool=tool, args=dict(args), call_id="c")


def test_what_a_call_asks_leaves_its_wait_aside():
    """A tool's wait arguments are not what it asks; a shell's ``timeout`` caps its command and stays."""
    assert asked(_call("read_background_output", pid=10628, delay_ms=5000)) == asked(
        _call("read_background_output", pid=10628)
    )
    assert asked(_call("read_background_output", pid=10628)) != asked(
        _call("read_background_output", pid=10629)
    )
    assert asked(_call("Bash", command="pytest -q", timeout=120000)) != asked(
        _call("Bash", command="pytest -q", timeout=600000)
    )
