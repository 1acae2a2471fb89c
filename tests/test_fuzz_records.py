"""Fuzzing with mutated real records through ``scan``, a socket connection and a watched file.

Records come from the scenario corpus (tests/scenarios, real agent runs in the
native format).  Hypothesis picks a sequence of them and mutates some:

* ``invalid``: the record cannot be an event (type a list or a number, a line
  cut in half, not an object, 1,000 levels of nesting with an invalid UTF-8
  byte, an integer beyond 64 bits, a session that is an object, a bad role);
* ``repaired``: the event is kept and the repair reported (a time out of
  range, an invalid UTF-8 byte in its text);
* ``valid``: untouched.

Through each path: no exception escapes, every valid or repaired record
becomes an event (stored in SQLite for the socket and the file), and every
invalid or repaired one is reported exactly once, at its line.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.config import build_config
from monitor.hub import Hub
from monitor.scan import scan
from monitor.sources.files import FileSource, StartPolicy
from monitor.sources.sockets import SocketServer
from monitor.store import Store
from monitor.updates import ProblemReported
from tests.socketkit import DEADLINE, RawClient, short_socket_path

SCENARIOS = Path(__file__).parent / "scenarios"


def _corpus() -> list[dict]:
    records = []
    for path in sorted(SCENARIOS.glob("*.jsonl"))[:40]:
        for raw in path.read_text().splitlines():
            record = json.loads(raw)
            record.pop("pid", None)  # a socket vets pids against its peer: not what this tests
            records.append(record)
    return records


CORPUS = _corpus()
DEEP = b'{"c":"\xff","x":' + b"[" * 1000 + b"1" + b"]" * 1000 + b"}"


def _dump(record: dict) -> bytes:
    return json.dumps(record).encode()


def _with_bad_byte(record: dict) -> bytes | None:
    text = record.get("content")
    if not isinstance(text, str) or not text or not text.isascii():
        return None
    line = _dump(record)
    cut = line.index(json.dumps(text).encode()) + 1 + len(text) // 2
    return line[:cut] + b"\xff" + line[cut:]


def mutate(record: dict, how: str) -> tuple[bytes, str]:
    """The line for ``record`` mutated ``how``, and what must become of it."""
    r = dict(record)
    if how == "type_list":
        r["type"] = []
    elif how == "type_int":
        r["type"] = 7
    elif how == "cut":
        line = _dump(r)
        return line[: len(line) // 2], "invalid"
    elif how == "array":
        return b"[1, 2, 3]", "invalid"
    elif how == "deep":
        return DEEP, "invalid"
    elif how == "huge_int":
        return _dump({"type": "usage", "session": r["session"], "input_tokens": 2**64}), "invalid"
    elif how == "session_object":
        r["session"] = {"id": 1}
    elif how == "bad_role":
        return _dump({"type": "message", "session": r["session"], "role": "robot", "content": "x"}), "invalid"
    elif how == "ts_huge":
        r["ts"] = 1e300
        return _dump(r), "repaired"
    elif how == "ts_negative":
        r["ts"] = -5e12
        return _dump(r), "repaired"
    elif how == "bad_utf8":
        line = _with_bad_byte(r)
        if line is None:
            r["ts"] = 1e300
            return _dump(r), "repaired"
        return line, "repaired"
    else:
        return _dump(r), "valid"
    return _dump(r), "invalid"


MUTATIONS = ["none"] * 6 + [
    "type_list",
    "type_int",
    "cut",
    "array",
    "deep",
    "huge_int",
    "session_object",
    "bad_role",
    "ts_huge",
    "ts_negative",
    "bad_utf8",
]

cases = st.lists(
    st.tuples(st.integers(0, len(CORPUS) - 1), st.sampled_from(MUTATIONS)), min_size=1, max_size=25
)


def build(picks: list[tuple[int, str]], session: str) -> tuple[bytes, Counter, int]:
    """The file/stream, the expected problems per line, and how many events it holds."""
    lines: list[bytes] = []
    problems: Counter = Counter()
    events = 0
    for number, (index, how) in enumerate(picks, 1):
        record = dict(CORPUS[index], session=session)
        if "id" in record:
            record["id"] = f"{record['id']}-{number}"  # one call, once: duplicates are dropped
        line, outcome = mutate(record, how)
        lines.append(line)
        if outcome != "valid":
            problems[number] += 1
        if outcome != "invalid":
            events += 1
    return b"\n".join(lines) + b"\n", problems, events


fuzz = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@fuzz
@given(picks=cases)
def test_scan_decodes_every_valid_record_and_reports_every_bad_one_once(tmp_path, picks):
    data, expected_problems, expected_events = build(picks, "scan")
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    report = scan([str(path)])
    assert report.events == expected_events
    if expected_events == 0 and expected_problems and report.unsupported:
        # Nothing in the file reads as an agent record: scan says so once, for
        # the whole file, instead of once per line.
        assert [p.line for p in report.problems] == [None]
        assert "not a supported format" in report.problems[0].reason
        return
    assert Counter(p.line for p in report.problems) == expected_problems


async def _through_monitor(tmp_path: Path, data: bytes) -> tuple[Store, list]:
    """Send ``data`` on a socket (session "sock") and in a watched file (session "file")."""
    store = Store(tmp_path / "fuzz.db")
    store.start()
    config = build_config({})
    hub = Hub(config, store)
    problems: list = []
    hub.subscribe(lambda update: problems.append(update.problem), kinds=(ProblemReported,))
    await hub.start()
    server = SocketServer(hub, config, unix_path=short_socket_path(tmp_path))
    await server.start()
    log = tmp_path / "watched" / "fuzz.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"")
    files = FileSource([str(log)], hub, start=StartPolicy("start"))
    await files.start()
    try:
        client = await RawClient.unix(server.unix_path)
        await client.send(data.replace(b'"session": "file"', b'"session": "sock"'))
        with open(log, "ab") as stream:
            stream.write(data)
        await client.close()
        async with asyncio.timeout(DEADLINE):
            while server.lines < data.count(b"\n") or files.bytes_read < len(data):
                await asyncio.sleep(0.01)  # polling the sources' counters, bounded
        await files.sync()
    finally:
        await files.stop()
        await server.stop()
        await hub.stop()
        store.close()
    return store, problems


@fuzz
@given(picks=cases)
def test_socket_and_watched_file_store_every_valid_record_and_report_every_bad_one_once(
    tmp_path_factory, picks
):
    tmp_path = tmp_path_factory.mktemp("fuzz")
    data, expected_problems, expected_events = build(picks, "file")
    store, problems = asyncio.run(_through_monitor(tmp_path, data))
    counts = {
        session: store.count_events(session) if store.get_session(session) else 0
        for session in ("sock", "file")
    }
    assert counts == {"sock": expected_events, "file": expected_events}
    by_source = {"socket": Counter(), "file": Counter()}
    for problem in problems:
        by_source["socket" if problem.source.startswith("socket:") else "file"][problem.line] += 1
    assert by_source["file"] == expected_problems
    assert by_source["socket"] == expected_problems


# -- the document and run readers (OpenHands V1, OpenHands evaluation, …) ----------------------------
#
# Real records of each reader, one field of some of them replaced by an arbitrary JSON value (or dropped,
# or the record replaced whole): scan never raises, says what was wrong in one line a problem, and
# still reads the records left intact.

FIXTURES = Path(__file__).parent / "fixtures"
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _v1_events() -> list[dict]:
    folder = FIXTURES / "openhands-v1" / "cd94562403b9487ebdd4018e3f531dfd" / "events"
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("event-*.json"))]


def _eval_runs() -> list[dict]:
    return [
        json.loads(line) for line in (FIXTURES / "openhands-eval" / "output.jsonl").read_text().splitlines()
    ]


def _write_list(path: Path, records: list) -> Path:
    path = path.with_suffix(".json")
    path.write_text(json.dumps(records, default=str))
    return path


def _write_folder(path: Path, records: list) -> Path:
    folder = path.parent / "conversation" / "events"
    folder.mkdir(parents=True)
    for index, record in enumerate(records):
        (folder / f"event-{index:05d}-x.json").write_text(json.dumps(record, default=str))
    return folder.parent


def _write_lines(path: Path, records: list) -> Path:
    path = path.with_suffix(".jsonl")
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in records))
    return path


def _cline_messages() -> list[dict]:
    path = FIXTURES / "cline" / "1769053680585" / "api_conversation_history.json"
    return json.loads(path.read_bytes())[:12]


def _write_cline(path: Path, records: list) -> Path:
    task = path.parent / "task"
    task.mkdir()
    (task / "api_conversation_history.json").write_text(json.dumps(records, default=str))
    shutil.copy(FIXTURES / "cline" / "1769053680585" / "ui_messages.json", task)
    return task / "api_conversation_history.json"


def _cline_ui() -> list[dict]:
    return json.loads((FIXTURES / "cline" / "1769053680585" / "ui_messages.json").read_bytes())[:40]


def _write_cline_ui(path: Path, records: list) -> Path:
    task = path.parent / "task"
    task.mkdir()
    shutil.copy(FIXTURES / "cline" / "1769053680585" / "api_conversation_history.json", task)
    (task / "ui_messages.json").write_text(json.dumps(records, default=str))
    return task / "api_conversation_history.json"


def _aider_lines() -> list:
    return (FIXTURES / "aider" / "mozgoslav" / ".aider.chat.history.md").read_text().splitlines()[:120]


def _write_aider(path: Path, records: list) -> Path:
    folder = path.parent / "proj"
    folder.mkdir()
    text = "\n".join(r if isinstance(r, str) else json.dumps(r, default=str) for r in records)
    (folder / ".aider.chat.history.md").write_text(text, errors="surrogatepass")
    return folder / ".aider.chat.history.md"


def _gemini_messages() -> list:
    return json.loads((FIXTURES / "gemini-cli" / "gemini-cli-pomodoro-timer.json").read_bytes())["messages"]


def _write_gemini(path: Path, records: list) -> Path:
    path = path.with_suffix(".json")
    chat = {
        "sessionId": "s",
        "projectHash": "h",
        "startTime": "2025-10-21T20:04:20.819Z",
        "messages": records,
    }
    path.write_text(json.dumps(chat, default=str))
    return path


def _write_gemini_lines(path: Path, records: list) -> Path:
    path = path.with_suffix(".jsonl")
    header = {"sessionId": "s", "projectHash": "h", "startTime": "2025-10-21T20:04:20.819Z"}
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in [header, *records]))
    return path


def _vorflux_entries() -> list:
    path = Path(__file__).parent / "corpus" / "vorflux-opus46" / "astropy__astropy-13398.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))["trajectory"][:40]


def _write_vorflux(path: Path, records: list) -> Path:
    path = path.with_suffix(".json.gz")
    export = {
        "instance_id": "i",
        "session_id": "s",
        "total_spans": 1,
        "trajectory_entries": 1,
        "trajectory": records,
    }
    path.write_bytes(gzip.compress(json.dumps(export, default=str).encode(errors="surrogatepass")))
    return path


def _pi_records() -> list:
    path = (
        Path(__file__).parent
        / "corpus"
        / "openclaw-glm5"
        / "Run1-43__0337b31e-2580-4d91-aafd-5abff8d60d2b.jsonl.gz"
    )
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()][:40]


def _write_pi(path: Path, records: list) -> Path:
    path = path.with_suffix(".jsonl.gz")
    text = "".join(json.dumps(r, default=str) + "\n" for r in records)
    path.write_bytes(gzip.compress(text.encode(errors="surrogatepass")))
    return path


def _managed_records() -> list:
    path = (
        Path(__file__).parent
        / "corpus"
        / "managed-agents-openhai"
        / "there-is-more-to-context-than-location-s6c6.jsonl.gz"
    )
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()][:40]


def _opencode_parts() -> list:
    from tests.sqlitekit import opencode_parts

    return opencode_parts()[:40]


def _sql_value(value: object) -> object:
    """A value SQLite can bind: text and numbers as they are, anything else as its JSON."""
    if isinstance(value, str) or (isinstance(value, float) and value == value):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return json.dumps(value, default=str)


def _name(value: object, default: str) -> str:
    return (
        value if isinstance(value, str) and value.replace("_", "").isalnum() and len(value) < 100 else default
    )


def _write_storage(path: Path, records: list) -> Path:
    """The mutated parts and their messages as OpenCode's older storage/ folder (one JSON file each)."""
    root = path.parent / "opencode" / "storage"
    (root / "session").mkdir(parents=True)
    for index, record in enumerate(records):
        record = record if isinstance(record, dict) else {"data": record}
        session = _name(record.get("session_id"), "ses")
        message = _name(record.get("message_id"), f"msg_{index}")
        part = _name(record.get("id"), f"prt_{index}")
        for file, value in (
            (root / "message" / session / f"{message}.json", record.get("message")),
            (root / "part" / message / f"{part}.json", record.get("data")),
        ):
            file.parent.mkdir(parents=True, exist_ok=True)
            if not file.exists():
                file.write_text(json.dumps(value, default=str))
    return root


def _write_opencode(path: Path, records: list) -> Path:
    """The mutated parts (and their messages) in a copy of the real database's schema."""
    import sqlite3

    from tests.sqlitekit import opencode_copy

    db = opencode_copy(path.parent / "oc")
    with sqlite3.connect(db) as connection:
        connection.execute("DELETE FROM part")
        connection.execute("DELETE FROM message")
        for index, record in enumerate(records):
            record = record if isinstance(record, dict) else {"data": record}
            message = _sql_value(record.get("message_id", f"msg_{index}"))
            connection.execute(
                "INSERT OR REPLACE INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, 0, 0, ?)",
                (
                    message,
                    _sql_value(record.get("session_id", "ses")),
                    json.dumps(record.get("message"), default=str),
                ),
            )
            connection.execute(
                "INSERT OR REPLACE INTO part (id, message_id, session_id, time_created, time_updated, data) "
                "VALUES (?, ?, ?, ?, 0, ?)",
                (
                    _sql_value(record.get("id", f"prt_{index}")),
                    message,
                    _sql_value(record.get("session_id", "ses")),
                    _sql_value(record.get("time", 0)),
                    json.dumps(record.get("data"), default=str),
                ),
            )
    return db


def _goose_records() -> list:
    from tests.sqlitekit import goose_messages

    return [
        {"role": role, "content": content, "created": 1_764_694_735 + n}
        for n, (role, content) in enumerate(goose_messages())
    ]


def _write_goose(path: Path, records: list) -> Path:
    import sqlite3

    from tests.sqlitekit import goose_copy, goose_session

    db = goose_copy(path.parent / "goose")
    session = goose_session(db, messages=[])
    with sqlite3.connect(db) as connection:
        for record in records:
            record = record if isinstance(record, dict) else {"content": record}
            connection.execute(
                "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) VALUES (?, ?, ?, ?, ?)",
                (
                    session,
                    _sql_value(record.get("role", "user")),
                    json.dumps(record.get("content"), default=str),
                    _sql_value(record.get("created", 0)),
                    json.dumps(record.get("metadata"), default=str),
                ),
            )
    return db


RUNS = Path(__file__).parent / "corpus"


def _trae_steps() -> list:
    path = RUNS / "trae-agent-task2money" / "trajectory_20260118_211615.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))["agent_steps"][:12]


def _write_trae(path: Path, records: list) -> Path:
    path = path.parent / "trajectory_20260118_211615.json"
    document = {
        "task": "t",
        "start_time": "2026-01-18T21:16:34",
        "end_time": "",
        "provider": "p",
        "model": "m",
        "max_steps": 200,
        "llm_interactions": [],
        "agent_steps": records,
        "success": False,
    }
    path.write_text(json.dumps(document, default=str))
    return path


def _gemini_contents() -> list:
    path = RUNS / "gemini-cli-history" / "gemini-cli-2026-04-06-history.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))[:30]


def _write_contents(path: Path, records: list) -> Path:
    path = path.with_suffix(".json")
    path.write_text(json.dumps(records, default=str))
    return path


def _resolver_runs() -> list:
    return [
        json.loads(
            gzip.decompress((RUNS / "openhands-resolver" / "resolver-output-line2.jsonl.gz").read_bytes())
        )
    ]


def _copilot_events() -> list:
    path = (
        FIXTURES / "copilot-cli" / "session-state" / "049410b4-c1df-44ee-87a5-caa1c349091e" / "events.jsonl"
    )
    return [json.loads(line) for line in path.read_text().splitlines()]


def _stream_events() -> list:
    path = RUNS / "gemini-cli-metaphi" / "figma-eval-65829f23-19f2-4c9a-9dc9-9be934780ffc.jsonl.gz"
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()][:40]


def _cursor_records() -> list:
    from tests.test_formats_cursor import TRANSCRIPT  # (no real Cursor transcript is public: see there)

    return TRANSCRIPT


READERS = {
    "opencode": (_opencode_parts, _write_opencode),
    "opencode-storage": (_opencode_parts, _write_storage),
    "goose": (_goose_records, _write_goose),
    "cursor": (_cursor_records, _write_lines),
    "trae": (_trae_steps, _write_trae),
    "gemini-history": (_gemini_contents, _write_contents),
    "openhands-resolver": (_resolver_runs, _write_lines),
    "copilot": (_copilot_events, _write_lines),
    "gemini-stream": (_stream_events, _write_lines),
    "managed-agents": (_managed_records, _write_pi),
    "pi-agent": (_pi_records, _write_pi),
    "vorflux": (_vorflux_entries, _write_vorflux),
    "gemini": (_gemini_messages, _write_gemini),
    "gemini-lines": (_gemini_messages, _write_gemini_lines),
    "aider": (_aider_lines, _write_aider),
    "cline": (_cline_messages, _write_cline),
    "cline-ui": (_cline_ui, _write_cline_ui),
    "openhands-v1-list": (_v1_events, _write_list),
    "openhands-v1-folder": (_v1_events, _write_folder),
    "openhands-eval": (_eval_runs, _write_lines),
}


def _mutated(records: list, edits: list[tuple[int, int, object, str]]) -> list:
    out = [json.loads(json.dumps(r)) for r in records]
    for index, field, original, how in edits:
        value = copy.deepcopy(original)  # (never the same object twice: no cycles)
        target = out[index % len(out)]
        if how == "whole":
            out[index % len(out)] = value
        elif isinstance(target, dict) and target:
            key = sorted(target)[field % len(target)]
            if how == "drop":
                del target[key]
            else:
                target[key] = value
            # one level down too: the observation / action / history objects
            inner = target.get("observation") or target.get("action") or target.get("history")
            if how == "deep" and isinstance(inner, dict) and inner:
                inner[sorted(inner)[field % len(inner)]] = copy.deepcopy(original)
    return out


edits = st.lists(
    st.tuples(
        st.integers(0, 50), st.integers(0, 50), JSON_VALUES, st.sampled_from(["set", "drop", "whole", "deep"])
    ),
    max_size=4,
)


@settings(fuzz, max_examples=100)
@given(reader=st.sampled_from(sorted(READERS)), edits=edits)
def test_new_readers_never_raise_and_report_one_line_a_problem(tmp_path_factory, reader, edits):
    records, write = READERS[reader]
    tmp_path = tmp_path_factory.mktemp("readers")
    path = write(tmp_path / "log", _mutated(records(), edits))
    report = scan([str(path)])
    assert report.files == 1
    for problem in report.problems:
        text = str(problem)
        assert "\n" not in text.strip() or problem.line is None and "not a supported format" in text
        assert "Traceback" not in text
    if not edits:
        assert report.problems == [] and report.events > 0


@settings(fuzz, max_examples=15)
# (a folder is not one file whose size says it was read: the storage/ folder's watch has its own tests)
@given(
    reader=st.sampled_from(sorted(set(READERS) - {"openhands-v1-folder", "opencode-storage"})), edits=edits
)
def test_new_readers_never_raise_when_watched(tmp_path_factory, reader, edits):
    """The same mutated documents followed by ``watch`` (a FileSource into a hub and SQLite)."""
    from tests.watchkit import watched

    records, write = READERS[reader]
    tmp_path = tmp_path_factory.mktemp("watched")
    path = write(tmp_path / "log", _mutated(records(), edits))
    detections, events = watched(path, tmp_path)
    if not edits:
        assert events
