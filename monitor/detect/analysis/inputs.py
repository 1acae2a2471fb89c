"""What a call reads, runs and writes: for telling a repeat from a new call.

``python fix.py`` after ``cat > fix.py << 'EOF'`` wrote a different script,
``sed -n '319,340p' models.py`` after a ``sed -i`` on that file, a test script
re-run after edits: the command is the same, its inputs are not, so it is a
new call, not a repeat (issue 13).  :func:`call_io` says, for one call:

* ``writes`` -- the base names of the files it writes (a tuple of their
  hashes: records keep it) (redirect targets,
  ``tee``, ``sed -i``/``perl -i`` operands, the target of ``cp``/``mv``,
  heredocs, an edit tool's path);
* ``blind`` -- it may write files it does not name (``patch``, ``git apply``,
  ``git checkout``, running a program or script);
* ``broad`` -- its result depends on more than the files it names (it runs
  code, a test suite, ``git diff``): any write since its last run changes it;
* ``reads`` -- the base names of the files it names (hashes).

Bounded: the command is looked at up to 4,000 characters, once per call.
"""

from __future__ import annotations

import re
from typing import Any

from monitor.detect.analysis import shell
from monitor.detect.analysis.memo import TextMemo
from monitor.events import Event

_PATH_KEYS = ("path", "file_path", "filename", "notebook_path")
_REDIRECT_TARGET = re.compile(r"(?<![0-9&<])>{1,2}\s*([^\s&|;<>()]+)")
#: Programs that run code: what they print depends on files they do not name.
_RUNS = frozenset(
    {
        "python",
        "python3",
        "python2",
        "py",
        "pytest",
        "node",
        "deno",
        "bun",
        "ruby",
        "perl",
        "php",
        "go",
        "cargo",
        "make",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "tox",
        "nox",
        "java",
        "mvn",
        "gradle",
        "bash",
        "sh",
        "zsh",
        "dotnet",
        "swift",
        "rustc",
        "gcc",
        "cc",
        "clang",
        "g++",
        "julia",
        "Rscript",
        "uv",
        "poetry",
    }
)
#: git subcommands that write the working tree without naming every file.
#: Programs whose output depends only on the files they name (or nothing).
_PURE = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "nl",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "sed",
        "awk",
        "diff",
        "cmp",
        "ls",
        "find",
        "stat",
        "file",
        "tree",
        "echo",
        "printf",
        "cd",
        "pwd",
        "which",
        "type",
        "test",
        "[",
        "sort",
        "uniq",
        "cut",
        "tr",
        "xxd",
        "od",
        "md5sum",
        "sha256sum",
        "sleep",
        "true",
        "false",
        "date",
        "whoami",
        "env",
        "export",
        "clear",
        "column",
        "jq",
        "realpath",
        "dirname",
        "basename",
    }
)
_GIT_WRITES = frozenset(
    {
        "apply",
        "checkout",
        "restore",
        "reset",
        "stash",
        "am",
        "cherry-pick",
        "merge",
        "rebase",
        "pull",
        "revert",
        "switch",
    }
)
_GIT_BROAD = frozenset({"diff", "status", "log", "show"})
_MAX_NAMES = 16


class CallIO:
    """See the module docstring."""

    __slots__ = ("writes", "blind", "broad", "reads", "waited", "_kept")

    def __init__(
        self, writes: tuple[int, ...], blind: bool, broad: bool, reads: frozenset[int], waited: bool = False
    ):
        self.writes = writes
        self.blind = blind
        self.broad = broad
        self.reads = reads
        self.waited = waited  # (set on what a record keeps: see kept())
        self._kept: CallIO | None = None

    @property
    def writes_any(self) -> bool:
        return bool(self.writes) or self.blind

    @property
    def runs(self) -> bool:
        """It runs a program that may do anything (a script, a test, a build): not
        a look at files (``ls``, ``grep``, ``git diff``), a write by name, ``git`` or ``patch``."""
        return self.blind and self.broad

    def changed_by(self, writer: CallIO) -> bool:
        """Whether ``writer``, run after this call, may have changed what this
        call reads or writes: then doing it again is a new call.  A write that
        names its files (``cat > fix.patch << EOF``, ``cp x.py.backup x.py``)
        is only changed by writes to those files (a restore between different
        edits of its target is a round of a revert cycle, not a repeat); a
        read by any write that may touch what it reads; a run by any write."""
        if not writer.writes_any:
            return False
        if self.broad:
            return True
        if writer.blind and not self.writes:
            return True
        return not self.reads.isdisjoint(writer.writes)

    def kept(self, waited: bool = False) -> CallIO:
        """What a record keeps of it: the writes and flags, not the reads (only
        the call being judged needs those, and its event has them), and
        whether the call was made after a wait; shared when it writes nothing
        by name."""
        if waited:
            return CallIO(self.writes, self.blind, self.broad, _EMPTY, True)
        kept = self._kept
        if kept is None:
            # Made once: call_io() shares one CallIO between the runs of a command.
            kept = self._kept = (
                CallIO(self.writes, self.blind, self.broad, _EMPTY)
                if self.writes
                else _SHARED[self.blind, self.broad]
            )
        return kept


_EMPTY: frozenset[int] = frozenset()
NO_IO = CallIO((), False, False, _EMPTY)
_SHARED = {
    (blind, broad): CallIO((), blind, broad, _EMPTY) for blind in (False, True) for broad in (False, True)
}
_SHARED[False, False] = NO_IO
#: An edit tool's call that names no file (it may write any).
_BLIND_EDIT = _SHARED[True, False]


def _base(word: str) -> int:
    """The hash of a path's base name (records keep names as hashes: 8 bytes, not a string)."""
    return hash(_base_name(word))


def _base_name(word: str) -> str:
    return word.strip("'\"").rstrip("/").rsplit("/", 1)[-1]


def _names(words: list[str]) -> set[int]:
    return {
        _base(w)
        for w in words
        if ("." in w or "/" in w) and not w.startswith("-") and not w.startswith(("'s", "s/", "'/", "/^"))
    }


def call_io(call: Event | None) -> CallIO:
    """What ``call`` reads, runs and writes.  (Memoized by command line and
    by edited path, not on the event: a call's record keeps what it needs.)"""
    if call is None:
        return NO_IO
    command = shell.shell_command(call)
    if command is None:
        io = (
            _edit_io(call.args) if shell.tool_kind(call.tool).edit else NO_IO
        )  # is_edit() of a call that runs no command
    else:
        io = _BY_COMMAND[command]
    return io


def _edit_io(args: dict[str, Any] | None) -> CallIO:
    """What an edit tool's call writes: the file its arguments name."""
    target = None
    if args:
        for key in _PATH_KEYS:
            target = args.get(key)
            if isinstance(target, str):
                break
        else:
            target = None
    if not target:
        return _BLIND_EDIT if target is None else NO_IO
    io: CallIO = _BY_TARGET[target]
    return io


def _target_io(target: str) -> CallIO:
    """What an edit of the file ``target`` writes."""
    name = _base(target)
    return CallIO((name,), False, False, frozenset((name,)))


def command_io(command: str) -> CallIO:
    """What the command line ``command`` reads, runs and writes."""
    command = command[:4000]
    writes: set[int] = set()
    reads: set[int] = set()
    blind = broad = False
    if "<<" in command:
        # The heredoc's body is content, not commands: only the line that
        # starts it is (``cat <<'EOF' > fix.py``, ``cat > fix.py << EOF``).
        command = command.split("\n", 1)[0].replace("<<", " ")
    if "&" in command or "|" in command or ";" in command or "\n" in command:
        segments = shell.segments(command)
    else:
        segments = [command.strip()]  # one simple command (most): no split needed
    for segment in segments:
        written, names, runs_blind, runs_broad = _segment_io(segment)
        writes.update(written)
        blind = blind or runs_blind
        broad = broad or runs_broad
        reads.update(names)
        if len(reads) > _MAX_NAMES:
            break
    return CallIO(tuple(sorted(writes)[:_MAX_NAMES]), blind, broad, frozenset(list(reads)[:_MAX_NAMES]))


def _segment_io(segment: str) -> tuple[list[int], set[int], bool, bool]:
    """What one simple command writes, the names it mentions, and whether it
    may write what it does not name (``blind``) or depend on anything (``broad``)."""
    program = shell.program(segment)
    words = segment.split()
    writes: list[int] = []
    if ">" in segment:
        writes += [_base(target) for target in _REDIRECT_TARGET.findall(segment) if target != "/dev/null"]
        segment_words = [w for w in words if ">" not in w]
    else:
        segment_words = words
    names = _names(segment_words[1:])
    if program in ("sed", "perl") and any(w.startswith("-i") or w == "--in-place" for w in words[1:3]):
        writes += names
    elif program in ("cp", "mv", "install", "ln", "rsync") and len(segment_words) >= 3:
        writes.append(_base(segment_words[-1]))
    elif program in ("tee", "touch", "rm", "truncate"):
        writes += names
    else:
        blind, broad = _runs(program, words)
        return writes, names, blind, broad
    return writes, names, False, False


def _runs(program: str, words: list[str]) -> tuple[bool, bool]:
    """``(blind, broad)`` of a program that names no file it writes."""
    if program == "patch":
        return True, False
    if program == "git":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        return sub in _GIT_WRITES, sub not in _GIT_WRITES and sub in _GIT_BROAD
    if program in _RUNS or program.startswith(("python", "./")) or program.endswith((".py", ".sh")):
        return True, True
    if program not in _PURE:
        return True, True  # what it reads and writes is not known
    return False, False


#: call_io's answers by command line and by edited path: they depend on the
#: text alone.
_BY_COMMAND = TextMemo(256, 2048, command_io)
_BY_TARGET = TextMemo(256, 2048, _target_io)
