"""Similar-arguments detector: small spelling variations, same informative result."""

from monitor.detect.fingerprints import arg_similarity
from tests.streams import Stream, by, run


def test_design_note_grep_variants_are_flagged():
    """grep fooBar → foobar → foo_bar, all "No matches", warns on the third try."""
    s = Stream()
    for pattern in ("fooBar", "foobar", "foo_bar"):
        s.call("grep", "No matches found", pattern=pattern, path="src/")
    _, found = run(s)
    hits = by(found, "similar_args")
    assert hits and hits[0].count == 3 and hits[0].line == 5


def test_one_command_over_many_items_with_empty_output_is_not_flagged():
    """git add a, b, c… all succeed silently: acknowledgements are not outcomes."""
    s = Stream()
    for name in "abcdefgh":
        s.call("bash", "", command=f"git add src/{name}.py")
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_variants_with_different_results_are_exploration():
    """Similar queries that find different things are progress."""
    s = Stream()
    for i, pattern in enumerate(("fooBar", "foobar", "foo_bar", "foo-bar")):
        s.call("grep", f"{i} matches in file{i}.py", pattern=pattern, path="src/")
    _, found = run(s)
    assert not by(found, "similar_args")


def test_dissimilar_arguments_break_the_chain():
    """A very different argument starts a new chain."""
    s = Stream()
    for pattern in ("fooBar", "completely different query", "foo_bar"):
        s.call("grep", "No matches found", pattern=pattern)
    _, found = run(s)
    assert not by(found, "similar_args")


def test_argument_similarity_follows_design_note():
    """Strings by normalized Levenshtein, objects field by field, lists element-wise."""
    assert arg_similarity("ls", "ls") == 1.0
    assert 0.8 <= arg_similarity("grep fooBar src", "grep foobar src") < 1.0
    assert arg_similarity({"a": "x", "b": "y"}, {"a": "x", "b": "zzz"}) == 0.5
    assert arg_similarity([1, 2], [1, 2, 3]) == 0.0
