"""A harness's status lines after a command's output are not the output.

Gemini CLI's shell tool ends each result in its own status lines (``Error: (none)``, ``Exit Code: 2``,
``Signal: 0``, ``Background PIDs: (none)``, ``Process Group PGID: 8632``; newer versions only the
ones that say something). What went wrong is the output's own last lines: four gcloud commands
failing four different ways do not fail "the same way" because each result ends in ``Process Group
PGID``, nor because each says ``Error: (none)``. The shapes below are those of a Gemini CLI chat
document (brexp/infra, session-2025-11-06T14-11-1e81b142.json, shortened).
"""

from __future__ import annotations

import json
from pathlib import Path

from monitor.events import Level
from monitor.scan import scan

_OLD = "Command: {command}\nDirectory: (root)\nOutput: {output}\nError: (none)\nExit Code: {code}\nSignal: 0\nBackground PIDs: (none)\nProcess Group PGID: {pgid}"
_NEW = "Output: {output}\nExit Code: {code}\nProcess Group PGID: {pgid}"


def _call(n: int, command: str, output: str, code: int, form: str = _OLD) -> dict:
    text = form.format(command=command, output=output, code=code, pgid=8632 + 17 * n)
    call_id = f"run_shell_command-17624395{n:05d}-4e9aaa87352{n:02d}"
    return {
        "id": call_id,
        "name": "run_shell_command",
        "args": {"command": command},
        "result": [
            {"functionResponse": {"id": call_id, "name": "run_shell_command", "response": {"output": text}}}
        ],
        "status": "success",
        "timestamp": f"2025-11-06T14:32:{n:02d}.000Z",
        "resultDisplay": output,
    }


def _chat(tmp_path: Path, calls: list[dict]) -> Path:
    messages = [
        {
            "id": "m1",
            "timestamp": "2025-11-06T14:31:00.000Z",
            "type": "user",
            "content": "set up a workstation",
        },
        {
            "id": "m2",
            "timestamp": "2025-11-06T14:32:03.192Z",
            "type": "gemini",
            "content": "",
            "thoughts": [],
            "model": "gemini-2.5-flash",
            "tokens": {"input": 17837, "output": 61, "cached": 0, "total": 18190},
            "toolCalls": calls,
        },
    ]
    path = tmp_path / "session-2025-11-06T14-11-1e81b142.json"
    document = {
        "sessionId": "1e81b142-5d6b-4a7e-9c1e-3c1f4f0e2a10",
        "projectHash": "95ab8478b5fc136a91eda9228bafb63a3c8fa4b561663162a9579f8add166c22",
        "startTime": "2025-11-06T14:11:00.000Z",
        "lastUpdated": "2025-11-06T14:33:00.000Z",
        "messages": messages,
    }
    path.write_text(json.dumps(document))
    return path


_CREATE = (
    "gcloud workstations configs create dev-config-private --cluster=cluster-mhn8yrk9 --region=us-central1"
)
_FIXES = [
    (
        f"{_CREATE} --disk-size=50GB",
        "ERROR: (gcloud.workstations.configs.create) unrecognized arguments: --disk-size=50GB (did you mean "
        "'--pd-disk-size'?)\n\nTo search the help text of gcloud commands, run:\n  gcloud help -- SEARCH_TERMS",
        2,
    ),
    (
        f"{_CREATE} --pd-disk-size=50GB",
        "ERROR: (gcloud.workstations.configs.create) argument --pd-disk-size: invalid int value: '50GB'\n"
        "Usage: gcloud workstations configs create (CONFIG : --cluster=CLUSTER --region=REGION) [optional flags]\n"
        "For detailed information on this command and its flags, run:\n  gcloud workstations configs create --help",
        2,
    ),
    (
        f"{_CREATE} --pd-disk-size=50",
        "ERROR: (gcloud.workstations.configs.create) INVALID_ARGUMENT: disk_type 'pd-standard' does not support "
        "size_gb that is smaller than 200",
        1,
    ),
    (
        f"{_CREATE} --pd-disk-size=50 --pd-disk-type=pd-balanced",
        "ERROR: (gcloud.workstations.configs.create) ALREADY_EXISTS: Resource 'projects/treino-indoor-ohx4v/"
        "locations/us-central1/workstationClusters/cluster-mhn8yrk9/workstationConfigs/dev-config-private' "
        "already exists",
        1,
    ),
    (
        "gcloud workstations configs list --cluster=cluster-mhn8yrk9 --region=us-central1 --filter=bad",
        "ERROR: (gcloud.workstations.configs.list) Invalid value for [--filter]: unbalanced parenthesis",
        1,
    ),
]


def _warned(path: Path) -> list[str]:
    report = scan([str(path)])
    assert report.problem_count == 0, [str(p) for p in report.problems]
    return [f"{d.detector}: {d.message}" for d in report.detections if d.level >= Level.WARN]


def test_failures_that_each_differ_are_not_the_same_way_for_their_status_lines(tmp_path: Path):
    """Five gcloud commands in a row failing five different ways, each result ending in Gemini CLI's
    status lines: adapting (a notice), not a cascade failing the same way nor a limit
    corroborated by two failures alike."""
    calls = [_call(n, command, output, code) for n, (command, output, code) in enumerate(_FIXES, start=1)]
    assert _warned(_chat(tmp_path, calls)) == []


def test_newer_status_lines_too(tmp_path: Path):
    """Newer Gemini CLI versions write only ``Exit Code`` and ``Process Group PGID`` after the output."""
    calls = [
        _call(n, command, output, code, _NEW) for n, (command, output, code) in enumerate(_FIXES[:4], start=1)
    ]
    assert _warned(_chat(tmp_path, calls)) == []


def test_the_same_failure_behind_status_lines_still_warns(tmp_path: Path):
    """The same failure after each change (``next: not found`` three times, the status lines
    around it): a cascade failing the same way still warns."""
    calls = [
        _call(n, command, "> nextn@0.1.0 dev\n> next dev\n\nsh: 1: next: not found", 127)
        for n, command in enumerate(
            [
                "npm run dev",
                "npm run dev -- -p 3001",
                "cd studio2 && npm run dev",
                "npm run dev --prefix studio2",
            ],
            start=1,
        )
    ]
    assert any(w.startswith("failure_cascade") for w in _warned(_chat(tmp_path, calls)))
