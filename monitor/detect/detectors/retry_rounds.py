"""Retry rounds: starting over again and again, and getting the same outcome.

An agent restores the original file (``cp x.py.backup x.py``, ``git checkout
x.py``) or re-creates its fix script from scratch (the same ``echo … > fix.py``
again), re-applies a change, runs it, and fails the same way -- by a script
this time, a patch file the next, ``sed`` after that.  The commands vary, so
the call detectors stay quiet; the *outcome* repeats (issue 13).

A *round* is what happens between two occurrences of the same restore: a
write that replaces a whole named file (``> file``, a heredoc, ``cp``/``mv``
onto it, a write tool; not an append or a ``sed -i``), or ``git
checkout``/``git restore``/``git stash``.  When a restore comes back, the round
it closes is compared with the round before it:

* the *same attempt*: at least half of its edits (writes that name their
  files; running a script is not one) are edits of the round before (the same
  steps again) -- ``attempts`` (2) such rounds in a row warn;
* the *same outcome*: a failure of the same kind (:func:`failure_kind`) as in
  the round before -- ``outcomes`` (3) such rounds in a row warn;
* any rounds at all: ``max_rounds`` (6) restores of one thing warn -- a
  revert-and-retry cycle is a loop after several rounds, whatever changes.

Honest edit-test cycles have no restores; restoring a backup between
*different* attempts that fail differently is below ``max_rounds``.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

from monitor.detect.analysis.calls import call_record
from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.failures import comparable_failure, failed, failure_kind, shown_failure
from monitor.detect.analysis.memo import TextMemo
from monitor.detect.analysis.shell import shell_command
from monitor.detect.analysis.signatures import failure_signature, not_an_outcome
from monitor.detect.analysis.testruns import is_test_run
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import call_key

_TOOL_RESULT = Kind.TOOL_RESULT
_REVERT = re.compile(r"\bgit\s+(?:checkout|restore|stash)\b")
#: A shell write that replaces a whole file: ``> file`` (not ``>>``), a copy or a move onto it.
_REPLACES = re.compile(r"(?:^|[\s;&|(])(?:cp|mv|install)\s|(?<![>0-9&<])>(?!>)\s*(?!/dev/null)[^\s&|;<>()]")
_WHOLE_FILE_TOOLS = re.compile(r"(?i)write|create")
#: Edits and failures remembered (the rounds are read from them), restores
#: tracked, failure texts kept for messages, evidence kept per restore.
LOG = 16
MAX_RESTORES = 4
_BITS = 0x7FFFFFFF  # what the log keeps of a seq or a hash
_EDIT = _BITS & ~1
EVIDENCE = 5


def _writes_whole_files(tool: str) -> bool:
    return _WHOLE_FILE_TOOLS.search(tool) is not None


#: Whether a tool writes whole files, by its name (names repeat).
_WHOLE_FILE_TOOL_NAMES = TextMemo(256, 1024, _writes_whole_files)


class _Restore:
    """One restore and the rounds between its occurrences."""

    __slots__ = ("seq", "calls", "writes", "kinds", "attempts", "outcomes", "rounds", "refs")

    def __init__(self, seq: int, calls: int):
        self.seq = seq
        self.calls = calls  # calls seen when it last happened
        self.writes: frozenset[int] | None = None  # of the last closed round
        self.kinds: frozenset[int] = frozenset()
        self.attempts = self.outcomes = self.rounds = 0  # alike rounds in a row; all rounds
        self.refs: list[EventRef] = []  # the restores that closed rounds (most writes never do)


@dataclass(frozen=True)
class RetryRoundsSettings(DetectorSettings):
    attempts: int = 2  # rounds in a row that redo the round before's writes
    outcomes: int = 3  # rounds in a row that fail like the round before
    max_rounds: int = 6  # restores of one thing, whatever happens between them


def _restores(event: Event, writes: tuple[int, ...]) -> bool:
    """Whether the call puts a file back as it was (a backup copied over it,
    ``git checkout``/``restore``, a whole-file write)."""
    command = shell_command(event)
    if command is None:
        return bool(writes) and _WHOLE_FILE_TOOL_NAMES[event.tool or ""]
    if not writes and "git" not in command:
        return False
    end = command.find("\n", 0, 4000)
    line = command[: end if end >= 0 else 4000]  # (a heredoc's body is content)
    return (bool(writes) and _REPLACES.search(line) is not None) or (
        "git" in line and _REVERT.search(line) is not None
    )


class RetryRounds(Detector[RetryRoundsSettings]):
    name = "retry_rounds"
    title = "Retry rounds"
    Settings = RetryRoundsSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    #: Rounds run across user turns: mini-swe-agent's "format your action"
    #: replies are user messages, and a round redone after one is still redone.
    resets_on_user_turn = False
    presets = {
        "conservative": {"attempts": 3, "outcomes": 4, "max_rounds": 8},
        "aggressive": {"outcomes": 2, "max_rounds": 4},
    }

    def __init__(self, settings: RetryRoundsSettings | None = None):
        super().__init__(settings)
        #: Flat pairs (seq of the call, 31 bits of the hash of an edit's call
        #: key with its lowest bit clear, or of a failure's kind with it set),
        #: the latest LOG of them: 4 bytes a number.
        self.log = array("i")
        self.restores: dict[int, _Restore] = {}
        self.last_failure = ""  # the latest failure's text, for messages
        self.calls = 0

    def reset(self) -> None:
        del self.log[:]
        self.restores.clear()
        self.last_failure = ""
        self.calls = 0

    def window(self) -> list[Event]:
        return []

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is _TOOL_RESULT:
            if self.restores and event.call is not None:  # a round starts at a restore
                self._result(event, event.call)
            return None
        if view.tool_overrides and view.exempt(event.tool):
            return None
        self.calls += 1
        record = call_record(event)
        restore = _restores(event, record.io.writes)
        if record.io.writes or restore:  # edits it names (running a script is not one)
            self._log(event.seq, record.hash & _EDIT)
        if not restore:
            return None
        known = self.restores.get(record.hash)
        if known is None:
            if len(self.restores) >= MAX_RESTORES:
                # The oldest that never came back goes first (most writes are made once).
                old = next((k for k, r in self.restores.items() if not r.rounds), None)
                del self.restores[old if old is not None else next(iter(self.restores))]
            self.restores[record.hash] = _Restore(event.seq, self.calls)
            return None
        if self.calls - known.calls <= 1:
            known.seq, known.calls = event.seq, self.calls
            return None  # the same restore twice in a row: no round between
        since, log = known.seq & _BITS, self.log
        now = event.seq & _BITS
        round_ = [log[i + 1] for i in range(0, len(log), 2) if since < log[i] < now]
        return self._close(known, record.hash & _EDIT, round_, event, view)

    def _result(self, event: Event, call: Event) -> None:
        """Log the kind of a failed result."""
        if not failed(event) and failure_signature(event) is None:
            return
        if not_an_outcome(event):
            return
        # A test run's failure is its failing tests, names whole
        # (test_key[0] and test_key[1] are not the same failure).
        kind = (comparable_failure(event) or "") if is_test_run(call) else failure_kind(event)
        if kind:
            self._log(call.seq, hash(kind) & _BITS | 1)
            self.last_failure = shown_failure(kind)[:80]  # (only a round's failure is ever quoted)

    def _log(self, seq: int, value: int) -> None:
        log = self.log
        if len(log) >= 2 * LOG:
            del log[:2]
        log.extend((seq & _BITS, value))

    def _close(
        self, known: _Restore, key: int, round_: list[int], event: Event, view: SessionView
    ) -> list[Detection] | None:
        writes = frozenset(v for v in round_ if not v & 1 and v != key)
        kinds = frozenset(v for v in round_ if v & 1)
        if known.writes is not None:
            shared = writes & known.writes
            same_attempt = bool(shared) and len(shared) * 2 >= len(writes)
            same_outcome = bool(kinds & known.kinds)
            known.attempts = known.attempts + 1 if same_attempt else 0
            known.outcomes = known.outcomes + 1 if same_outcome else 0
        known.rounds += 1
        known.writes, known.kinds, known.seq, known.calls = writes, kinds, event.seq, self.calls
        if len(known.refs) >= EVIDENCE:
            del known.refs[0]  # the latest restores
        known.refs.append(ref(event))
        s = self.settings
        if known.attempts + 1 >= s.attempts and known.attempts:
            why = f"the same steps again ({known.attempts + 1} rounds in a row)"
        elif known.outcomes + 1 >= s.outcomes and known.outcomes:
            shown = self.last_failure or "the same failure"
            why = f"the same failure after each of {known.outcomes + 1} rounds ({shown[:80]})"
        elif known.rounds >= s.max_rounds:
            why = f"{known.rounds} rounds of starting over"
        else:
            return None
        command = shell_command(event) or event.tool or "?"
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, (known.rounds + 1) / (s.max_rounds + 1)),
                message=f"started over {known.rounds + 1} times ({command[:60]!r}) with {why}",
                # Not hash(): salted per process, so acks and false positives
                # keyed on the pattern would not survive a restart or a worker.
                pattern=f"rounds:{digest(call_key(event))}",
                count=known.rounds + 1,
                tool=event.tool,
                summary=f"started over {known.rounds + 1} times and got {why}",
                advice=(
                    "Each round ends the same way. Stop redoing it: read the failure, find "
                    "why the change does not take effect, and try something different."
                ),
                evidence=evidence(known.refs),
            )
        ]
