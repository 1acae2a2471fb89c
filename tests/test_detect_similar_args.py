"""Similar-arguments detector: small spelling variations, same informative result."""

from monitor.detect.analysis.signatures import arg_similarity, varies_only_in_items
from monitor.events import Level
from tests.eventkit import Script, only
from tests.streams import Stream, by, run


def test_design_note_grep_variants_are_flagged():
    """grep fooBar → foobar → foo_bar, all "No matches", warns when the third try's result is back."""
    s = Stream()
    for pattern in ("fooBar", "foobar", "foo_bar"):
        s.call("grep", "No matches found", pattern=pattern, path="src/")
    _, found = run(s)
    hits = by(found, "similar_args")
    assert hits and hits[0].count == 3 and hits[0].line == 6


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


def test_claude_bash_greps_with_descriptions_and_silent_failures():
    """Claude's Bash carries a free-text description; only the command is compared,
    and "Exit code 1" (grep found nothing) is the same failure each time."""
    s = Stream()
    for term, desc in (("parseConfig", "Find it"), ("parse_config", "Snake case"), ("ParseConfig", "Class")):
        s.call("Bash", "Exit code 1", error=True, command=f"grep -rn {term} src/", description=desc)
    _, found = run(s)
    hits = by(found, "similar_args")
    assert hits and hits[0].count == 3 and hits[0].line == 6


def test_one_command_over_many_files_failing_silently_is_not_a_retry():
    """grep -q over a.py, b.py, c.py… differs only in the file: items, not retries."""
    s = Stream()
    for name in "abcdef":
        s.call("Bash", "Exit code 1", error=True, command=f"grep -q TODO src/{name}.py")
    _, found = run(s)
    assert not by(found, "similar_args")


def test_the_same_test_command_over_modules_with_the_same_success_is_not_flagged():
    """pytest tests/test_a.py, test_b.py… all "4 passed": a success is an answer."""
    s = Stream()
    for name in "abcdef":
        s.call("Bash", "....\n4 passed in 0.12s", command=f"pytest -q tests/test_{name}.py")
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_todo_list_updates_are_not_retries():
    """TodoWrite with a slowly changing list, always the same acknowledgement."""
    s = Stream()
    steps = ["model", "migration", "endpoint", "tests", "docs"]
    for i in range(5):
        todos = [{"content": t, "status": "completed" if j < i else "pending"} for j, t in enumerate(steps)]
        s.call(
            "TodoWrite",
            "Todos have been modified successfully. Ensure that you continue to use "
            "the todo list to track your progress.",
            todos=todos,
        )
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_a_variant_that_succeeds_ends_the_retry_story():
    """Two misses, then a hit, then more variants: the third try found it, so
    there was no loop to warn about (it is judged by its result, not guessed
    from the two before), and the hit resets the streak (issue 31)."""
    s = Stream()
    s.call("grep", "No matches found", pattern="fooBar", path="src/")
    s.call("grep", "No matches found", pattern="foobar", path="src/")
    s.call("grep", "src/a.py:3: foo_bar = 1", pattern="foo_bar", path="src/")
    s.call("grep", "No matches found", pattern="foo_baz", path="src/")
    s.call("grep", "No matches found", pattern="foo_bax", path="src/")
    _, found = run(s)
    assert by(found, "similar_args") == []
    s.call("grep", "No matches found", pattern="foo_bay", path="src/")
    _, found = run(s)
    assert [d.count for d in by(found, "similar_args")] == [3]


def test_another_tools_chain_is_not_blocked_by_an_open_one():
    """A grep chain in progress does not stop a Bash chain from forming in between."""
    s = Stream()
    s.call("grep", "No matches found", pattern="fooBar")
    for cmd in ("npm run buld", "npm run biuld", "npm run bulid"):
        s.call("Bash", 'npm ERR! Missing script: "build"', error=True, command=cmd)
    _, found = run(s)
    hits = by(found, "similar_args")
    assert hits and hits[0].tool == "Bash" and hits[0].count == 3


def test_variants_still_running_are_not_yet_evidence():
    """Three variants sent at once: no result is known, nothing to compare yet."""
    s = Stream()
    for pattern in ("fooBar", "foobar", "foo_bar"):
        s.call("grep", None, pattern=pattern, path="src/")
    _, found = run(s)
    assert not by(found, "similar_args")


def test_similar_failures_count_as_the_same():
    """Errors that differ only in the misspelled name are one failure repeated."""
    s = Stream()
    for name in ("reqests", "requets", "requsts"):
        s.call(
            "Bash",
            f"ModuleNotFoundError: No module named '{name}'",
            error=True,
            command=f"python -c 'import {name}'",
        )
    _, found = run(s)
    assert by(found, "similar_args")


def test_items_and_retries_are_told_apart():
    """Paths, file names, URLs and numbers are items; a changed word is a retry."""
    assert varies_only_in_items({"command": "git add src/a.py"}, {"command": "git add src/b.py"})
    assert varies_only_in_items({"command": "sleep 5"}, {"command": "sleep 10"})
    assert varies_only_in_items({"file_path": "/r/a.py"}, {"file_path": "/r/b.py"})
    assert varies_only_in_items({"url": "https://x.io/p/1"}, {"url": "https://x.io/p/2"})
    assert not varies_only_in_items({"command": "grep -rn fooBar src"}, {"command": "grep -rn foobar src"})
    assert not varies_only_in_items(
        {"pattern": "fooBar", "path": "src"}, {"pattern": "foobar", "path": "src"}
    )
    assert not varies_only_in_items({"command": "ls"}, {"command": "ls -la"})
    # URLs, host names and dotted module names inside a command are items too
    assert varies_only_in_items(
        {"command": "curl -sS --max-time 2 http://host0.internal/health"},
        {"command": "curl -sS --max-time 2 http://host1.internal/health"},
    )
    assert varies_only_in_items(
        {"command": "ping -c 1 db-3.internal"}, {"command": "ping -c 1 db-4.internal"}
    )
    assert varies_only_in_items(
        {"command": "python -m pytest tests.test_api"}, {"command": "python -m pytest tests.test_auth"}
    )
    assert not varies_only_in_items(
        {"command": "curl http://host0.internal/health"}, {"command": "wget http://host0.internal/health"}
    )


def test_a_long_retry_loop_keeps_one_pattern_and_climbs_the_ladder():
    """Twelve spellings, all missing: one pattern, count rising, level escalating."""
    s = Stream()
    for i in range(12):
        s.call("grep", "No matches found", pattern=f"requestHandler{'ABCDEFGHIJKL'[i]}", path="src/")
    _, found = run(s)
    hits = by(found, "similar_args")
    assert len({d.pattern for d in hits}) == 1
    assert [d.count for d in hits][:3] == [3, 4, 5]
    assert hits[-1].level > hits[0].level


def test_one_search_over_many_directories_is_no_retry():
    """The same pattern searched in one directory after another, each failing (the directory is not
    there), is one search over many places -- also when a flag is added on the way (issue 31)."""
    s = Script()
    base = {"pattern": "__file__", "outputMode": "content", "-n": True}
    for n, where in enumerate(
        ("/code/django/db/migrations", "/code/django/core/management", "/code/django/utils")
    ):
        args = dict(base, dirPath=where, **({"-C": 10} if n == 2 else {}))
        s.call("grep_search", args, "Error: ripgrep command failed: exit status 2", is_error=True)
    assert not [d for d in s.run(only("similar_args")) if d.detector == "similar_args"]


def test_calls_made_before_any_of_their_results_are_one_attempt():
    """A log without reply ids (native, a Codex rollout before this was known): twelve
    edits made one after another before any result came back are one reply's parallel
    calls, one attempt the agent could not correct between, so nothing warns; the same
    twelve each after the last refusal are a loop."""

    def edits(parallel: bool) -> Script:
        s = Script()
        s.user("apply the review")
        for i in range(12):
            args = {"file_path": "/notes/draft.md", "old_string": f"line {i}", "new_string": f"line {i}!"}
            s.call("Edit", args, "File does not exist.", is_error=True, answer=not parallel)
        if parallel:
            for call in [r for r in s.records if r["type"] == "tool_call"]:
                s.add(
                    {
                        "type": "tool_result",
                        "id": call["id"],
                        "content": "File does not exist.",
                        "is_error": True,
                    }
                )
        return s

    assert not [d for d in edits(parallel=True).run() if d.level >= Level.WARN]
    assert [d for d in edits(parallel=False).run() if d.level >= Level.WARN]
