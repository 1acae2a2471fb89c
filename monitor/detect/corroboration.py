"""Corroboration: a warning must show the outcome it says has stopped being new.

The guide's definition of stuck is "its outcome has stopped being new while it
keeps acting".  A detector that takes a session to ``warn`` cites the rounds it
judged (its evidence).  When two or more of the tool results it cites are known
and *no two of them ended the same way* -- the outputs moved, a new error
replaced the old one, another range of the file came back -- the evidence
contradicts the claim, and the detection stays a ``notice`` (climbing no rung of
the escalation ladder).

A result *repeats* an earlier result the detection cites when

* it ended in the same outcome: the same telling outcome
  (:func:`monitor.detect.analysis.outcomes.outcome_of`: a failure's telling line, a
  refusal's phrase, a test run's failing tests and their count, a search that found
  nothing, whatever it looked for), or a failure of the same kind, names aside
  (:func:`monitor.detect.analysis.failures.failure_kind`: ``brew``, then ``conda``,
  "command not found"); or
* it showed nothing new: every line of its output (normalised as outcomes are:
  digits, addresses, hashes, temporary directories and case aside) is a line an
  earlier one showed -- the same file again, a smaller range of a file already read.

A result with no output and no outcome says nothing either way.  Each detector keeps
its own, finer idea of "the same" (a re-run showing a new line is new for
``stale_outcome``); this rule is the floor under all of them: a warning whose
results *all* differ -- five different errors in a row, outputs that keep moving --
is no evidence of an outcome that stopped being new.

Left alone, on purpose:

* detectors whose outcome is the repeated text itself (a chanted passage, a
  restated reply, a monologue, compactions), the waiting budget, the swarm's
  cross-session count and the revert cycles of ``retry_rounds`` (the restore
  itself is what repeats);
* ``limits`` up to ``warn``: a limit is a backstop, not a claim that an outcome
  repeats (the consecutive-failure limit has its own rule for failures that move
  on; five different failures in a row still warn: ``c_loop_limits_failures``).
  Beyond ``warn`` it is judged: failures that all differ never take a session to
  ``critical`` or ``terminate``;
* evidence with fewer than two known results (refusals sent as messages, a
  person's repeated complaint, results older than the ledger): nothing
  contradicts the detector, so it stands.

Pure and bounded: the ledger keeps the last :data:`LEDGER_SIZE` results of a
session: its outcome keys and the digests of its lines each (``array``, 8 bytes
a line, at most ``BODY_LINES``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from monitor.detect.analysis.failures import failed, failure_kind
from monitor.detect.analysis.outcomes import body_lines, outcome_of
from monitor.events import Event, EventRef, Level

#: Results remembered per session (a detector cites at most 12 events of its window).
LEDGER_SIZE = 12
#: Detectors whose outcome is not a tool result: the repeated text, the wait, the restore.
OWN_OUTCOME = frozenset(
    {
        "chanting",
        "monologue",
        "output_similarity",
        "turn_similarity",
        "compaction",
        "waiting",
        "swarm",
        "retry_rounds",
        "limits",
    }
)
#: The backstop: its failures that all differ may warn, never more.
BACKSTOP = "limits"
#: What a detection that was not corroborated says after its message.
NOT_CORROBORATED = " (held back: the rounds it cites each ended differently)"


#: One result: its seq, its outcome keys (telling outcome, failure kind), its lines' digests.
Entry = tuple[int, "tuple[str, ...]", "array[int]"]


class OutcomeLedger:
    """The outcomes of a session's recent tool results, by the ``seq`` of the
    result and of its call (evidence cites either)."""

    __slots__ = ("by_seq",)

    def __init__(self) -> None:
        self.by_seq: dict[int, Entry] = {}

    def note(self, result: Event) -> None:
        """Remember what ``result`` ended in and showed."""
        found = outcome_of(result)
        keys: tuple[str, ...] = () if found is None else (found.key,)
        if failed(result):
            kind = failure_kind(result)
            if kind:
                keys += ("K:" + kind,)
        body = found.body if found is not None and found.body else body_lines(result.content)
        entry: Entry = (result.seq, keys, array("q", body))
        by_seq = self.by_seq
        by_seq[result.seq] = entry
        call = result.call
        if call is not None and call.seq:
            by_seq[call.seq] = entry
        while len(by_seq) > 2 * LEDGER_SIZE:
            del by_seq[next(iter(by_seq))]

    def outcomes(self, evidence: Iterable[EventRef]) -> list[Entry]:
        """The distinct results ``evidence`` cites and the ledger knows, that
        say something (an outcome or a line), oldest first."""
        seen: dict[int, Entry] = {}
        for ref in evidence:
            entry = self.by_seq.get(ref.seq)
            if entry is not None and (entry[1] or entry[2]):
                seen[entry[0]] = entry
        return sorted(seen.values(), key=lambda entry: entry[0])


def repeats(outcomes: list[Entry]) -> bool:
    """Whether a result of ``outcomes`` (oldest first) repeats an earlier one:
    the same outcome, or nothing new shown."""
    ended: set[str] = set()
    shown: set[int] = set()
    for _seq, keys, body in outcomes:
        if ended.intersection(keys):
            return True
        ended.update(keys)
        lines = set(body)
        if lines and shown and lines <= shown:
            return True
        shown |= lines
    return False


def judged(detector: str) -> bool:
    """Whether a detection of ``detector`` claims a tool outcome repeats."""
    return detector not in OWN_OUTCOME


def ceiling(detector: str, level: Level, evidence: Iterable[EventRef], ledger: OutcomeLedger) -> Level:
    """The highest level the evidence of a detection (of ``detector``, at ``level``)
    supports: ``notice`` for a detector that claims an outcome repeats and cites
    two or more known results that all differ; ``warn`` for a limit whose cited
    failures all differ (a backstop may warn, never stop a session over failures
    that keep changing); else ``terminate`` (no ceiling)."""
    if level < Level.WARN or (detector != BACKSTOP and not judged(detector)):
        return Level.TERMINATE
    outcomes = ledger.outcomes(evidence)
    if len(outcomes) < 2 or repeats(outcomes):
        return Level.TERMINATE
    return Level.WARN if detector == BACKSTOP else Level.NOTICE
