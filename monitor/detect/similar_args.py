"""Similar arguments: the same tool retried with small spelling changes, same result.

``grep fooBar`` → ``grep foobar`` → ``grep foo_bar``, all "No matches": the
agent is varying the arguments slightly (normalized Levenshtein >= 0.8, field
by field for objects — design note 001) and getting the same informative
outcome every time.  Plain acknowledgements ("OK", "file written", empty
output) do not count, so one command run over many items is not flagged.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, register
from monitor.detect.calls import CallRecord
from monitor.detect.fingerprints import arg_similarity, is_acknowledgement
from monitor.events import Event, Kind, Level
from monitor.text import call_key


@dataclass(frozen=True)
class SimilarArgsSettings(DetectorSettings):
    similarity: float = 0.8  # normalized Levenshtein, per field
    threshold: int = 3  # calls in the chain (the first plus its variants)
    window: int = 10  # calls of any tool the chain may span


@register
class SimilarArgs(Detector):
    name = "similar_args"
    title = "Similar arguments"
    Settings = SimilarArgsSettings
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})
    presets = {
        "conservative": {"similarity": 0.85, "threshold": 4},
        "aggressive": {"similarity": 0.75},
    }

    def __init__(self, settings: SimilarArgsSettings | None = None):
        super().__init__(settings)
        self.chain: list[CallRecord] = []  # mutually similar calls of one tool
        self.recent: deque[Event] = deque(maxlen=self.settings.window)

    def reset(self) -> None:
        self.chain.clear()
        self.recent.clear()

    def window(self) -> list[Event]:
        return [record.event for record in self.chain]

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is Kind.TOOL_RESULT:
            self._attach(event)
            return None
        if event.kind is not Kind.TOOL_CALL or view.exempt(event.tool):
            return None
        self.recent.append(event)
        chain = self.chain
        # The chain lapses when its start has left the window.
        if chain and all(chain[0].event is not e for e in self.recent):
            chain.clear()
        if chain:
            last = chain[-1]
            if last.event.tool != event.tool:
                return None  # other tools in between do not break the chain
            score = arg_similarity(last.event.args or {}, event.args or {}, self.settings.similarity)
            if score < self.settings.similarity:
                chain.clear()
            else:
                view.note_similarity(self.name, score)
        chain.append(CallRecord(call_key(event), event))
        if len(chain) > self.settings.threshold + 6:
            del chain[0]
        threshold = view.threshold(event.tool, self.settings.threshold)
        if len(chain) < threshold or len({r.key for r in chain}) < 2:
            return None
        earlier = chain[:-1]
        outcomes = [r.result for r in earlier]
        if any(o is None for o in outcomes[:-1]) or len(set(o for o in outcomes if o)) != 1:
            return None  # results differ: the variations are getting somewhere
        if any(r.result_event is not None and is_acknowledgement(r.result_event) for r in earlier):
            return None
        count = len(chain)
        sample = (earlier[-1].result_event.content if earlier[-1].result_event else "")[:60]
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, count / (threshold + 2)),
                message=f"{event.tool} retried {count} times with slightly different arguments, "
                        f"same result each time ({' '.join(sample.split())!r})",
                pattern=f"similar:{event.tool}:{chain[0].key[:160]}",
                count=count,
                tool=event.tool,
                summary=f"retried {event.tool} {count} times with slightly different arguments "
                        "and got the same result",
                advice="Small variations of the same arguments keep giving the same answer; "
                       "question the assumption behind them instead.",
                evidence=evidence(r.event for r in chain),
            )
        ]

    def _attach(self, event: Event) -> None:
        if event.call is None:
            return
        for record in reversed(self.chain):
            if record.event is event.call:
                record.result_event = event
                return
