"""Swarm-wide loops: many workers stuck on the same call, none of them alone.

Design note 003's global doom loop: the same fingerprint with the same failure
seen 10+ times across 2+ sessions within a time window, although no single
session repeated it enough to trip its own detectors.  One instance watches all
sessions.

Honest swarms stay quiet: only sessions that repeated the call themselves
(twice or more) count, so ten workers that each run ``git status`` once — or
each hit one 503 once — are sharing work, not looping; by default only
failures count (``failures_only = false`` adds identical non-trivial
successes); calls further apart than ``window_seconds`` do not add up; and a
session that crossed ``session_threshold`` on its own is left to its own
detectors (its calls beyond that are not counted here).

State is bounded: at most ``max_patterns`` (fingerprint, outcome) entries,
least recently seen evicted first, each keeping the times of its last calls
and the last few calls as evidence.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, register
from monitor.detect.fingerprints import failure_signature, fingerprint, is_acknowledgement, not_an_outcome
from monitor.events import Event, Kind, Level
from monitor.text import outcome_key

#: Calls kept per entry as evidence.
EVIDENCE_CALLS = 12


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
    """The recent calls of one (fingerprint, outcome) across sessions."""

    __slots__ = ("times", "calls")

    def __init__(self, size: int):
        self.times: deque[tuple[float, str]] = deque(maxlen=size)
        self.calls: deque[Event] = deque(maxlen=EVIDENCE_CALLS)


@register
class Swarm(Detector):
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
        if not self.table:
            return []
        return list(next(reversed(self.table.values())).calls)

    def _outcome(self, event: Event) -> str | None:
        signature = failure_signature(event)
        if signature is not None or self.settings.failures_only:
            return signature
        if event.is_error or is_acknowledgement(event):
            return None
        return outcome_key(event)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is not Kind.TOOL_RESULT or event.call is None or view.exempt(event.tool):
            return None
        if not_an_outcome(event):
            return None
        outcome = self._outcome(event)
        if outcome is None:
            return None
        s = self.settings
        print_ = fingerprint(event.call)
        key = f"{print_}\x00{outcome}"
        entry = self.table.get(key)
        if entry is None:
            # Room for the swarm's threshold several times over, so one busy
            # session cannot push the others' calls out.
            entry = self.table[key] = _Entry(s.threshold * 4)
            if len(self.table) > s.max_patterns:
                self.table.popitem(last=False)
        else:
            self.table.move_to_end(key)
        entry.times.append((event.ts, event.session))
        entry.calls.append(event.call)
        horizon = event.ts - s.window_seconds
        while entry.times and entry.times[0][0] < horizon:
            entry.times.popleft()

        per_session: dict[str, int] = {}
        for _, session in entry.times:
            per_session[session] = per_session.get(session, 0) + 1
        # A session's calls beyond its own threshold are its own loop, flagged
        # by its own detectors: the swarm counts only what none of them sees.
        cap = max(s.session_threshold - 1, s.min_per_session)
        counted = {
            session: min(n, cap) for session, n in per_session.items() if n >= s.min_per_session
        }
        total = sum(counted.values())
        if len(counted) > 1:
            view.note_similarity(self.name, min(1.0, total / s.threshold))
        if len(counted) < s.min_sessions or total < s.threshold or event.session not in counted:
            return None
        tool = event.call.tool
        shown = outcome[2:] if outcome[:2] in ("E:", "R:") else outcome
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
