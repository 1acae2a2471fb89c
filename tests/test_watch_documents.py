"""``watch`` follows document formats: read whole on change, only new steps fed, resumed after a restart.

Real files from tests/fixtures, watched by a real FileSource into a real hub and
SQLite store; the same files scanned must give the same detections.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from monitor.config import build_config
from monitor.hub import Hub
from monitor.scan import scan
from monitor.sources.files import FileSource, StartPolicy
from monitor.sources.resume import KnownPositions
from monitor.store import Store
from monitor.updates import ProblemReported
from tests.watchkit import kept, scanned, watched

FIXTURES = Path(__file__).parent / "fixtures"
LOOPING = "mini-swe-agent-gemini3/sympy__sympy-15976.traj.json"


def _v1_list(tmp_path: Path) -> Path:
    folder = FIXTURES / "openhands-v1" / "cd94562403b9487ebdd4018e3f531dfd" / "events"
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps([json.loads(p.read_bytes()) for p in sorted(folder.glob("event-*.json"))]))
    return path


def _copy(tmp_path: Path, name: str) -> Path:
    source = FIXTURES / name
    target = tmp_path / source.parent.name / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    ui = source.parent / "ui_messages.json"
    if ui.exists():
        shutil.copy(ui, target.parent)
    return target


@pytest.mark.parametrize(
    "name",
    [
        LOOPING,
        "swe-agent/pydicom__pydicom-1458.traj",
        "cline/1769053680585/api_conversation_history.json",
        "aider/mozgoslav/.aider.chat.history.md",
        "openhands-v1-list",
    ],
)
def test_scan_and_watch_agree_on_documents(tmp_path: Path, name: str):
    path = _v1_list(tmp_path) if name == "openhands-v1-list" else _copy(tmp_path, name)
    seen = watched(path, tmp_path)
    assert seen == scanned(path)
    assert seen[1]  # events were stored


async def _follow(paths: list[str], db: Path, rewrite=None, known: bool = False) -> tuple[Store, list]:
    """Watch ``paths`` from their start; ``rewrite()`` is called once they are read, and read again."""
    store = Store(db)
    store.start()
    hub = Hub(build_config({}), store)
    problems: list = []
    hub.subscribe(lambda update: problems.append(update.problem), kinds=(ProblemReported,))
    await hub.start()
    positions = KnownPositions(store.file_positions()) if known else None
    files = FileSource(paths, hub, start=StartPolicy("start"), known=positions)
    await files.start()
    try:
        await files.sync()
        if rewrite is not None:
            before = files.bytes_read
            rewrite()
            async with asyncio.timeout(30):
                while files.bytes_read == before:
                    await files.sync()
                    await asyncio.sleep(0.01)  # polling the source's counter, bounded
        await hub.join()
    finally:
        await files.stop()
        await hub.stop()
        store.close()
    return store, problems


def _partial(path: Path, keep: int) -> bytes:
    document = json.loads(path.read_bytes())
    document["messages"] = document["messages"][:keep]
    document["info"] = {k: v for k, v in document["info"].items() if k != "exit_status"}
    return json.dumps(document, indent=2).encode()


def test_a_rewritten_trajectory_is_read_again_and_only_its_new_steps_fed(tmp_path: Path):
    full = FIXTURES / LOOPING
    path = tmp_path / "runs" / full.name
    path.parent.mkdir()
    path.write_bytes(_partial(full, 20))
    store, problems = asyncio.run(
        _follow([str(path.parent)], tmp_path / "w.db", rewrite=lambda: shutil.copy(full, path))
    )
    expected = scan([str(full)])
    session = "sympy__sympy-15976"
    assert problems == []
    assert store.count_events(session) == expected.engine.sessions[session].events
    stored = [(r["type"], r["line"]) for r in store.events(session, limit=10_000)]
    assert len(stored) == len(set(stored))  # nothing twice
    detections = sorted((d["detector"], d["line"]) for d in store.detections(session))
    assert detections == sorted((d.detector, d.line) for d in kept(expected.detections))


def test_a_restarted_watcher_takes_up_a_document_at_its_next_step(tmp_path: Path):
    full = FIXTURES / LOOPING
    path = tmp_path / "runs" / full.name
    path.parent.mkdir()
    path.write_bytes(_partial(full, 20))
    db = tmp_path / "w.db"
    asyncio.run(_follow([str(path)], db))
    shutil.copy(full, path)  # the agent went on while nobody watched
    store, problems = asyncio.run(_follow([str(path)], db, known=True))
    session = "sympy__sympy-15976"
    assert problems == []
    assert store.count_events(session) == scan([str(full)]).engine.sessions[session].events


def test_a_folder_of_trajectories_is_watched_and_one_is_no_stream_of_bad_lines(tmp_path: Path):
    runs = tmp_path / "runs"
    runs.mkdir()
    names = ["django__django-11095.traj.json", "sympy__sympy-15976.traj.json"]
    for name in names:
        shutil.copy(FIXTURES / "mini-swe-agent-gemini3" / name, runs)
    (runs / "notes.json").write_text('{"not": "a log"}')  # not a log name: not read
    store, problems = asyncio.run(_follow([str(runs)], tmp_path / "w.db"))
    assert sorted(store.session_ids()) == ["django__django-11095", "sympy__sympy-15976"]
    assert problems == []
    store, problems = asyncio.run(_follow([str(runs / names[0])], tmp_path / "one.db"))
    assert problems == [] and store.session_ids() == ["django__django-11095"]


def test_a_document_caught_half_written_is_not_reported_at_once(tmp_path: Path):
    path = tmp_path / "t.traj.json"
    full = (FIXTURES / LOOPING).read_bytes()
    path.write_bytes(full[: len(full) // 2])
    store, problems = asyncio.run(
        _follow([str(path)], tmp_path / "w.db", rewrite=lambda: path.write_bytes(full))
    )
    assert problems == []
    assert (
        store.count_events("t")
        == scan([str(FIXTURES / LOOPING)]).engine.sessions["sympy__sympy-15976"].events
    )


def test_an_openhands_conversation_folder_is_followed_one_event_file_at_a_time(tmp_path: Path):
    real = FIXTURES / "openhands-v1" / "cd94562403b9487ebdd4018e3f531dfd"
    conversation = tmp_path / "conversations" / real.name
    (conversation / "events").mkdir(parents=True)
    shutil.copy(real / "base_state.json", conversation)
    files = sorted((real / "events").glob("event-*.json"))
    for file in files[:3]:
        shutil.copy(file, conversation / "events")

    def the_agent_goes_on() -> None:
        for file in files[3:]:
            shutil.copy(file, conversation / "events")

    store, problems = asyncio.run(
        _follow([str(tmp_path / "conversations")], tmp_path / "w.db", rewrite=the_agent_goes_on)
    )
    assert problems == []
    expected = scan([str(conversation)])
    session = real.name
    assert store.session_ids() == [session]
    assert store.count_events(session) == expected.engine.sessions[session].events
    stored = [(r["type"], r["line"]) for r in store.events(session, limit=100)]
    assert ("tool_call", 3) in stored and ("tool_result", 4) in stored


def test_a_binary_file_is_one_problem_as_scan_says_it_not_one_per_line(tmp_path: Path):
    """`watch` on a binary file said 100 lines of invalid UTF-8 where `scan` says one; appending more
    binary data adds nothing; rewriting it as a log is read."""
    path = tmp_path / "agent.jsonl"
    path.write_bytes(bytes(range(256)) * 80 + b"\n" * 50)

    def append_more() -> None:
        with path.open("ab") as out:
            out.write(bytes(range(256)) * 10)

    store, problems = asyncio.run(_follow([str(path)], tmp_path / "w.db", rewrite=append_more))
    assert len(problems) == 1, problems
    assert "binary data (20,530 bytes), not a text log" in problems[0].reason
    # scan says the same of it (the file has grown since)
    assert scan([str(path)]).problems[0].reason == problems[0].reason.replace("20,530", "23,090")
    assert store.session_ids() == []
