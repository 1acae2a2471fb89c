"""Turn assembly: records of one model response become one turn, in every format."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import orjson

from monitor.demo.synthetic import records
from monitor.detect.analysis.turns import BoundedText, Turn, TurnTracker
from monitor.detect.engine import Engine
from monitor.events import Event, Kind
from monitor.formats.lines import LineDecoder
from monitor.text import squash_ws, squashed
from tests.formatkit import decode_file, write_jsonl


def ev(kind: Kind, ts: float, line: int, **fields) -> Event:
    return Event(kind=kind, session="s", ts=ts, source="t.jsonl", line=line, **fields)


def feed_all(events: list[Event], **options) -> list:
    tracker = TurnTracker(**options)
    turns = [turn for turn in map(tracker.feed, events) if turn is not None]
    if tracker.current is not None:
        turns.append(tracker.current)
    return turns


def test_text_then_calls_then_results_is_one_turn_closed_by_its_last_result():
    """A response's text and parallel calls form one turn, complete when both results are back."""
    tracker = TurnTracker()
    assert tracker.feed(ev(Kind.MESSAGE, 0, 1, role="assistant", content="Let me look.")) is None
    assert tracker.feed(ev(Kind.TOOL_CALL, 0.1, 2, tool="read", args={"path": "a"}, call_id="1")) is None
    assert tracker.feed(ev(Kind.TOOL_CALL, 0.2, 3, tool="read", args={"path": "b"}, call_id="2")) is None
    assert tracker.feed(ev(Kind.TOOL_RESULT, 1, 4, content="A", call_id="1")) is None
    turn = tracker.feed(ev(Kind.TOOL_RESULT, 1, 5, content="B", call_id="2"))
    assert turn is not None and turn.has_text and len(turn.calls) == 2 and len(turn.results) == 2
    assert not turn.text_only


def test_text_only_turns_split_by_usage_or_by_time():
    """Usage after a reply ends it; without usage, replies a second apart are separate turns."""
    events = [
        ev(Kind.MESSAGE, 0, 1, role="assistant", content="one"),
        ev(Kind.USAGE, 0.5, 2, input_tokens=10, output_tokens=5),
        ev(Kind.MESSAGE, 5, 3, role="assistant", content="two"),
        ev(Kind.MESSAGE, 10, 4, role="assistant", content="three"),
    ]
    turns = feed_all(events)
    assert [t.text_value() for t in turns] == ["one", "two", "three"]
    assert all(t.text_only for t in turns)


def test_streamed_chunks_are_one_turn():
    """Chunks of one streamed reply (a fraction of a second apart) join into one turn."""
    events = [ev(Kind.MESSAGE, i * 0.05, i + 1, role="assistant", content=f"part{i}") for i in range(5)]
    turns = feed_all(events)
    assert len(turns) == 1 and turns[0].messages == 5


def test_response_ids_decide_over_time():
    """With ids in meta, the same id continues the turn however late, another id starts one."""
    events = [
        ev(Kind.MESSAGE, 0, 1, role="assistant", content="a", meta={"message_id": "m1"}),
        ev(Kind.MESSAGE, 60, 2, role="assistant", content="b", meta={"message_id": "m1"}),
        ev(Kind.MESSAGE, 60.1, 3, role="assistant", content="c", meta={"message_id": "m2"}),
    ]
    turns = feed_all(events)
    assert [t.messages for t in turns] == [2, 1]


def test_tool_call_after_a_result_starts_a_tool_only_turn():
    """A call made after results came back belongs to the next response (Codex turns without text)."""
    events = [
        ev(Kind.TOOL_CALL, 0, 1, tool="ls", args={}, call_id="1"),
        ev(Kind.TOOL_RESULT, 1, 2, content="x", call_id="1"),
        ev(Kind.TOOL_CALL, 2, 3, tool="ls", args={}, call_id="2"),
        ev(Kind.TOOL_RESULT, 3, 4, content="y", call_id="2"),
    ]
    turns = feed_all(events)
    assert len(turns) == 2 and all(not t.has_text and len(t.calls) == 1 for t in turns)


def test_usage_on_the_same_record_belongs_to_it_and_a_new_id_splits():
    """Claude-style usage: on the record of a message it names that message's response;
    a usage naming another response moves its message to a new turn."""
    events = [
        ev(Kind.MESSAGE, 0, 1, role="assistant", content="first answer"),
        ev(Kind.USAGE, 0, 1, input_tokens=5, output_tokens=5, meta={"message_id": "m1"}),
        ev(Kind.MESSAGE, 30, 2, role="assistant", content="more of the first answer"),
        ev(Kind.MESSAGE, 90, 3, role="assistant", content="a second response"),
        ev(Kind.USAGE, 90, 3, input_tokens=9, output_tokens=5, meta={"message_id": "m2"}),
    ]
    turns = feed_all(events)
    assert [t.text_value() for t in turns] == ["first answer\nmore of the first answer", "a second response"]
    assert [t.response for t in turns] == ["m1", "m2"]


def test_bounded_text_keeps_head_and_tail_only():
    """A 1 MB reply is held as 2,000 characters (head and tail), like text.clip."""
    text = BoundedText(2000)
    text.add("H" * 500_000)
    text.add("T" * 500_000)
    assert len(text.text()) == 2000 and text.text().startswith("H") and text.text().endswith("T")
    assert text.length == 1_000_001  # plus the separator between the two records


def _claude(records: list[dict], tmp_path: Path) -> list[Event]:
    base = {
        "sessionId": "11111111-2222-3333-4444-555555555555",
        "version": "2.1.39",
        "cwd": "/w",
        "isSidechain": False,
        "userType": "external",
    }
    lines = [dict(base, uuid=f"u{n}", **record) for n, record in enumerate(records)]
    events, decoder = decode_file(write_jsonl(tmp_path / "11111111-2222-3333-4444-555555555555.jsonl", lines))
    assert decoder.format == "claude" and decoder.problem_count == 0
    return events


def assistant(ts: str, msg_id: str, block: dict, output_tokens: int = 20) -> dict:
    return {
        "type": "assistant",
        "timestamp": ts,
        "message": {
            "id": msg_id,
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [block],
            "usage": {"input_tokens": 3, "output_tokens": output_tokens},
        },
    }


def test_claude_code_response_split_over_records_is_one_turn(tmp_path: Path):
    """Claude Code writes one API message as several records (white space, thinking, text,
    tool_use) up to a minute apart; through the real adapter they are one turn."""
    events = _claude(
        [
            {
                "type": "user",
                "timestamp": "2026-02-10T10:00:00Z",
                "message": {"role": "user", "content": "go"},
            },
            assistant("2026-02-10T10:00:03Z", "msg_A", {"type": "text", "text": "\n\n"}),
            assistant(
                "2026-02-10T10:00:40Z", "msg_A", {"type": "thinking", "thinking": "hmm", "signature": ""}
            ),
            assistant("2026-02-10T10:01:10Z", "msg_A", {"type": "text", "text": "I'll read the config."}),
            assistant(
                "2026-02-10T10:01:11Z",
                "msg_A",
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/c"}},
            ),
            {
                "type": "user",
                "timestamp": "2026-02-10T10:01:12Z",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}],
                },
            },
            assistant("2026-02-10T10:01:20Z", "msg_B", {"type": "text", "text": "Done: x is 1."}),
            assistant("2026-02-10T10:01:50Z", "msg_B", {"type": "text", "text": "Anything else?"}),
        ],
        tmp_path,
    )
    turns = feed_all(events)
    assert len(turns) == 2
    first, second = turns
    assert first.response == "msg_A" and len(first.calls) == 1 and first.has_text
    assert second.response == "msg_B" and second.text_only and second.messages == 2


def test_claude_code_separate_text_only_responses_stay_separate(tmp_path: Path):
    """Three text-only API messages in a row (no tool, no person typing) are three turns."""
    records = [
        {"type": "user", "timestamp": "2026-02-10T10:00:00Z", "message": {"role": "user", "content": "go"}}
    ]
    for n in range(3):
        records.append(
            assistant(f"2026-02-10T10:0{n + 1}:00Z", f"msg_{n}", {"type": "text", "text": f"summary {n}"})
        )
    turns = feed_all(_claude(records, tmp_path))
    assert [t.text_value() for t in turns] == ["summary 0", "summary 1", "summary 2"]


def test_response_ids_decide_which_turn_a_call_joins():
    """A call naming another response starts a new turn; one naming the same response
    joins it even after a system note ended the response (its first call still open)."""
    events = [
        ev(Kind.MESSAGE, 0, 1, role="assistant", content="Reading.", meta={"message_id": "m1"}),
        ev(Kind.TOOL_CALL, 1, 2, tool="read", args={"p": 1}, call_id="1", meta={"message_id": "m1"}),
        ev(Kind.MESSAGE, 2, 3, role="system", content="note"),
        ev(Kind.TOOL_CALL, 3, 4, tool="read", args={"p": 2}, call_id="2", meta={"message_id": "m1"}),
        ev(Kind.TOOL_CALL, 4, 5, tool="read", args={"p": 3}, call_id="3", meta={"message_id": "m2"}),
    ]
    turns = feed_all(events)
    assert [len(t.calls) for t in turns] == [2, 1]
    assert turns[0].has_text and not turns[1].has_text


#: White space of every kind (and two letters) to build texts from.
SPACES_AND_LETTERS = " \t\n\r\x0b\x1f\xa0\u2028ab"


def test_squashed_text_is_squash_ws_of_the_text_after_every_piece():
    """``BoundedText.squashed`` (made once, shared by the similarity detectors)
    is always ``squash_ws`` of the text: after each piece and after a
    message is taken back."""
    rng = random.Random(0)
    for _ in range(3000):
        text = BoundedText(40)
        for _ in range(rng.randrange(1, 4)):
            before = (text.head, text.tail, text.length)
            text.add("".join(rng.choice(SPACES_AND_LETTERS) for _ in range(rng.randrange(30))))
            assert text.squashed() == squash_ws(text.text())
            if rng.random() < 0.3:
                text.restore(before)
                assert text.squashed() == squash_ws(text.text())


def test_squashed_returns_squashed_text_itself():
    """Text with single spaces between its words is not copied (most prose)."""
    prose = "Running the tests again, then the build."
    assert squashed(prose) is prose
    for text in (" lead", "trail ", "two  spaces", "new\nline", "tab\there", "nb\xa0sp"):
        assert squashed(text) == squash_ws(text) != text


def test_no_judged_turn_outlives_the_next_event():
    """The detectors keep references, never turns: with every detector on, a
    session holds only its turn in progress: a judged turn goes, with its
    events, once the detectors have judged it."""
    engine = Engine()
    decoder = LineDecoder("t.jsonl")
    for line, record in enumerate(records(3000, sessions=3, seed=1, loop_rate=0.05), 1):
        for event in decoder.feed(orjson.dumps(record), line, now=0.0)[0]:
            engine.process(event).detections
    gc.collect()
    turns = [found for found in gc.get_objects() if found.__class__ is Turn]
    assert all(state.trackers for state in engine.sessions.values())  # turns were made
    assert len(turns) <= len(engine.sessions)  # at most each tracker's turn in progress


def test_a_handed_back_turn_keeps_its_events():
    """A completed turn is not emptied when the next event comes (nothing
    keeps it longer): its events stay readable to whoever holds it."""
    tracker = TurnTracker()
    tracker.feed(ev(Kind.TOOL_CALL, 0, 1, tool="read", args={"path": "a"}, call_id="1"))
    turn = tracker.feed(ev(Kind.TOOL_RESULT, 1, 2, content="A", call_id="1"))
    tracker.feed(ev(Kind.TOOL_CALL, 2, 3, tool="read", args={"path": "b"}, call_id="2"))
    assert turn.first is not None and [event.line for event in turn.events] == [1, 2]
