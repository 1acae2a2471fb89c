"""Corroboration: a warning must show the outcome it says has stopped being new.

The guide's definition of stuck is "its outcome has stopped being new while it
keeps acting".  A detector that takes a session to ``warn`` cites the rounds it
judged (its evidence).  When two or more of the tool results it cites are known
and *no two of them ended the same way* -- the outputs moved, a new error
replaced the old one, another range of the file came back -- the evidence
contradicts the claim, and the detection stays a ``notice`` (climbing no rung of
the escalation ladder).  A detector whose claim is the same *call* made again
(:data:`SAME_CALL`: ``exact_repeat``, ``similar_args``, ``cycle``, ``fingerprint``, and
``turn_similarity``, whose turns' calls are cited with their words) must show more: its
*latest* cited result repeats an earlier cited one.  Inputs that repeat while the latest
result is new (a test run again after an edit, and this time it passed or failed elsewhere)
are work moving, not an outcome that stopped being new.  And such a detector never
warns blind: when the results it cites are ones the log does not hold (``meta["unrecorded"]``:
the output of a command Aider ran for the model), "the same result" is unknown.

A result *repeats* an earlier result the detection cites when

* it ended in the same outcome: the same telling outcome
  (:func:`monitor.detect.analysis.outcomes.outcome_of`: a failure's telling line, a
  refusal's phrase, a test run's failing tests and their count, a search that found
  nothing, whatever it looked for), or a failure of the same kind, names aside
  (:func:`monitor.detect.analysis.failures.failure_kind`: ``brew``, then ``conda``,
  "command not found"); or
* it showed nothing new: every line of its output (normalised as outcomes are:
  digits, addresses, hashes, temporary directories and case aside; what its first
  line quotes of its own call's arguments left out) is a line an earlier one showed -- the
  same file again, a smaller range of a file already read, a search tool's same
  words around another query.

A closer look at the failure just before it (:func:`~monitor.detect.analysis.failures.closer_look`:
the failed command re-run narrower or filtered, showing more of its error) is
a look, not a retry: it does not repeat *that* failure (it still repeats an
older one that ended the same way).

A result with no output and no outcome, or an acknowledgement ("Applied edit to
app.py", "File updated", ``exit code 0``), says nothing either way.  Each detector keeps
its own, finer idea of "the same" (a re-run showing a new line is new for
``stale_outcome``); this rule is the floor under all of them: a warning whose
results *all* differ -- five different errors in a row, outputs that keep moving --
is no evidence of an outcome that stopped being new.  And to climb past ``warn``
(``critical``, ``terminate``) the *latest* cited result must repeat: a loop that
met a new failure has not shown itself again.

Left alone, on purpose:

* detectors whose outcome is the repeated text itself (a chanted passage, a
  restated reply, a monologue, compactions; turns of text without calls), the waiting budget, the swarm's
  cross-session count and the revert cycles of ``retry_rounds`` (the restore
  itself is what repeats);
* evidence with fewer than two known results (refusals sent as messages, a
  person's repeated complaint, results older than the ledger): nothing
  contradicts the detector, so it stands.

Pure and bounded: the ledger keeps the last :data:`LEDGER_SIZE` results of a
session as small stand-ins (the head and tail of the text, at most 4,000
characters, and the call's tool and bounded arguments), read only when a
warning cites them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple

from monitor.detect.analysis.failures import closer_look, failed, failure_kind
from monitor.detect.analysis.outcomes import OUTCOME_CHARS, body_lines, outcome_of, without_echo
from monitor.detect.analysis.shell import shell_command
from monitor.detect.analysis.signatures import is_acknowledgement
from monitor.detect.base import Detection
from monitor.events import Event, EventRef, Level
from monitor.text import clip

#: Results remembered per session (a detector cites at most 12 events of its window).
LEDGER_SIZE = 12
#: Detectors whose outcome is not a tool result: the repeated text, the wait, the restore.
OWN_OUTCOME = frozenset(
    {
        "chanting",
        "monologue",
        "output_similarity",
        "compaction",
        "waiting",
        "swarm",
        "retry_rounds",
    }
)
#: Detectors whose claim is the same call made again (the inputs repeat): they must
#: also show its outcome repeating -- two known results, the latest one not new.
SAME_CALL = frozenset({"exact_repeat", "similar_args", "cycle", "fingerprint", "turn_similarity"})
#: What a detection that was not corroborated says after its message.
NOT_CORROBORATED = " (held back: the rounds it cites did not end the same way)"


class Entry(NamedTuple):
    """One result: its seq, its outcome keys (telling outcome, failure kind), its lines' digests."""

    seq: int
    keys: tuple[str, ...]
    body: frozenset[int]
    #: A failed result's command (``None`` for a success or a tool that is no shell).
    command: str | None = None
    #: The seq of the result the session's agent got just before it (0: none).
    before: int = 0


#: How much of a call's argument a kept call holds (the shell reads commands up to 4,000 characters).
ARG_CHARS = 4000


class _Kept:
    """What the ledger keeps of a result and its call: the fields the outcome
    of a result reads, references to the event's own values (the text clipped
    only when longer than an outcome reads), no copy of either event."""

    __slots__ = ("seq", "kind", "session", "ts", "content", "is_error", "tool", "meta", "call", "before")

    def __init__(self, result: Event, content: str, call: tuple[Any, ...] | None, before: int):
        self.seq = result.seq
        self.before = before  # the seq of the result kept just before it
        self.kind = result.kind
        self.session = result.session
        self.ts = result.ts
        self.content = content
        self.is_error = result.is_error
        self.tool = result.tool
        self.meta = result.meta or None  # (most are empty: one dict fewer each)
        #: The call's kind, session, ts, tool, bounded arguments and seq.
        self.call = call

    def event(self) -> Event:
        """The result (and its call) as the outcome functions read them."""
        kept_call = None
        if self.call is not None:
            kind, session, ts, tool, args, seq = self.call
            kept_call = Event(kind, session, ts, tool=tool, args=args)
            kept_call.seq = seq
        kept = Event(
            self.kind,
            self.session,
            self.ts,
            content=self.content,
            is_error=self.is_error,
            tool=self.tool,
            meta=self.meta or {},
        )
        kept.seq = self.seq
        kept.call = kept_call
        return kept


class OutcomeLedger:
    """A session's recent tool results, by the ``seq`` of the result and of its
    call (evidence cites either).  Each is kept as a small stand-in (its text's
    head and tail, its call's tool and bounded arguments) and read only when a
    warning cites it: most results are never cited, and reading one is the
    cost of an outcome (regular expressions over 4,000 characters).

    The stand-ins go into a bounded deque under each of their seqs, the last
    ``2 * LEDGER_SIZE`` seqs kept (the deque drops the oldest itself); the
    deque is made a dict by seq only when a warning is judged, which is rare
    next to results."""

    __slots__ = ("kept", "read", "last")

    def __init__(self) -> None:
        self.kept: deque[tuple[int, _Kept]] = deque(maxlen=2 * LEDGER_SIZE)
        self.last = 0  # the seq of the result kept last
        self.read: dict[int, Entry] = {}  # the stand-ins read so far, by result seq

    def observe(self, result: Event, view: object = None) -> None:
        """Keep a stand-in of ``result`` (and of its call).  The engine runs it as
        a detector's ``observe`` on each result the agent's calls got, after the
        detectors (a call the harness made itself is seen by none)."""
        call = result.call
        kept_call = None
        if call is not None:
            kept_call = (call.kind, call.session, call.ts, call.tool, _bounded(call.args), call.seq)
        content = result.content
        kept = _Kept(
            result,
            content if len(content) <= OUTCOME_CHARS else clip(content, OUTCOME_CHARS),
            kept_call,
            self.last,
        )
        self.last = result.seq
        self.kept.append((result.seq, kept))
        if call is not None and call.seq:
            self.kept.append((call.seq, kept))

    def by_seq(self) -> dict[int, _Kept]:
        """The stand-ins kept, by the seq of the result and of its call; the
        results read before and no longer kept are forgotten."""
        by_seq = dict(self.kept)
        if len(self.read) > LEDGER_SIZE:
            self.read = {seq: entry for seq, entry in self.read.items() if seq in by_seq}
        return by_seq

    def ceiling(self, detection: Detection) -> Level:
        """:func:`ceiling` of ``detection`` by what this ledger keeps."""
        return ceiling(detection.detector, detection.level, detection.evidence, self)

    def unrecorded(self, evidence: Iterable[EventRef]) -> bool:
        """Whether two or more results ``evidence`` cites are known and the log held
        none of them (``meta["unrecorded"]``: Aider's suggested commands)."""
        by_seq = self.by_seq()
        kept = {k.seq: k for k in (by_seq.get(ref.seq) for ref in evidence) if k is not None}
        return len(kept) >= 2 and all(k.meta and k.meta.get("unrecorded") for k in kept.values())

    def outcomes(self, evidence: Iterable[EventRef]) -> list[Entry]:
        """The distinct results ``evidence`` cites and the ledger knows, that
        say something (an outcome or a line), oldest first."""
        by_seq = self.by_seq()
        seen: dict[int, Entry] = {}
        for ref in evidence:
            kept = by_seq.get(ref.seq)
            if kept is not None and kept.seq not in seen:
                entry = self.read.get(kept.seq)
                if entry is None:
                    entry = self.read[kept.seq] = _read(kept.event())._replace(before=kept.before)
                if entry[1] or entry[2]:
                    seen[kept.seq] = entry
        return sorted(seen.values(), key=lambda entry: entry.seq)


def _bounded(args: dict[str, Any] | None) -> dict[str, Any] | None:
    """``args`` with each text cut to :data:`ARG_CHARS` (a write's megabyte of content is not kept):
    ``args`` itself when none is longer (the event's dict, not a copy)."""
    if not args:
        return args
    for value in args.values():
        if isinstance(value, str) and len(value) > ARG_CHARS:
            return {
                key: value[:ARG_CHARS] if isinstance(value, str) else value for key, value in args.items()
            }
    return args


def _read(result: Event) -> Entry:
    """What a kept result ended in and showed (an acknowledgement: nothing)."""
    if is_acknowledgement(result):
        return Entry(result.seq, (), frozenset())
    found = outcome_of(result)
    keys: tuple[str, ...] = () if found is None else (found.key,)
    command = None
    if failed(result):
        kind = failure_kind(result)
        if kind:
            keys += ("K:" + kind,)
        command = shell_command(result.call)
    body = (
        found.body
        if found is not None and found.body
        else body_lines(without_echo(result.content, result.call))
    )
    return Entry(result.seq, keys, body, command)


def looks_closer(previous: Entry | None, entry: Entry) -> bool:
    """Whether ``entry`` is a closer look at ``previous``, the failure the agent
    got just before it: its command narrowed or filtered, showing more of the
    error (:func:`~monitor.detect.analysis.failures.closer_look`)."""
    return (
        previous is not None
        and entry.before == previous.seq
        and previous.command is not None
        and closer_look(previous.command, entry.command, previous.body, entry.body)
    )


def repeats(outcomes: list[Entry]) -> bool:
    """Whether a result of ``outcomes`` (oldest first) repeats an earlier one:
    the same outcome, or nothing new shown.  A closer look at the failure just
    before it does not repeat that one's outcome (an older one's, still)."""
    ended: set[str] = set()
    older: set[str] = set()  # what ended before the result before
    shown: set[int] = set()
    previous = None
    for entry in outcomes:
        if (older if looks_closer(previous, entry) else ended).intersection(entry.keys):
            return True
        older = set(ended)
        ended.update(entry.keys)
        if entry.body and shown and entry.body <= shown:
            return True
        shown |= entry.body
        previous = entry
    return False


def latest_repeats(outcomes: list[Entry]) -> bool:
    """Whether the latest result of ``outcomes`` (oldest first; results that say
    nothing are not among them) repeats an earlier one: the outcome is not new *now*
    (a closer look at the failure just before does not repeat that one's outcome)."""
    *earlier, latest = outcomes
    compared = earlier[:-1] if earlier and looks_closer(earlier[-1], latest) else earlier
    if any(set(latest.keys).intersection(other.keys) for other in compared):
        return True
    shown: set[int] = set()
    for other in earlier:
        shown |= other.body
    return bool(latest.body) and latest.body <= shown


def judged(detector: str) -> bool:
    """Whether a detection of ``detector`` claims a tool outcome repeats."""
    return detector not in OWN_OUTCOME


def ceiling(detector: str, level: Level, evidence: Iterable[EventRef], ledger: OutcomeLedger) -> Level:
    """The highest level the evidence of a detection (of ``detector``, at ``level``)
    supports: ``notice`` for a detector that claims an outcome repeats and cites
    two or more known results that all differ, or, for one of :data:`SAME_CALL`,
    whose latest cited result is new; ``warn`` when some cited results repeat but the
    latest is new (it warns, and climbs no further until the loop repeats again);
    else ``terminate`` (no ceiling)."""
    if level < Level.WARN or not judged(detector):
        return Level.TERMINATE
    if detector in SAME_CALL and ledger.unrecorded(evidence):
        return Level.NOTICE  # the same call again, none of whose results the log holds: blind
    outcomes = ledger.outcomes(evidence)
    if len(outcomes) < 2:
        return Level.TERMINATE
    if latest_repeats(outcomes):  # (then some result repeats an earlier one too)
        return Level.TERMINATE
    if detector in SAME_CALL or not repeats(outcomes):
        return Level.NOTICE
    # Past warn only while it repeats now: a loop that met a new result has not shown it again.
    return Level.WARN
