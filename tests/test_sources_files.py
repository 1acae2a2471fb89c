"""The file source follows real files in tmp_path as agents write, rotate, truncate and delete them.

Waiting is never a sleep: tests await the sink until what they expect has
arrived (with a deadline), and ``source.sync()`` forces the periodic rescan so
that "nothing else arrives" can be asserted deterministically.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from monitor.formats.base import Problem
from monitor.sources.files import FileSource, StartPolicy, WatchSpec

DEADLINE = 15.0


class Sink:
    """Collects what the source submits; lets tests await a condition."""

    def __init__(self) -> None:
        self.events = []
        self.problems: list[Problem] = []
        self.channels: dict[str, object] = {}
        self._changed = asyncio.Event()

    async def submit(self, events, problems=()) -> None:
        self.events.extend(events)
        self.problems.extend(problems)
        self._changed.set()

    def register_channel(self, session, channel) -> None:
        self.channels[session] = channel

    async def wait_for(self, predicate, what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out waiting for {what}; events={len(self.events)} "
                    f"problems={[str(p) for p in self.problems][:5]}"
                )
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))
            except TimeoutError:
                pass

    def contents(self) -> list[str]:
        return [e.content for e in self.events if e.content]


def line(content: str, session: str = "s", **extra) -> str:
    record = {"type": "message", "session": session, "role": "assistant", "content": content}
    record.update(extra)
    return json.dumps(record) + "\n"


def append(path: Path, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    with open(path, "ab") as f:
        f.write(data)


@pytest.fixture
async def run_source():
    """Start a FileSource over the given paths; stopped at teardown."""
    started: list[FileSource] = []

    async def start(paths, sink, **kwargs) -> FileSource:
        source = FileSource([str(p) for p in paths], sink, **kwargs)
        await source.start()
        started.append(source)
        return source

    yield start
    for source in started:
        await source.stop()


async def test_appended_lines_arrive_once_in_order_with_line_numbers(tmp_path, run_source):
    """Appends in several writes are read exactly once, in order, each with its file:line."""
    log = tmp_path / "a.jsonl"
    log.write_text("")
    sink = Sink()
    source = await run_source([log], sink)
    for i in range(1, 6):
        append(log, line(f"m{i}"))
        await sink.wait_for(lambda: len(sink.events) == i, f"event {i}")
    await source.sync()
    assert sink.contents() == ["m1", "m2", "m3", "m4", "m5"]
    assert [e.line for e in sink.events] == [1, 2, 3, 4, 5]
    assert {e.source for e in sink.events} == {str(log)}
    assert sink.problems == []


async def test_half_written_line_waits_for_its_newline(tmp_path, run_source):
    """A last line without its newline is held back, then decoded whole when the newline comes."""
    log = tmp_path / "a.jsonl"
    log.write_text(line("first"))
    sink = Sink()
    source = await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 1, "first line")
    half = line("second")
    append(log, half[:20])
    await source.sync()
    assert len(sink.events) == 1 and sink.problems == []
    append(log, half[20:])
    await sink.wait_for(lambda: len(sink.events) == 2, "completed line")
    assert sink.events[1].content == "second" and sink.events[1].line == 2
    assert sink.problems == []


async def test_copytruncate_restarts_from_zero_and_says_so(tmp_path, run_source):
    """A file truncated in place (copytruncate) is read again from byte 0, with a notice."""
    log = tmp_path / "a.jsonl"
    log.write_text(line("old1") + line("old2") + line("old3"))
    sink = Sink()
    await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 3, "old lines")
    os.truncate(log, 0)
    await sink.wait_for(lambda: any("truncated" in p.reason for p in sink.problems), "truncation notice")
    append(log, line("new1"))
    await sink.wait_for(lambda: len(sink.events) == 4, "line after truncation")
    assert sink.events[3].content == "new1" and sink.events[3].line == 1


async def test_truncate_and_rewrite_beyond_old_offset_is_noticed(tmp_path, run_source):
    """Truncated and rewritten longer before the tail looked: the changed bytes before the offset give it away."""
    log = tmp_path / "a.jsonl"
    log.write_text(line("old"))
    sink = Sink()
    await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 1, "old line")
    # No await in between: the source cannot observe the file while it is short.
    with open(log, "wb") as f:
        f.write(line("NEW-A").encode() + line("NEW-B").encode())
    await sink.wait_for(lambda: len(sink.events) == 3, "rewritten lines")
    assert sink.contents() == ["old", "NEW-A", "NEW-B"]
    assert any("rewritten" in p.reason for p in sink.problems)


async def test_rotation_finishes_the_old_file_and_follows_the_new_one(tmp_path, run_source):
    """rename + new file: lines the writer still adds to the renamed file are read, and the new file from its start."""
    log = tmp_path / "a.jsonl"
    sink = Sink()
    log.write_text(line("before"))
    await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 1, "first line")
    old_writer = open(log, "ab", buffering=0)
    try:
        os.rename(log, tmp_path / "a.jsonl.1")
        log.write_text(line("new-file-1"))
        old_writer.write(line("late-in-old").encode())
        await sink.wait_for(lambda: {"late-in-old", "new-file-1"} <= set(sink.contents()), "both files")
    finally:
        old_writer.close()
    append(log, line("new-file-2"))
    await sink.wait_for(lambda: "new-file-2" in sink.contents(), "second line of the new file")
    assert sink.contents().count("before") == 1
    new = [e for e in sink.events if e.content.startswith("new-file")]
    assert [e.line for e in new] == [1, 2]
    assert any("rotated" in p.reason for p in sink.problems)


async def test_rename_to_another_watched_name_is_not_read_again(tmp_path, run_source):
    """A followed file renamed to another *.jsonl name keeps its offset: no duplicated events."""
    sink = Sink()
    (tmp_path / "a.jsonl").write_text(line("one") + line("two"))
    source = await run_source([tmp_path], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 2, "two lines")
    os.rename(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    append(tmp_path / "b.jsonl", line("three"))
    await sink.wait_for(lambda: len(sink.events) == 3, "third line")
    await source.sync()
    assert sink.contents() == ["one", "two", "three"]
    assert [e.line for e in sink.events] == [1, 2, 3]


async def test_deleted_file_is_read_to_its_end_then_forgotten(tmp_path, run_source):
    """A deleted file's last lines (written through a still-open descriptor) are read, then it is dropped."""
    log = tmp_path / "a.jsonl"
    log.write_text(line("one"))
    sink = Sink()
    source = await run_source([tmp_path], sink, start=StartPolicy("start"), rotate_grace_seconds=0.5)
    await sink.wait_for(lambda: len(sink.events) == 1, "first line")
    with open(log, "ab", buffering=0) as writer:
        os.unlink(log)
        writer.write(line("after-unlink").encode())
        await sink.wait_for(lambda: "after-unlink" in sink.contents(), "line written after the unlink")
    assert any("deleted" in p.reason for p in sink.problems)
    await sink.wait_for(lambda: not source.retiring, "the deleted file to be forgotten")
    assert source.by_path == {} and source.by_ident == {}


async def test_file_and_directory_that_appear_later(tmp_path, run_source):
    """A directory that does not exist yet is picked up when it appears, and new files in it from their start."""
    logs = tmp_path / "logs"
    sink = Sink()
    await run_source([logs], sink)
    assert any("does not exist yet" in p.reason for p in sink.problems)
    (logs / "deep").mkdir(parents=True)
    (logs / "deep" / "run.jsonl").write_text(line("hello"))
    (logs / "deep" / "run.jsonl.inbox.jsonl").write_text(line("not-a-log"))
    (logs / "notes.txt").write_text("ignored")
    await sink.wait_for(lambda: len(sink.events) == 1, "event from the late file")
    append(logs / "deep" / "run.jsonl", line("again"))
    await sink.wait_for(lambda: len(sink.events) == 2, "second event")
    assert sink.contents() == ["hello", "again"]


async def test_non_utf8_bytes_are_replaced_and_reported(tmp_path, run_source):
    """Invalid UTF-8 inside a record: the record is still used (U+FFFD) and the line is reported."""
    log = tmp_path / "a.jsonl"
    log.write_bytes(b'{"type":"message","session":"s","role":"assistant","content":"caf\xe9 ok"}\n')
    sink = Sink()
    await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: sink.events and sink.problems, "event and problem")
    assert sink.events[0].content == "caf\ufffd ok"
    assert sink.problems[0].where == f"{log}:1" and "UTF-8" in sink.problems[0].reason


async def test_malformed_lines_are_counted_reported_with_file_line_and_skipped(tmp_path, run_source):
    """Garbage lines between good ones become problems with file:line; the good ones still arrive."""
    log = tmp_path / "a.jsonl"
    log.write_text(line("one") + "{not json\n" + "[1, 2]\n" + line("two"))
    sink = Sink()
    source = await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 2 and len(sink.problems) == 2, "events and problems")
    assert [p.where for p in sink.problems] == [f"{log}:2", f"{log}:3"]
    assert source.files[0].problems == 2


async def test_ten_megabyte_line_is_decoded(tmp_path, run_source):
    """A legitimate 10 MB record (a big tool result) is decoded whole under the default 16 MB limit."""
    log = tmp_path / "a.jsonl"
    big = "x" * (10 * 1024 * 1024)
    log.write_text(line(big) + line("after"))
    sink = Sink()
    await run_source([log], sink, start=StartPolicy("start"))
    await sink.wait_for(lambda: len(sink.events) == 2, "big and small events")
    assert len(sink.events[0].content) == len(big) and sink.events[1].line == 2


async def test_oversized_line_is_skipped_with_bounded_memory(tmp_path, run_source):
    """Over the limit, a 10 MB line is dropped as it streams past (memory stays small) and reported."""
    log = tmp_path / "a.jsonl"
    log.write_text(line("x" * (10 * 1024 * 1024)) + line("after"))
    sink = Sink()
    tracemalloc.start()
    try:
        await run_source([log], sink, start=StartPolicy("start"), max_line_bytes=1024 * 1024)
        await sink.wait_for(lambda: len(sink.events) == 1 and sink.problems, "the line after, and a problem")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, f"peak {peak:,} bytes while skipping a 10 MB line"
    assert sink.events[0].content == "after" and sink.events[0].line == 2
    assert sink.problems[0].where == f"{log}:1" and "exceeds" in sink.problems[0].reason


async def test_a_thousand_files_at_once(tmp_path, run_source):
    """1,000 files, existing and growing, are all followed (one session each, nothing lost)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(1000):
        (logs / f"agent-{i:04}.jsonl").write_text(line("start", session=f"s{i}"))
    sink = Sink()
    source = await run_source([logs], sink)
    await sink.wait_for(lambda: len(sink.events) == 1000, "1,000 replayed events")
    for i in range(1000):
        append(logs / f"agent-{i:04}.jsonl", line("more", session=f"s{i}"))
    await sink.wait_for(lambda: len(sink.events) == 2000, "1,000 appended events")
    await source.sync()
    assert len(sink.events) == 2000
    assert len({e.session for e in sink.events}) == 1000
    assert len(source.files) == 1000


async def test_default_start_replays_recent_files_and_tails_old_ones(tmp_path, run_source):
    """Default start: a file modified minutes ago is replayed; a months-old one only yields new lines,
    numbered by their real line in the file."""
    recent, old = tmp_path / "recent.jsonl", tmp_path / "old.jsonl"
    recent.write_text(line("r1") + line("r2"))
    old.write_text(line("o1") + line("o2") + line("o3"))
    months_ago = time.time() - 90 * 86400
    os.utime(old, (months_ago, months_ago))
    sink = Sink()
    source = await run_source([tmp_path], sink)
    await sink.wait_for(lambda: len(sink.events) == 2, "recent file replayed")
    await source.sync()
    assert sink.contents() == ["r1", "r2"]
    append(old, line("o4"))
    await sink.wait_for(lambda: len(sink.events) == 3, "new line of the old file")
    assert sink.events[2].content == "o4" and sink.events[2].line == 4


async def test_end_start_waits_for_a_partial_last_line(tmp_path, run_source):
    """Starting at the end of a file whose last line is half written reads that line once it is complete."""
    log = tmp_path / "a.jsonl"
    half = line("partial")
    log.write_text(line("done") + half[:10])
    sink = Sink()
    await run_source([log], sink, start=StartPolicy("end"))
    append(log, half[10:])
    await sink.wait_for(lambda: len(sink.events) == 1, "completed line")
    assert sink.events[0].content == "partial" and sink.events[0].line == 2
    assert sink.problems == []


async def test_tail_replay_of_a_big_recent_file_starts_on_a_line_boundary(tmp_path, run_source):
    """A recent file bigger than the replay cap is replayed from the first whole line of its tail."""
    log = tmp_path / "a.jsonl"
    log.write_text("".join(line(f"m{i:03}") for i in range(200)))
    sink = Sink()
    source = await run_source([log], sink, start=StartPolicy("recent", tail_bytes=1000))
    await sink.wait_for(lambda: len(sink.events) > 0, "tail events")
    await source.sync()
    assert sink.problems == []
    assert sink.contents()[-1] == "m199"
    first = sink.events[0]
    assert first.line == int(first.content[1:]) + 1


async def test_globs_match_only_their_files(tmp_path, run_source):
    """A glob follows matching files (even ones created later) and nothing else."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    sink = Sink()
    source = await run_source([f"{tmp_path}/*/run-*.jsonl"], sink, start=StartPolicy("start"))
    (tmp_path / "a" / "run-1.jsonl").write_text(line("yes-1"))
    (tmp_path / "b" / "run-2.jsonl").write_text(line("yes-2"))
    (tmp_path / "b" / "other.jsonl").write_text(line("no"))
    (tmp_path / "b" / "run-2.jsonl.inbox.jsonl").write_text(line("no-inbox"))
    await sink.wait_for(lambda: len(sink.events) == 2, "two matching files")
    await source.sync()
    assert sorted(sink.contents()) == ["yes-1", "yes-2"]


def test_watch_spec_kinds(tmp_path):
    """Paths become file, directory or glob specs; directories match *.jsonl below them but not inboxes."""
    (tmp_path / "f.jsonl").write_text("")
    assert WatchSpec.parse(str(tmp_path / "f.jsonl")).kind == "file"
    assert WatchSpec.parse(str(tmp_path / "missing.jsonl")).kind == "file"
    assert WatchSpec.parse(str(tmp_path / "missing-dir")).kind == "dir"
    spec = WatchSpec.parse(str(tmp_path))
    assert spec.kind == "dir" and spec.matches(f"{tmp_path}/x/y.jsonl")
    assert not spec.matches(f"{tmp_path}/x/y.jsonl.inbox.jsonl") and not spec.matches(f"{tmp_path}/y.txt")
    glob = WatchSpec.parse(f"{tmp_path}/**/r?n-[0-9].jsonl")
    assert glob.kind == "glob" and glob.root == str(tmp_path) and glob.recursive
    assert glob.matches(f"{tmp_path}/run-1.jsonl") and glob.matches(f"{tmp_path}/a/b/ran-2.jsonl")
    assert not glob.matches(f"{tmp_path}/a/run-x.jsonl")
    flat = WatchSpec.parse(f"{tmp_path}/*.jsonl")
    assert not flat.recursive and not flat.matches(f"{tmp_path}/a/b.jsonl")


async def test_native_file_sessions_get_an_inbox_channel(tmp_path, run_source):
    """Each session of a native-format log can be reached through <log>.inbox.jsonl; other formats cannot."""
    native = tmp_path / "native.jsonl"
    native.write_text(line("hi", session="n1") + line("hi", session="n2"))
    claude = tmp_path / "claude.jsonl"
    claude.write_text(
        json.dumps(
            {
                "type": "user",
                "sessionId": "c1",
                "uuid": "u1",
                "timestamp": "2025-01-01T00:00:00Z",
                "message": {"role": "user", "content": "hello"},
            }
        )
        + "\n"
    )
    sink = Sink()
    await run_source([tmp_path], sink, start=StartPolicy("start"))
    await sink.wait_for(
        lambda: {"n1", "n2"} <= set(sink.channels) and any(e.session == "c1" for e in sink.events),
        "inbox channels and the Claude event",
    )
    channel = sink.channels["n1"]
    assert channel.name == "inbox" and Path(channel.path) == tmp_path / "native.jsonl.inbox.jsonl"
    assert "c1" not in sink.channels


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
async def test_unreadable_file_is_reported_once(tmp_path, run_source):
    """A file the monitor may not read is reported (not silently skipped) and does not stop the others."""
    secret, ok = tmp_path / "secret.jsonl", tmp_path / "ok.jsonl"
    secret.write_text(line("hidden"))
    secret.chmod(0)
    ok.write_text(line("visible"))
    sink = Sink()
    await run_source([tmp_path], sink, start=StartPolicy("start"))
    await sink.wait_for(
        lambda: sink.events and any("cannot read" in p.reason for p in sink.problems),
        "the readable event and the problem",
    )
    assert sink.contents() == ["visible"]
