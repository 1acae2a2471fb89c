"""Failing forward into a new kind of failure: the one before was dealt with.

The shapes are those of a Claude Code transcript (elizabeth-goldsmith/prirodnik,
62e12a9c-b103-44c5-9755-3e12f54639a0.jsonl, shortened): zsh refuses an unquoted
``-o ~/Videos/%(title)s.%(ext)s`` ("no matches found", naming the path expanded), the
agent quotes it and yt-dlp runs, then meets ``HTTP Error 403`` with two different sets of
flags, and gets out by another approach. The quoting fix dealt with what the first failure
named and met a kind of failure the streak had not: the streak starts again there, so two
403s are two failures, not three in a row failing the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

from monitor.events import Level
from monitor.scan import scan

SESSION = "62e12a9c-b103-44c5-9755-3e12f54639a0"
YTDLP = '"/Users/liza/Library/Python/3.9/bin/yt-dlp"'
URL = "'https://www.youtube.com/watch?v=KBgZsV-0Fdo'"
GLOB = (
    f"/Users/liza/Library/Python/3.9/bin/yt-dlp -o ~/Videos/%(title)s.%(ext)s {URL}",
    "Exit code 1\n(eval):1: no matches found: /Users/liza/Videos/%(title)s.%(ext)s",
)
FORBIDDEN = (
    "Exit code 1\nDeprecated Feature: Support for Python version 3.9 has been deprecated.\n"
    "[youtube] Extracting URL: https://www.youtube.com/watch?v=KBgZsV-0Fdo\n"
    "[youtube] KBgZsV-0Fdo: Downloading webpage\n[info] KBgZsV-0Fdo: Downloading 1 format(s): 18\n"
    "[download] Sleeping {n}.00 seconds as required by the site...\n"
    "ERROR: unable to download video data: HTTP Error 403: Forbidden"
)
QUOTED = f"mkdir -p ~/Videos && {YTDLP} -o '~/Videos/%(title)s.%(ext)s' {URL}"
AGENT = f"{YTDLP} --user-agent \"Mozilla/5.0\" -f 'best[height<=720]' -o '~/Videos/%(title)s.%(ext)s' {URL}"
WEB = f"{YTDLP} --extractor-args \"youtube:player_client=web\" -o '~/Videos/%(title)s.%(ext)s' {URL}"


def _records(steps: list[tuple[str, str]]) -> list[dict]:
    records: list[dict] = [
        {
            "type": "user",
            "uuid": "u0",
            "parentUuid": None,
            "sessionId": SESSION,
            "timestamp": "2026-05-04T18:36:00.000Z",
            "cwd": "/Users/liza",
            "version": "2.1.126",
            "message": {"role": "user", "content": "скачай видео по этой ссылке"},
        }
    ]
    for n, (command, output) in enumerate(steps, start=1):
        call_id = f"call_function_{n:04d}_1"
        records.append(
            {
                "type": "assistant",
                "uuid": f"a{n}",
                "parentUuid": f"u{n - 1}",
                "sessionId": SESSION,
                "timestamp": f"2026-05-04T18:{36 + n:02d}:23.453Z",
                "cwd": "/Users/liza",
                "version": "2.1.126",
                "message": {
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "minimax-m2.7",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call_id,
                            "name": "Bash",
                            "input": {"command": command, "description": "Download YouTube video"},
                        }
                    ],
                    "stop_reason": "tool_use",
                },
            }
        )
        error = output.startswith("Exit code")
        records.append(
            {
                "type": "user",
                "uuid": f"u{n}",
                "parentUuid": f"a{n}",
                "sessionId": SESSION,
                "timestamp": f"2026-05-04T18:{36 + n:02d}:38.796Z",
                "cwd": "/Users/liza",
                "version": "2.1.126",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "content": output, "is_error": error, "tool_use_id": call_id}
                    ],
                },
                "toolUseResult": f"Error: {output}" if error else {"stdout": output, "stderr": ""},
            }
        )
    return records


def _warned(tmp_path: Path, steps: list[tuple[str, str]]) -> list[str]:
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in _records(steps)))
    report = scan([str(path)])
    assert report.problem_count == 0, [str(p) for p in report.problems]
    return [f"{d.detector}: {d.message}" for d in report.detections if d.level >= Level.WARN]


def test_quoting_fixed_then_two_different_failures_alike_is_not_a_cascade(tmp_path: Path):
    """The glob quoted (the path the shell printed expanded, written from ``~``), then two 403s."""
    steps = [GLOB, (QUOTED, FORBIDDEN.format(n=3)), (AGENT, FORBIDDEN.format(n=5))]
    assert _warned(tmp_path, steps) == []


def test_the_same_403_a_third_time_still_warns(tmp_path: Path):
    """After the fix, the new failure coming back three times in a row is still the same way again."""
    steps = [GLOB] + [(command, FORBIDDEN.format(n=5)) for command in (QUOTED, AGENT, WEB)]
    assert any(w.startswith("failure_cascade") for w in _warned(tmp_path, steps))


def test_without_the_fix_the_same_kind_from_the_start_still_warns(tmp_path: Path):
    """A first failure the next command did not touch (another download) starts no new streak."""
    other = (f"{YTDLP} -o /tmp/out.mp4 'https://example.com/v'", FORBIDDEN.format(n=1))
    steps = [other, (QUOTED, FORBIDDEN.format(n=3)), (AGENT, FORBIDDEN.format(n=5))]
    assert any(w.startswith("failure_cascade") for w in _warned(tmp_path, steps))
