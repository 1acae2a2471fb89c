"""Fingerprint detector: loose keys, shell file reads, consecutive streaks."""

from monitor.detect.fingerprints import fingerprint, shell_file_read
from monitor.events import Event, Kind
from tests.streams import Stream, by, run


def _call(tool, **args):
    return Event(kind=Kind.TOOL_CALL, session="s", ts=0.0, tool=tool, args=args)


def test_shell_reads_of_one_file_share_a_fingerprint():
    """cat, head, tail, less and sed -n on foo.ts all fold to bash:file_read:foo.ts."""
    prints = {fingerprint(_call("bash", command=c)) for c in
              ("cat foo.ts", "head -n 20 foo.ts", "tail foo.ts", "less foo.ts", "sed -n '1,80p' foo.ts")}
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
        s.call("read_file", f"lines {page * 100}..{page * 100 + 99}", path="big.py", offset=page * 100, limit=100)
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
