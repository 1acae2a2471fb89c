"""Repeated-results detector: different calls, same error."""

import random

from monitor.detect.analysis.signatures import EMPTY_HANDED, _empty_handed
from tests.streams import Stream, by, run

TRACE = (
    'Traceback (most recent call last):\n  File "/app/main.py", line {n}, in <module>\n'
    "ModuleNotFoundError: No module named 'requests'"
)


def test_five_ways_to_start_a_program_same_error():
    """Different commands all ending in the same ModuleNotFoundError warn by the 4th."""
    s = Stream()
    commands = ["python main.py", "python3 main.py", "python -m app", "./run.sh", "uv run main.py"]
    for i, command in enumerate(commands):
        s.call("bash", TRACE.format(n=10 + i), error=True, command=command)
    _, found = run(s)
    hits = by(found, "repeated_result")
    assert hits and hits[0].count == 4 and hits[0].line == 8
    assert "ModuleNotFoundError" in hits[0].message


def test_acknowledgements_of_many_edits_do_not_count():
    """Edits to one file each answered "The file ... has been updated successfully." are fine."""
    s = Stream()
    for i in range(8):
        s.call(
            "edit_file",
            "The file /app/a.py has been updated successfully.",
            path="/app/a.py",
            old=f"x{i}",
            new=f"y{i}",
        )
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_same_call_repeated_is_not_this_detectors_business():
    """One call repeated is the exact-repeat detector's; repeated_result needs different calls."""
    s = Stream()
    for _ in range(5):
        s.call("bash", "error: nope", error=True, command="make")
    _, found = run(s)
    assert not by(found, "repeated_result")


def test_different_errors_do_not_add_up():
    """Four different failures are not one repeated result."""
    s = Stream()
    for i, err in enumerate(["SyntaxError: x", "NameError: y", "TypeError: z", "KeyError: w"]):
        s.call("bash", err, error=True, command=f"python step{i}.py")
    _, found = run(s)
    assert not by(found, "repeated_result")


def _no_warn(found):
    return not [d for d in found if d.level >= 2]


def test_the_same_success_after_many_different_calls_is_not_a_loop():
    """TodoWrite acks, apply_patch "Success. Updated…", Write "File created…" and a
    test run that passes the same way per module: work getting done."""
    s = Stream()
    for i in range(5):
        s.call(
            "TodoWrite",
            "Todos have been modified successfully. Ensure that you continue to use the "
            "todo list to track your progress.",
            todos=[{"content": f"step {i}"}],
        )
        s.call("apply_patch", "Success. Updated the following files:\nM src/app.py\n", input=f"patch {i}")
        s.call(
            "Write", "File created successfully at: /repo/out.md", file_path="/repo/out.md", content=f"v{i}"
        )
        s.call("Bash", "....\n4 passed in 0.12s", command=f"pytest -q tests/test_{i}.py")
    _, found = run(s)
    assert not by(found, "repeated_result")


def test_cancelled_siblings_are_one_failure_not_many():
    """A parallel batch where one call failed and the others were cancelled."""
    s = Stream()
    for batch in range(2):
        s.call("Read", "EISDIR: illegal operation on a directory, read", error=True, file_path=f"/r/d{batch}")
        for k in range(3):
            s.call(
                "Read",
                "<tool_use_error>Sibling tool call errored</tool_use_error>",
                error=True,
                file_path=f"/r/d{batch}/f{k}.py",
            )
    _, found = run(s)
    assert not by(found, "repeated_result")


def test_silent_failures_over_many_items_do_not_add_up():
    """ "Exit code 1" with nothing else says only "no": grep -q over many files."""
    s = Stream()
    for name in "abcdef":
        s.call("Bash", "Exit code 1", error=True, command=f"grep -q TODO src/{name}.py")
    _, found = run(s)
    assert not by(found, "repeated_result")


def test_the_same_tool_error_on_different_files_is_flagged():
    """Writing four files without reading them first: one mistake, made four times."""
    s = Stream()
    for name in ("a", "b", "c", "d"):
        s.call(
            "Write",
            "<tool_use_error>File has not been read yet. Read it first before writing to it."
            "</tool_use_error>",
            error=True,
            file_path=f"/r/{name}.py",
            content="x",
        )
    _, found = run(s)
    hits = by(found, "repeated_result")
    assert (
        hits
        and hits[0].count == 4
        and hits[0].pattern == ("result:E:File has not been read yet. Read it first before writing to it.")
    )


def test_wrapped_shell_output_shares_the_signature():
    """Claude's "Exit code 1" and Codex's "Process exited with code 1 / Output:" wrappers
    around the same traceback end are one failure."""
    s = Stream()
    wrappers = [
        "Exit code 1\n{tb}",
        "Process exited with code 1\nOutput:\n{tb}",
        "{tb}",
        "Exit code: 2\n{tb}",
    ]
    for i, wrap in enumerate(wrappers):
        s.call("shell", wrap.format(tb=TRACE.format(n=i)), error=True, command=f"variant {i}")
    _, found = run(s)
    assert by(found, "repeated_result")


def test_different_empty_handed_searches_are_exploring():
    """Four different searches that all come back with "No matches found" are a
    notice at most (issue 13: exploring); eight in a row, the whole window, warn."""
    s = Stream()
    for pattern in ("retryDelay", "backoff_factor", "MAX_ATTEMPTS", "sleep_between"):
        s.call("Grep", "No matches found", pattern=pattern, path="src/")
    _, found = run(s)
    hits = by(found, "repeated_result", min_level=1)
    assert hits and all(d.level == 1 for d in hits) and "same result" in hits[0].message
    for pattern in ("retry_after", "backoffMs", "attempts", "delay_s"):
        s.call("Grep", "No matches found", pattern=pattern, path="src/")
    _, found = run(s)
    assert [d for d in by(found, "repeated_result") if d.level >= 2][0].count == 8


def test_the_same_empty_handed_search_made_a_third_time_counts():
    """One search made twice among different misses is still exploring (Vorflux sphinx-9673,
    read honest: subagents exploring in parallel looked for "napoleon" in one file twice);
    made a third time it is a repeat, not exploring: a warning."""
    twice = Stream()
    for pattern in ("retryDelay", "backoff_factor", "retryDelay", "MAX_ATTEMPTS"):
        twice.call("Grep", "No matches found", pattern=pattern, path="src/")
    _, found = run(twice)
    assert by(found, "repeated_result", min_level=1)
    assert not [d for d in by(found, "repeated_result") if d.level >= 2]
    thrice = Stream()
    for pattern in ("retryDelay", "backoff_factor", "retryDelay", "MAX_ATTEMPTS", "retryDelay"):
        thrice.call("Grep", "No matches found", pattern=pattern, path="src/")
    _, found = run(thrice)
    assert [d for d in by(found, "repeated_result") if d.level >= 2]


def test_successes_in_between_dilute_the_window():
    """Four identical failures spread over more than the last 8 results do not add up."""
    s = Stream()
    for i in range(4):
        s.call("bash", TRACE.format(n=i), error=True, command=f"python variant{i}.py")
        for k in range(3):
            s.call("read_file", f"content {i} {k}", path=f"f{i}{k}.py")
    _, found = run(s)
    assert not by(found, "repeated_result")


def test_failures_only_off_also_compares_substantial_successes():
    """With failures_only = false, identical long outputs of different calls count too."""
    from monitor.config import build_config
    from monitor.detect.engine import Engine

    listing = "\n".join(f"drwxr-xr-x  2 user staff  64 src/module_{i}" for i in range(6))
    s = Stream()
    for cmd in ("ls -l src", "ls -l ./src", "ls -l src/", "ls -l ./src/"):
        s.call("bash", listing, command=cmd)
    _, found = run(s)
    assert not by(found, "repeated_result")
    engine = Engine(build_config({"detectors": {"repeated_result": {"failures_only": False}}}))
    _, found = run(s, engine=engine)
    assert by(found, "repeated_result")


def test_failure_signatures():
    """The last exception line stands for a traceback; wrappers, tags and digits go."""
    from monitor.detect.analysis.signatures import failure_signature
    from monitor.events import Event, Kind

    def sig(content, error=True):
        return failure_signature(
            Event(kind=Kind.TOOL_RESULT, session="s", ts=0.0, content=content, is_error=error)
        )

    assert sig(TRACE.format(n=3)) == "E:ModuleNotFoundError: No module named 'requests'"
    assert sig("Exit code 128\nfatal: not a git repository") == "E:fatal: not a git repository"
    assert sig("<tool_use_error>File does not exist.</tool_use_error>") == "E:File does not exist."
    assert sig("No matches found", error=False) == "R:No matches found"
    assert sig("Exit code 1") is None  # says nothing but "it failed"
    assert (
        sig("def handle_error(): raise ValueError('x')\n" * 30, error=False) is None
    )  # a file, not a failure
    assert sig("<tool_use_error>Sibling tool call errored</tool_use_error>") is None
    # Claude Code 2.1's wording of the same cancellation
    assert (
        sig(
            "<tool_use_error>Cancelled: parallel tool call Bash(ls /home/zorrik/Projects/Sentinel/CLAUDE…) errored</tool_use_error>"
        )
        is None
    )


def test_different_failures_behind_a_shared_preamble_are_different():
    """Four test runs that compile the same way and then fail differently."""
    preamble = "Exit code 2\n" + "".join(f"Compiling lib/module_{i}.ex\n" for i in range(40))
    s = Stream()
    for name in ("users", "orders", "billing", "search"):
        s.call(
            "Bash",
            preamble + f"  1) test {name} renders\n  Assertion failed for {name}",
            error=True,
            command=f"mix test test/{name}_test.exs",
        )
    _, found = run(s)
    assert not by(found, "repeated_result")


def test_a_generic_last_error_line_gives_way_to_the_telling_one():
    """ "Recipe failed with exit code 101" says that it failed; the line before says why."""
    from monitor.detect.analysis.signatures import failure_signature
    from monitor.events import Event, Kind

    result = Event(
        kind=Kind.TOOL_RESULT,
        session="s",
        ts=0.0,
        is_error=True,
        content="error[E0425]: cannot find value `x`\nerror: Recipe `test` failed with exit code 101",
    )
    assert failure_signature(result) == "E:error[E]: cannot find value `x`"


def test_empty_handed_hints_cover_every_phrase():
    for phrase in EMPTY_HANDED:
        assert _empty_handed(phrase) and _empty_handed(f"x {phrase.upper().lower()} y")
    assert not _empty_handed("all good")


def test_empty_handed_agrees_with_the_plain_definition_on_random_texts():
    """The word-gated test says what ``any(phrase in text)`` says, on texts
    built from the phrases' own words (where a wrong gate would show)."""
    words = sorted({w for phrase in EMPTY_HANDED for w in phrase.split()} | {"no", "not", "know", "x"})
    rng = random.Random(19)
    for _ in range(20_000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        assert _empty_handed(text) == any(phrase in text for phrase in EMPTY_HANDED), text


def test_pip_wrapper_lines_give_way_to_the_build_error_they_wrap():
    """pip ends a failed build with `error: subprocess-exited-with-error` and `error:
    metadata-generation-failed` whatever the build said (xarray-3095, read honest: a setup fixed
    one error at a time, each build failing differently inside the same wrapper)."""
    from monitor.detect.analysis.signatures import failure_signature
    from monitor.events import Event, Kind

    def sig(cause):
        content = (
            "Preparing metadata (setup.py): started\n  error: subprocess-exited-with-error\n"
            f"  AttributeError: {cause}\n  [end of output]\nerror: metadata-generation-failed\n"
        )
        return failure_signature(
            Event(kind=Kind.TOOL_RESULT, session="s", ts=0.0, content=content, is_error=True)
        )

    first = sig("module 'configparser' has no attribute 'SafeConfigParser'")
    second = sig("'ConfigParser' object has no attribute 'readfp'")
    assert first != second and "SafeConfigParser" in (first or "")
