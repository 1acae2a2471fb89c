"""Where a search looks (analysis/places.place_of): one file, or nowhere in particular."""

from __future__ import annotations

from monitor.detect.analysis.places import place_of
from monitor.events import Event, Kind


def call(**args) -> Event:
    return Event(kind=Kind.TOOL_CALL, session="s", ts=0.0, tool="grep_search", args=args)


def test_one_file_is_a_place_whatever_the_term_and_the_output_options():
    first = place_of(
        call(dirPath="/repo", glob="sphinx/domains/cpp.py", pattern="parse_expression", headLimit=120)
    )
    second = place_of(
        call(dirPath="/repo", glob="sphinx/domains/cpp.py", pattern="Expression", C=3, headLimit=200)
    )
    assert first is not None and first == second


def test_another_file_is_another_place():
    assert place_of(call(glob="a/x.py", pattern="p")) != place_of(call(glob="a/y.py", pattern="p"))


def test_directories_globs_and_bare_queries_have_no_place():
    assert place_of(call(path="uploader/", pattern="max_retries")) is None
    assert place_of(call(dirPath="/repo", glob="src/**/*.py", pattern="x")) is None
    assert place_of(call(query="kotlin data classes")) is None
    assert (
        place_of(
            Event(kind=Kind.TOOL_CALL, session="s", ts=0.0, tool="bash", args={"command": "grep x f.py"})
        )
        is None
    )
