"""Swarm-wide loops: many workers stuck on the same call, none of them alone.

Design note 003's global doom loop: the same fingerprint with the same outcome
seen 10+ times across 2+ sessions within a time window, although no single
session repeated it enough to trip its own detectors.  One instance watches all
sessions.  Only sessions that repeated the call themselves (twice or more)
count, so ten workers that each run ``git status`` once are not a swarm loop;
acknowledgement-only results never count.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, register
from monitor.detect.fingerprints import fingerprint, is_acknowledgement
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import outcome_key


@dataclass(frozen=True)
class SwarmSettings(DetectorSettings):
    threshold: int = 10  # total calls across the swarm
    min_sessions: int = 2
    min_per_session: int = 2  # a session must repeat the call itself to count
    session_threshold: int = 3  # a session at or above this is its own detectors' business
    window_seconds: float = 600.0
    max_patterns: int = 4096  # bounded table


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
        self.table: OrderedDict[str, deque[tuple[float, str, Event]]] = OrderedDict()

    def reset(self) -> None:
        self.table.clear()

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is not Kind.TOOL_RESULT or event.call is None or view.exempt(event.tool):
            return None
        if is_acknowledgement(event):
            return None
        s = self.settings
        key = f"{fingerprint(event.call)}\x00{outcome_key(event)}"
        seen = self.table.get(key)
        if seen is None:
            seen = self.table[key] = deque(maxlen=s.threshold * 4)
            if len(self.table) > s.max_patterns:
                self.table.popitem(last=False)
        else:
            self.table.move_to_end(key)
        seen.append((event.ts, event.session, event.call))
        horizon = event.ts - s.window_seconds
        while seen and seen[0][0] < horizon:
            seen.popleft()
        per_session: dict[str, int] = {}
        for _, session, _ in seen:
            per_session[session] = per_session.get(session, 0) + 1
        if max(per_session.values()) >= s.session_threshold:
            return None  # a session crossed its own threshold: its detectors speak
        counted = {k: n for k, n in per_session.items() if n >= s.min_per_session}
        total = sum(counted.values())
        if len(counted) < s.min_sessions or total < s.threshold or event.session not in counted:
            return None
        tool = event.call.tool
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, total / (s.threshold * 2)),
                message=f"swarm loop: {tool} called {total} times with the same result "
                        f"across {len(counted)} sessions",
                pattern=f"swarm:{fingerprint(event.call)[:200]}",
                count=total,
                tool=tool,
                summary=f"joined {len(counted) - 1} other workers in calling {tool} "
                        f"{total} times with the same result",
                advice="The entire swarm is stuck on this approach: try a fundamentally different "
                       "strategy and do not retry the same tool and parameters.",
                evidence=tuple(EventRef.of(call) for _, _, call in list(seen)[-12:]),
            )
        ]
