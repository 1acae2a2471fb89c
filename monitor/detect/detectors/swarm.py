"""Swarm-wide loops: many workers stuck on the same call, none of them alone.

Design note 003's global doom loop: the same fingerprint with the same failure
seen 10+ times across 2+ sessions within a time window, although no single
session repeated it enough to trip its own detectors.  One instance watches all
sessions.

Honest swarms stay quiet: only sessions that repeated the call themselves
(twice or more) count, so ten workers that each run ``git status`` once — or
each hit one 503 once — are sharing work, not looping; by default only
failures count (``failures_only = false`` adds identical non-trivial
successes); calls further apart than ``window_seconds`` do not add up; a
session that crossed ``session_threshold`` on its own is left to its own
detectors (its calls beyond that are not counted here); and a test run's
result is what ``test_fix`` reads of it -- which tests failed, with their
names whole, and how many -- so workers each working through their own
parametrized cases (``test_parse[case3]``, then ``[case4]``) or watching
their failures fall are not "the same failure" (an error signature drops
digits, which would make them so).

State is bounded: at most ``max_patterns`` (fingerprint, outcome) entries,
least recently seen evicted first, each keeping the times of its last calls
and the last few calls as evidence.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from monitor.detect.analysis.failures import comparable_failure, shown_failure
from monitor.detect.analysis.signatures import fingerprint, is_acknowledgement
from monitor.detect.base import Detection, DetectorSettings, SessionView, ShardableDetector, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import outcome_key

#: Calls kept per entry as evidence.
EVIDENCE_CALLS = 12
_TOOL_RESULT = Kind.TOOL_RESULT


@dataclass(frozen=True)
class SwarmSettings(DetectorSettings):
    threshold: int = 10  # total calls across the swarm
    min_sessions: int = 2
    min_per_session: int = 2  # a session must repeat the call itself to count
    session_threshold: int = 3  # a session at or above this is its own detectors' business
    window_seconds: float = 600.0
    failures_only: bool = True  # false: identical non-trivial successes count too
    max_patterns: int = 1024  # bounded table


class _Entry:
    """The recent calls of one (fingerprint, outcome) across sessions: their
    times and sessions, how many each session has among them, and the
    evidence of the last few."""

    __slots__ = ("times", "sessions", "per_session", "size", "calls")

    # Lists, not deques: the table holds a thousand entries of a few dozen
    # items, and an empty deque is larger than such a list.
    def __init__(self, size: int):
        self.times: list[float] = []
        self.sessions: list[str] = []
        self.per_session: dict[str, int] = {}
        self.size = size
        self.calls: list[EventRef] = []

    def add(self, ts: float, session: str, horizon: float) -> None:
        """Count a call; forget the oldest beyond ``size`` and those before ``horizon``."""
        times, sessions, per_session = self.times, self.sessions, self.per_session
        if len(times) >= self.size:
            if not times:
                return  # room for no calls at all
            del times[0]
            self._forget(sessions.pop(0))
        times.append(ts)
        sessions.append(session)
        per_session[session] = per_session.get(session, 0) + 1
        while times and times[0] < horizon:
            del times[0]
            self._forget(sessions.pop(0))

    def _forget(self, session: str) -> None:
        left = self.per_session[session] - 1
        if left:
            self.per_session[session] = left
        else:
            del self.per_session[session]


class Swarm(ShardableDetector[SwarmSettings]):
    name = "swarm"
    title = "Swarm-wide loop"
    Settings = SwarmSettings
    kinds = frozenset({Kind.TOOL_RESULT})
    scope = "global"
    resets_on_user_turn = False
    presets = {
        "conservative": {"threshold": 15, "min_sessions": 3},
        "aggressive": {"threshold": 8},
    }

    def __init__(self, settings: SwarmSettings | None = None):
        super().__init__(settings)
        self.table: OrderedDict[str, _Entry] = OrderedDict()

    def reset(self) -> None:
        self.table.clear()

    def window(self) -> list[Event]:
        return []  # the calls compared are summarized (see ``table``), not kept

    def _outcome(self, event: Event) -> str | None:
        """The result's key among the swarm's: the same key, the same result."""
        signature = comparable_failure(event)
        if signature is not None or self.settings.failures_only:
            return signature
        if event.is_error or is_acknowledgement(event):
            return None
        return outcome_key(event)

    def sight(self, event: Event, view: SessionView) -> tuple[Any, ...] | None:
        """What a result adds to the table: its session, time, the call's
        fingerprint and tool, the result's outcome, and a ref to the call.

        Written flat (``_outcome()`` inlined): this runs for every result of
        every session.  The outcome first: most results have none (successes),
        and a result that is not its call's outcome (a sibling failed, the
        user refused) has none either -- ``failure_signature`` leaves them
        out, and they are errors -- so ``not_an_outcome`` needs no test here."""
        call = event.call
        if call is None or event.kind is not _TOOL_RESULT:
            return None
        outcome = comparable_failure(event)
        if outcome is None:
            if self.settings.failures_only:
                return None
            outcome = self._outcome(event)
            if outcome is None:
                return None
        if view.tool_overrides and view.exempt(event.tool):
            return None
        return (event.session, event.ts, fingerprint(call), outcome, call.tool, ref(call))

    def count(self, sighting: tuple[Any, ...], view: SessionView | None) -> list[Detection] | None:
        session, ts, print_, outcome, tool, call_ref = sighting
        s = self.settings
        key = f"{print_}\x00{outcome}"
        table = self.table
        entry = table.get(key)
        if entry is None:
            # Room for the swarm's threshold several times over, so one busy
            # session cannot push the others' calls out.
            entry = table[key] = _Entry(s.threshold * 4)
            if len(table) > s.max_patterns:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        entry.add(ts, session, ts - s.window_seconds)
        calls = entry.calls
        calls.append(call_ref)
        if len(calls) > EVIDENCE_CALLS:
            del calls[0]

        # A session's calls beyond its own threshold are its own loop, flagged
        # by its own detectors: the swarm counts only what none of them sees.
        per_session = entry.per_session
        if len(per_session) < 2 and s.min_sessions > 1:
            return None  # one session alone: nothing to note or report
        if (view is None or not view.keeps_similarity) and (
            len(entry.times) < s.threshold or per_session.get(session, 0) < s.min_per_session
        ):
            return None  # too few calls in all, or too few of this session's: nothing to report
        cap = max(s.session_threshold - 1, s.min_per_session)
        counted = {session: min(n, cap) for session, n in per_session.items() if n >= s.min_per_session}
        total = sum(counted.values())
        if len(counted) > 1 and view is not None:
            view.note_similarity(self.name, min(1.0, total / s.threshold))
        if len(counted) < s.min_sessions or total < s.threshold or session not in counted:
            return None
        shown = shown_failure(outcome)
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, total / (s.threshold * 2)),
                message=f"swarm loop: {tool} called {total} times with the same result "
                f"across {len(counted)} sessions ({shown[:60]!r})",
                pattern=f"swarm:{print_[:200]}",
                count=total,
                tool=tool,
                summary=f"joined {len(counted) - 1} other workers in calling {tool} "
                f"{total} times with the same result",
                advice="The entire swarm is stuck on this approach: try a fundamentally different "
                "strategy and do not retry the same tool and parameters.",
                evidence=evidence(entry.calls),
            )
        ]
