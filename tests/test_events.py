"""The event model: its facts, and the lazy ``EventRef``.

``EventRef.of`` keeps a bounded snapshot and writes the summary when it is
read; whatever the event, that summary (and ``to_dict()``) must be exactly
what ``Event.summary()`` gives.
"""

from __future__ import annotations

import gc
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.events import (
    COMPACTION,
    MESSAGE,
    SESSION_END,
    SESSION_START,
    TOOL_CALL,
    TOOL_RESULT,
    UNKNOWN,
    USAGE,
    WAITING,
    Event,
    EventRef,
    Kind,
    call_snapshot,
)
from monitor.text import call_key
from tests.footprint import deep_size

MB = 1024 * 1024


def test_each_event_has_its_own_facts():
    made = Event(Kind.TOOL_CALL, "s", 1.5)
    other = Event(Kind.TOOL_CALL, "s", 1.5)
    assert made.facts is not other.facts and made == other
    assert made.facts.call_key is None and made.facts.shell_command is UNKNOWN


def test_kind_constants_are_the_members():
    assert (SESSION_START, MESSAGE, TOOL_CALL, TOOL_RESULT, USAGE, COMPACTION, SESSION_END, WAITING) == tuple(
        Kind
    )
    assert all(constant is Kind(constant.value) for constant in Kind)


def test_every_white_space_but_the_space_is_unprintable():
    """What ``_head`` relies on to count a text's non-space characters cheaply."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if char.isspace() and char != " ":
            assert not char.isprintable(), hex(code)


def eager(event: Event) -> EventRef:
    return EventRef(event.seq, event.kind.value, event.source, event.line, event.summary())


def check(event: Event) -> EventRef | None:
    try:
        want = eager(event)
    except Exception as exc:  # e.g. an integer JSON cannot hold: the same error, as early
        with pytest.raises(type(exc)):
            EventRef.of(event)
        return None
    lazy = EventRef.of(event)
    assert lazy.summary == want.summary
    assert lazy.to_dict() == want.to_dict()
    assert lazy == want and hash(lazy) == hash(want) and repr(lazy) == repr(want)
    return lazy


def event(kind: Kind, **fields) -> Event:
    made = Event(kind, "s", 1.0, "/logs/s.jsonl", 7, **fields)
    made.seq = 42
    return made


def call(args, tool="bash"):
    return event(Kind.TOOL_CALL, tool=tool, args=args)


WORDS = "the quick brown fox jumps over the lazy dog " * 40
TEXTS = [
    "",
    "ok",
    "a.txt\nb.txt\n",
    WORDS,
    WORDS[:129],
    WORDS[:127],
    "x" * 5000,
    " " * 5000,
    "\n" * 3000 + "late",
    "\t".join(["col"] * 400),
    "a \u3000 b " * 300,
    "caf\u00e9 na\u00efve " * 100,
    "\x00\x01 ctl " * 200,
    "   leading and trailing   " * 50,
    "word\n\n\n" * 200,
    "\u2028line\u2029para " * 100,
    "y" * 127 + " " * 40 + "z" * 200,
    " " * 60 + "x" * 100 + " tail",
]


def test_results_and_messages():
    for text in TEXTS:
        for is_error in (False, True):
            check(event(Kind.TOOL_RESULT, content=text, is_error=is_error))
        for role in ("user", "assistant", None, "r" * 500):
            check(event(Kind.MESSAGE, role=role, content=text))


def test_calls_with_small_huge_and_nested_args():
    nested = {"a": [1, 2.5, None, True, {"b": "c" * 700}], "d": {"e": [[[]]]}}
    many = {f"k{i}": i for i in range(10_000)}
    for args in [
        None,
        {},
        {"command": "ls -la"},
        {"path": "app/x.py", "line": 3},
        {"command": "x" * MB},
        {"command": WORDS},
        {"command": " " * 600 + "x"},
        {"text": "\t" * 100 + "y" * 200},
        nested,
        many,
        {"k" * 200: 1, "k" * 201: 2},
        {"": ""},
        {"a": "", "b": "", "c": ""},
        {"data": list(range(300_000))},
        {"data": ["z" * 1000] * 1000},
        {"data": {"k" * 600: 1}},
        {"data": [{"x": "é" * 600}]},
        {"deep": [[[[[[[[[["leaf"]]]]]]]]]]},
        {"t": (1, 2, "three")},
        {chr(97 + i): str(i) for i in range(20)},
        {f"k{i}": "" for i in range(30)},
        {"": "" for _ in range(1)},
        {f"{i}": " " * i for i in range(25)},
        {1: "int key"},
        {"f": float("nan"), "g": float("inf")},
        {"big": 2**70},
        {"when": object},
    ]:
        check(call(args))
    check(call({"command": "ls"}, tool=None))
    check(call({"command": "ls"}, tool="t" * 2000))


def test_other_kinds():
    check(event(Kind.USAGE, input_tokens=10, output_tokens=20, cost_usd=0.5))
    check(event(Kind.USAGE))
    check(event(Kind.SESSION_START, agent="claude"))
    check(event(Kind.SESSION_START, agent="a" * MB))
    check(event(Kind.SESSION_START))
    check(event(Kind.SESSION_END, status="done"))
    check(event(Kind.SESSION_END, status="s" * MB))
    check(event(Kind.SESSION_END))
    check(event(Kind.COMPACTION))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=10)
    | st.builds(lambda c, n: c * n, st.sampled_from(["a", " ", "é\n", '"']), st.integers(0, 700))
    | st.builds(lambda n: list(range(n)), st.integers(0, 400)),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=30), inner, max_size=6),
    max_leaves=20,
)
texts = st.text(alphabet=st.sampled_from("ab c\n\t\u3000\u00a0é\x1f"), max_size=900)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=90), json_values, max_size=12))
def test_any_json_args(args):
    check(call(args))


@settings(max_examples=300, deadline=None)
@given(texts, st.booleans())
def test_any_text(text, is_error):
    check(event(Kind.TOOL_RESULT, content=text, is_error=is_error))
    check(event(Kind.MESSAGE, role="assistant", content=text))
    check(call({"command": text}))


def test_a_ref_holds_little_and_never_the_event():
    """Not counting what all of a session's refs share (file name, type names,
    tool names and argument keys, which are the same objects), nor ``seq``
    and ``line``, which the event has too."""
    for made in [
        event(Kind.TOOL_RESULT, content=WORDS * 100),
        event(Kind.MESSAGE, role="assistant", content=WORDS * 3000),
        call({"command": "pytest -x tests/test_app.py"}),
        call({"command": WORDS * 100, "cwd": "/repo"}),
        call({"data": list(range(100_000))}),
    ]:
        shared = [made.source, made.kind.value, made.tool, made.seq, made.line, *(made.args or ())]
        ref = EventRef.of(made)
        assert made not in gc.get_referents(ref)
        assert deep_size(ref, exclude=shared) <= 300, made.kind
        ref.summary  # once written, only the summary is kept (an 80-character one is 234 bytes)
        assert deep_size(ref, exclude=shared) <= 320
    # Only the arguments that can show: a few of a thousand.
    many = call({f"key{i}": "v" * 50 for i in range(1000)})
    assert deep_size(EventRef.of(many), exclude=[many.tool, many.seq, many.line, *many.args]) <= 600


def test_refs_compare_and_hash_by_value():
    first = EventRef.of(call({"command": "ls"}))
    second = EventRef.of(call({"command": "ls"}))
    given_summary = EventRef(42, "tool_call", "/logs/s.jsonl", 7, "bash(command=ls)")
    assert first == second == given_summary
    assert len({first, second, given_summary}) == 1
    assert first != EventRef(43, "tool_call", "/logs/s.jsonl", 7, "bash(command=ls)")
    assert first != ("bash(command=ls)",)
    assert given_summary.to_dict() == {
        "seq": 42,
        "kind": "tool_call",
        "file": "/logs/s.jsonl",
        "line": 7,
        "summary": "bash(command=ls)",
    }


def keyed(made: Event) -> Event:
    """``made`` with its call key computed first, as the call detectors do:
    then ``EventRef.of`` keeps small arguments whole."""
    call_key(made)  # (never raises: odd arguments get their repr)
    return made


def test_calls_with_their_key_computed_first():
    for args in [
        None,
        {},
        {"command": "ls -la"},
        {"path": "app/x.py", "line": 3},
        {"command": "x" * MB},
        {"command": "a  b"},
        {"id": "c1", "command": "ls"},
        {"path": "b", "old": "x", "new": "y"},
        {"d": {"z": 1, "a": [{"y": 2, "b": 3}]}},
        {"t": (1, 2, "three")},
        {"f": float("nan"), "g": -0.0},
        {"big": 2**70},
        {1: "int key"},
        {"when": object},
        {"e": "é\u2028x"},
        {"k" * 300: 1},
    ]:
        check(keyed(call(args)))
    check(keyed(call({"command": "ls"}, tool=None)))
    check(keyed(call({"command": "ls"}, tool="t" * 2000)))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=90), json_values, max_size=12))
def test_any_json_args_with_their_key(args):
    check(keyed(call(args)))


def test_a_ref_of_a_keyed_call_holds_little():
    for made in [
        call({"command": "pytest -x tests/test_app.py"}),
        call({"command": WORDS * 100, "cwd": "/repo"}),
        call({"command": "a" + " " * 100_000 + "b"}),  # a short key, but rewritten
        call({"id": "x" * 100_000, "command": "ls"}),
        call({"data": list(range(100_000))}),
    ]:
        shared = [made.source, made.kind.value, made.tool, made.seq, made.line, *(made.args or ())]
        ref = EventRef.of(keyed(made))
        assert made not in gc.get_referents(ref)
        assert deep_size(ref, exclude=shared) <= 300


def test_a_keyed_call_of_one_argument_snapshots_it_as_the_general_path_does():
    """The one-argument shortcut of ``call_snapshot`` builds the tuple the
    general ``(tool, *keys, *values)`` does, and the summary from it is the event's."""
    for args in [
        {"path": "app/x.py"},
        {"command": "ls -la"},
        {"n": 3},
        {"": ""},
        {"flag": None},
        {"k": [1, 2]},
    ]:
        made = keyed(call(args, tool="read_file"))
        assert call_snapshot(made) == ("read_file", *args, *args.values())
        check(made)
