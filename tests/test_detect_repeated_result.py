"""Repeated-results detector: different calls, same error."""

from tests.streams import Stream, by, run

TRACE = ("Traceback (most recent call last):\n  File \"/app/main.py\", line {n}, in <module>\n"
         "ModuleNotFoundError: No module named 'requests'")


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
        s.call("edit_file", "The file /app/a.py has been updated successfully.", path="/app/a.py", old=f"x{i}", new=f"y{i}")
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
