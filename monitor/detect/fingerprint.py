"""Fingerprints: the same call, loosely keyed, made again and again in a row.

Two tiers (design note 003): *exact* — the same tool and arguments N times in
a row (default 3) — and *fuzzy* — the same fingerprint (tool + primary
arguments, shell file reads folded to ``file_read:PATH``) N times in a row
(default 4).  Consecutive means no other call in between.  A repeat only
extends the streak when its outcome matches the previous one, so paging
through a file with a moving offset or ``sed -n`` range is not a loop, and
the fuzzy tier ignores streaks answered by plain acknowledgements (successive
different edits of one file).
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, register
from monitor.detect.calls import CallHistory, CallRecord
from monitor.detect.fingerprints import fingerprint, is_acknowledgement
from monitor.events import Event, Kind, Level
from monitor.text import call_key


@dataclass(frozen=True)
class FingerprintSettings(DetectorSettings):
    threshold: int = 3  # identical calls in a row
    fuzzy_threshold: int = 4  # same fingerprint in a row


@register
class Fingerprint(Detector):
    name = "fingerprint"
    title = "Fingerprint"
    Settings = FingerprintSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    presets = {
        "conservative": {"threshold": 4, "fuzzy_threshold": 5},
        "aggressive": {"threshold": 2, "fuzzy_threshold": 3},
    }

    def __init__(self, settings: FingerprintSettings | None = None):
        super().__init__(settings)
        self.streak = CallHistory(max(self.settings.threshold, self.settings.fuzzy_threshold) + 8, fingerprint)

    def reset(self) -> None:
        self.streak.clear()

    def window(self) -> list[Event]:
        return self.streak.events()

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is Kind.TOOL_RESULT:
            self.streak.add_result(event)
            return None
        if event.kind is not Kind.TOOL_CALL or view.exempt(event.tool):
            return None
        key = fingerprint(event)
        records = list(self.streak)
        if records and records[-1].key != key:
            self.streak.clear()
            records = []
        current = self.streak.add_call(event)
        if not records:
            return None
        view.note_similarity(self.name, 0.9)

        # Walk back while the fingerprint holds and outcomes stay the same.
        fuzzy: list[CallRecord] = [current]
        reference: CallRecord | None = None
        for record in reversed(records):
            if reference is not None and not record.same_outcome(reference):
                break
            if reference is None or reference.result_event is None:
                reference = record
            fuzzy.append(record)
        exact_key = call_key(event)
        exact = 0
        for record in fuzzy:
            if call_key(record.event) != exact_key:
                break
            exact += 1

        s = self.settings
        exact_needed = view.threshold(event.tool, s.threshold)
        fuzzy_needed = max(view.threshold(event.tool, s.fuzzy_threshold), exact_needed)
        if exact >= exact_needed:
            tier, count, involved = "exact", exact, fuzzy[:exact]
        elif len(fuzzy) >= fuzzy_needed and not any(
            r.result_event is not None and is_acknowledgement(r.result_event) for r in fuzzy
        ):
            # Several edits of one file each answered "updated" are work, not a loop.
            tier, count, involved = "fuzzy", len(fuzzy), fuzzy
        else:
            return None
        what = key.split(":", 1)[1] if ":" in key else key
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (fuzzy_needed + 2)),
                message=(
                    f"{event.tool} called {count} times in a row "
                    + ("with identical arguments" if tier == "exact" else f"on the same target ({what[:60]})")
                    + " and the same result"
                ),
                pattern=f"{tier}:{key[:200]}",
                count=count,
                tool=event.tool,
                summary=(f"called {event.tool} with the same arguments {count} times in a row"
                         if tier == "exact" else
                         f"called {event.tool} on the same target {count} times in a row"),
                advice="Nothing changed between these calls; use what the last result told you.",
                evidence=evidence(r.event for r in reversed(involved)),
            )
        ]
