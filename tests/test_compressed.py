"""Compressed logs (``.gz``, ``.zst``): read by ``scan`` and ``watch`` as their
decompressed content, the format found from that content and from the name
without the compression suffix; damage (truncated, corrupt, a zip bomb) is
one clear problem on its file, never a traceback.

Real parts: real files compressed in ``tmp_path`` with the stdlib's gzip and
the ``zstandard`` package, the real scan, a real ``loopwatch scan``
subprocess and the real live monitor over a SQLite store, run twice.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from monitor.formats import compressed
from monitor.scan import expand_paths, scan
from tests.test_restart import counts, run_once
from tests.test_watch_headless import ROOT, loop_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: A real mini-swe-agent trajectory (a chat document) and a real Claude Code transcript (JSONL).
DOCUMENT = FIXTURES / "mini-swe-agent-gemini3" / "django__django-11138.traj.json"
SWE_AGENT = next((FIXTURES / "swe-agent").glob("*.traj"))
TRANSCRIPT = sorted((FIXTURES / "claude-code").glob("*.jsonl"))[0]


def _pack(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    packed = gzip.compress(data) if target.suffix == ".gz" else zstandard.ZstdCompressor().compress(data)
    target.write_bytes(packed)
    return target


def _found(path: Path) -> list[tuple[str, str, int | None, str]]:
    report = scan([str(path)])
    assert report.problem_count == 0, report.problems
    return [(d.detector, d.session, d.line, d.message) for d in report.detections]


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
@pytest.mark.parametrize("source", [DOCUMENT, SWE_AGENT, TRANSCRIPT], ids=["chat", "swe-agent", "claude"])
def test_a_compressed_log_scans_exactly_as_the_plain_one(tmp_path: Path, source: Path, suffix: str):
    plain = tmp_path / source.name
    shutil.copy(source, plain)
    (tmp_path / "packed").mkdir()
    packed = _pack(source, tmp_path / "packed" / (source.name + suffix))
    want = _found(plain)
    assert _found(packed) == want
    report = scan([str(packed)])
    assert report.formats[str(packed)] == scan([str(plain)]).formats[str(plain)]
    assert expand_paths([str(tmp_path / "packed")]) == [str(packed)]  # found in a directory


def test_a_truncated_gz_reads_what_came_before_and_says_so(tmp_path: Path):
    data = loop_lines("s1", 200).encode()
    whole = gzip.compress(data)
    cut = tmp_path / "agent.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    report = scan([str(cut)])
    assert 0 < report.events < 400  # the events before the damage are kept
    *cut_line, damage = report.problems  # (and the line it cut, when it cut one)
    assert str(damage) == f"{cut}: truncated gzip data: the file ends inside its compressed stream"
    assert [p.line for p in cut_line] in ([], [report.lines])


def test_a_corrupt_zst_is_one_line_with_its_name_and_no_traceback(tmp_path: Path):
    bad = tmp_path / "run.traj.zst"
    bad.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(256)) * 4)
    lines = tmp_path / "agent.jsonl.zst"
    lines.write_bytes(b"this is not zstd at all")
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "scan", "-q", str(bad), str(lines)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert "Traceback" not in done.stderr
    errors = done.stderr.splitlines()
    assert any(line.startswith(f"loopwatch: skipped {bad}: corrupt zstd data (") for line in errors), errors
    assert any(line.startswith(f"loopwatch: skipped {lines}: corrupt zstd data (") for line in errors), errors


def test_a_zip_bomb_is_refused_past_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(compressed, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    line = b'{"type": "message", "session": "s1", "role": "assistant", "content": "same"}\n'
    bomb = tmp_path / "bomb.jsonl.zst"
    bomb.write_bytes(zstandard.ZstdCompressor().compress(line * 200_000))  # 16 MB in a few KB
    assert bomb.stat().st_size < 20_000
    report = scan([str(bomb)])
    assert report.lines <= (1 << 20) // len(line) + 1
    assert report.problems[-1].reason == (
        "decompresses to more than 1,048,576 bytes (a zip bomb?): the first 1,048,576 were read, the rest refused"
    )
    assert len(report.problems) <= 2  # (and the line the bound cut)
    document = tmp_path / "bomb.traj.json.gz"
    document.write_bytes(
        gzip.compress(b'{"messages": [{"role": "user", "content": "hi"}' + b" " * (2 << 20) + b"]}")
    )
    report = scan([str(document)])
    assert len(report.problems) == 1 and "zip bomb" in report.problems[0].reason


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
async def test_watch_reads_a_compressed_log_once_even_after_a_restart(tmp_path: Path, suffix: str):
    logs = tmp_path / "logs"
    logs.mkdir()
    packed = _pack(Path(_write(tmp_path / "agent.jsonl", loop_lines("s1", 6))), logs / f"agent.jsonl{suffix}")
    db = tmp_path / "x.db"
    await run_once([logs], db, mode="start")
    first = counts(db)
    assert first[0] == first[1] == 12 and first[2] > 0
    await run_once([logs], db, mode="start")
    assert counts(db) == first
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("SELECT line FROM events ORDER BY seq")] == list(range(1, 13))
        assert conn.execute("SELECT COUNT(*) FROM file_positions").fetchone()[0] == 1
    assert packed.exists()


async def test_watch_reports_a_truncated_gz_and_keeps_its_lines(tmp_path: Path):
    data = gzip.compress(loop_lines("s1", 100).encode())
    log = tmp_path / "agent.jsonl.gz"
    log.write_bytes(data[: len(data) // 2])
    db = tmp_path / "x.db"
    await run_once([log], db, mode="start")
    events = counts(db)[0]
    assert 0 < events < 200
    log.write_bytes(data)  # the writer finished it: the rest, and nothing twice
    await run_once([log], db, mode="start")
    assert counts(db)[0] == counts(db)[1] == 200


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
