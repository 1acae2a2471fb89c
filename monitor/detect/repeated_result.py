"""Repeated results: different calls, the same result or error, over and over.

Five different ways of starting a program, each ending in the same
``ModuleNotFoundError``: the calls differ, so the call detectors stay quiet,
but the outcome (normalized: timestamps, durations, addresses and counters
removed) does not.  Acknowledgements ("OK", "file written", no output) are not
outcomes worth comparing: one command run over many items stays quiet.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, register
from monitor.detect.fingerprints import is_acknowledgement, looks_like_failure
from monitor.events import Event, Kind, Level
from monitor.text import call_key, clip, outcome_key


@dataclass(frozen=True)
class RepeatedResultSettings(DetectorSettings):
    threshold: int = 4  # results with the same outcome…
    window: int = 8  # …among the last N results
    min_distinct_calls: int = 3  # from at least this many different calls
    failures_only: bool = False  # only errors count (stricter)


@register
class RepeatedResult(Detector):
    name = "repeated_result"
    title = "Repeated results"
    Settings = RepeatedResultSettings
    kinds = frozenset({Kind.TOOL_RESULT})
    presets = {
        "conservative": {"threshold": 5, "min_distinct_calls": 4, "failures_only": True},
        "aggressive": {"threshold": 3, "min_distinct_calls": 2},
    }

    def __init__(self, settings: RepeatedResultSettings | None = None):
        super().__init__(settings)
        self.results: deque[tuple[str, str, Event]] = deque(maxlen=self.settings.window)

    def reset(self) -> None:
        self.results.clear()

    def window(self) -> list[Event]:
        return [event for _, _, event in self.results]

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is not Kind.TOOL_RESULT or event.call is None or view.exempt(event.tool):
            return None
        if is_acknowledgement(event):
            return None
        if self.settings.failures_only and not looks_like_failure(event):
            return None
        # Errors are compared without counters (line numbers in tracebacks);
        # other output must match exactly, so that paging through numbered
        # output is not "the same result".
        if looks_like_failure(event):
            outcome = outcome_key(event)
        else:
            outcome = "R:" + clip(event.content)
        call = call_key(event.call)
        self.results.append((outcome, call, event))
        same = [(c, e) for o, c, e in self.results if o == outcome]
        if len(same) > 1:
            view.note_similarity(self.name, len(same) / self.settings.threshold)
        calls = {c for c, _ in same}
        if len(same) < self.settings.threshold or len(calls) < self.settings.min_distinct_calls:
            return None
        failure = looks_like_failure(event)
        first_line = next((ln.strip() for ln in event.content.splitlines() if ln.strip()), "")
        if failure:
            # The last line of a traceback is the useful one.
            lines = [ln.strip() for ln in event.content[-2000:].splitlines() if ln.strip()]
            first_line = lines[-1] if lines else first_line
        what = "error" if failure else "result"
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, len(same) / (self.settings.threshold + 2)),
                message=f"{len(calls)} different calls ended in the same {what} "
                        f"{len(same)} times: {first_line[:80]!r}",
                pattern=f"result:{hash(outcome)}",
                count=len(same),
                tool=event.tool,
                summary=f"tried {len(calls)} different calls that all ended in the same {what}",
                advice=f"The {what} is the same whatever you change: read it and fix its cause "
                       f"({first_line[:100]}).",
                evidence=evidence(e.call or e for _, e in same),
            )
        ]
