"""Fingerprint detector: loose keys, shell file reads, consecutive streaks."""

from monitor.config import build_config
from monitor.detect.analysis.signatures import PRIMARY_KEYS, fingerprint, shell_file_read
from monitor.detect.engine import Engine
from monitor.events import Event, Kind
from monitor.text import canonical_args
from tests.streams import Stream, by, run


def _call(tool, **args):
    return Event(kind=Kind.TOOL_CALL, session="s", ts=0.0, tool=tool, args=args)


def test_shell_reads_of_one_file_share_a_fingerprint():
    """cat, head, tail, less and sed -n on foo.ts all fold to bash:file_read:foo.ts."""
    prints = {
        fingerprint(_call("bash", command=c))
        for c in ("cat foo.ts", "head -n 20 foo.ts", "tail foo.ts", "less foo.ts", "sed -n '1,80p' foo.ts")
    }
    assert prints == {"bash:file_read:foo.ts"}


def test_complex_commands_are_not_folded():
    """Pipes, redirects and ';' bypass the file-read normalization."""
    for command in ("cat foo | grep x", "cat foo > bar", "cat foo; ls", "cat a b"):
        assert shell_file_read(command) is None


def test_codex_command_arrays_fold_too():
    """Codex passes ["bash", "-lc", "cat foo"]: the script is what counts."""
    assert fingerprint(_call("shell", command=["bash", "-lc", "cat foo.py"])) == "shell:file_read:foo.py"


def test_only_primary_arguments_count():
    """Optional parameters outside the primary keys do not change the fingerprint."""
    a = _call("read_file", path="a.py", encoding="utf-8")
    b = _call("read_file", path="a.py", encoding="latin-1")
    assert fingerprint(a) == fingerprint(b)


def test_fuzzy_tier_fires_at_four_reads_with_the_same_content():
    """Four reads of one file in a row through different commands, same content: fuzzy loop."""
    s = Stream()
    for command in ("cat foo.ts", "head foo.ts", "tail foo.ts", "less foo.ts"):
        s.call("bash", "export const x = 1", command=command)
    _, found = run(s)
    hits = by(found, "fingerprint")
    assert hits and hits[0].count == 4 and hits[0].pattern.startswith("fuzzy:")


def test_paging_with_moving_offset_is_not_a_loop():
    """read_file with a moving offset: offset is primary, each call differs."""
    s = Stream()
    for page in range(8):
        s.call(
            "read_file", f"lines {page * 100}..{page * 100 + 99}", path="big.py", offset=page * 100, limit=100
        )
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_shell_paging_with_changing_output_is_not_a_loop():
    """sed -n ranges over one file fold to one fingerprint, but the output moves."""
    s = Stream()
    for start in range(1, 800, 100):
        s.call("bash", f"line {start} text {start * 7}", command=f"sed -n '{start},{start + 99}p' big.py")
    _, found = run(s)
    assert not by(found, "fingerprint")


def test_another_call_in_between_breaks_the_streak():
    """Consecutive means consecutive: an interleaved different call resets it."""
    s = Stream()
    for i in range(6):
        s.call("bash", "same", command="cat a.txt")
        s.call("bash", f"step {i}", command=f"echo {i}")
    _, found = run(s)
    assert not by(found, "fingerprint")


SETTINGS = "\n".join(f"KEY_{i} = {i * 7}" for i in range(12))


def test_one_file_read_many_ways_is_a_loop_although_outputs_differ():
    """cat, head, tail, cat of one file: four different outputs, none showing a
    line the first cat did not: the fuzzy tier fires on the 4th read."""
    lines = SETTINGS.splitlines()
    s = Stream()
    s.call("Bash", SETTINGS, command="cat settings.py")
    s.call("Bash", "\n".join(lines[:5]), command="head -n 5 settings.py")
    s.call("Bash", "\n".join(lines[-5:]), command="tail -n 5 settings.py")
    s.call("Bash", SETTINGS, command="cat settings.py")
    _, found = run(s)
    hits = by(found, "fingerprint")
    assert hits and hits[0].count == 4 and hits[0].line == 7
    assert hits[0].pattern == "fuzzy:Bash:file_read:settings.py"
    assert "nothing new" in hits[0].message


def test_a_growing_log_read_through_cat_and_tail_is_progress():
    """The same file polled through cat and tail while it grows: each read shows a new line."""
    s = Stream()
    grown = []
    for i in range(8):
        grown.append(f"[{i}/8] compiling module_{i}.c")
        if i % 2:
            s.call("Bash", "\n".join(grown[-2:]), command="tail -n 2 build.log")
        else:
            s.call("Bash", "\n".join(grown), command="cat build.log")
    _, found = run(s)
    assert not by(found, "fingerprint")


def _without_exact_repeat() -> Engine:
    # The engine keeps one detection per loop: with exact_repeat on, it speaks
    # for the same streak first and the fingerprint's exact tier is dropped.
    return Engine(build_config({"detectors": {"exact_repeat": {"enabled": False}}}))


def test_exact_tier_needs_the_same_outcome():
    """Three identical calls warn as exact only while their result stays the same."""
    s = Stream()
    for _ in range(3):
        s.call("Bash", "error: missing", command="make build")
    _, found = run(s, engine=_without_exact_repeat())
    hits = by(found, "fingerprint")
    assert hits and hits[0].pattern.startswith("exact:") and hits[0].count == 3

    moving = Stream()
    for i in range(5):
        moving.call("Bash", f"{i * 20}% done", command="make build")
    _, found = run(moving, engine=_without_exact_repeat())
    assert not by(found, "fingerprint")


def test_optional_arguments_do_not_hide_a_repeat():
    """Claude's Bash description changes every time; the command and the answer do not."""
    s = Stream()
    for desc in ("Check the service", "Check again", "Look at the service status", "One more check"):
        s.call("Bash", "service: inactive (dead)", command="systemctl status app", description=desc)
    _, found = run(s)
    hits = by(found, "fingerprint")
    assert hits and hits[0].pattern.startswith("fuzzy:") and hits[0].count == 4


def test_an_unanswered_older_call_starts_the_run_over():
    """A read whose result never came cannot be judged: the streak restarts after it."""
    s = Stream()
    s.call("Bash", SETTINGS, command="cat settings.py")
    s.call("Bash", None, command="head settings.py")  # never answered
    s.call("Bash", SETTINGS, command="cat settings.py")
    s.call("Bash", "KEY_0 = 0", command="head -n 1 settings.py")
    _, found = run(s)
    assert not by(found, "fingerprint")


def test_user_turn_resets_the_streak():
    """A user message between reads starts the count again."""
    s = Stream()
    s.call("Bash", SETTINGS, command="cat settings.py").call("Bash", SETTINGS, command="cat settings.py")
    s.say("read it once more please", role="user")
    s.call("Bash", SETTINGS, command="cat settings.py").call("Bash", SETTINGS, command="cat settings.py")
    _, found = run(s)
    assert not by(found, "fingerprint")


def test_sed_with_other_options_and_absolute_programs():
    """sed -n with a script folds; sed -i (an edit) and two files do not."""
    assert shell_file_read("sed -n '10,20p' src/a.py") == "src/a.py"
    assert shell_file_read("sed -i 's/a/b/' src/a.py") is None
    assert shell_file_read("head -n 5 a.py b.py") is None
    assert shell_file_read("cd src && cat a.py") is None


def test_sleep_between_moving_polls_is_not_an_exact_repeat():
    """sleep 30 → status → sleep 30 → status …: the status moves, so the sleeps are waiting, not looping."""
    s = Stream()
    for pct in (10, 30, 50, 70, 90):
        s.call("bash", "", command="sleep 30")
        s.call("bash", f"deploy {pct}% done", command="./deploy status")
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_sleep_between_frozen_polls_is_waiting_not_a_loop():
    """The same rhythm with a status that never changes is waiting (issue 13): no repeat
    detector counts it; the waiting budget does (see test_honest_struggle)."""
    s = Stream()
    for _ in range(5):
        s.call("bash", "", command="sleep 30")
        s.call("bash", "deploy 50% done", command="./deploy status")
    _, found = run(s)
    assert not [d for d in found if d.level >= 2]


def test_frozen_polls_back_to_back_are_still_caught():
    """Without a wait between them, the same poll with the same answer is a loop."""
    s = Stream()
    for _ in range(5):
        s.call("bash", "deploy 50% done", command="./deploy status")
    _, found = run(s)
    assert [d for d in found if d.level >= 2]


def test_a_new_line_sharing_a_mark_bit_with_an_old_one_still_reads_as_new():
    """Each line sets two bits of the marks: a new poll line whose first bit
    collides with an old line's (about one poll in two hundred, with one bit)
    is still new, so an honest poll does not read as "nothing new"."""
    import zlib

    from monitor.detect.analysis.signatures import LINE_BITS, text_marks

    old = "job build-7: compiling 10% (step 1)"
    taken = zlib.crc32(old.encode()) % LINE_BITS
    new = next(
        line
        for line in (f"job build-7: linking {n}% (step 2)" for n in range(1_000_000))
        if zlib.crc32(line.encode()) % LINE_BITS == taken
    )
    assert text_marks(new) & ~text_marks(old)


def test_fingerprint_is_the_primary_arguments_key():
    cases = [
        ("read_file", {"path": "a.py"}),
        ("grep", {"pattern": "x", "path": "src", "flags": "-i"}),
        ("bash", {"command": "pytest -q", "description": "run"}),
        ("tool", {"a": 1}),
        (None, {"path": "p"}),
        ("", {}),
        ("edit", {"path": "a", "old": "x", "new": "y"}),
    ]
    for tool, args in cases:
        event = Event(Kind.TOOL_CALL, "s", 0.0, tool=tool, args=args)
        primary = {k: args[k] for k in PRIMARY_KEYS if k in args}
        assert fingerprint(event) == f"{tool or '?'}:{canonical_args(primary or args)}"
