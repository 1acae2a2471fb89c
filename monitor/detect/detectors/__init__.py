"""The built-in loop detectors, one module each, and the list they run in.

Every detector implements :class:`~monitor.detect.base.Detector`; the shared
analysis they build on (call records, turns, failures, signatures) is in
:mod:`monitor.detect.analysis`.  A new detector is added to ``DETECTORS``.
"""

from __future__ import annotations

from typing import Any

from monitor.detect.base import Detector
from monitor.detect.detectors.chanting import Chanting
from monitor.detect.detectors.compaction import CompactionLoop
from monitor.detect.detectors.cycle import Cycle
from monitor.detect.detectors.exact_repeat import ExactRepeat
from monitor.detect.detectors.failure_cascade import FailureCascade
from monitor.detect.detectors.fingerprint import Fingerprint
from monitor.detect.detectors.idle_edits import IdleEdits
from monitor.detect.detectors.limits import Limits
from monitor.detect.detectors.monologue import Monologue
from monitor.detect.detectors.output_similarity import OutputSimilarity
from monitor.detect.detectors.repeated_result import RepeatedResult
from monitor.detect.detectors.retry_rounds import RetryRounds
from monitor.detect.detectors.same_reply import SameReply
from monitor.detect.detectors.similar_args import SimilarArgs
from monitor.detect.detectors.stale_outcome import StaleOutcome
from monitor.detect.detectors.swarm import Swarm
from monitor.detect.detectors.test_fix import TestFix
from monitor.detect.detectors.turn_similarity import TurnSimilarity
from monitor.detect.detectors.waiting import Waiting

#: Every detector, in the order they run (and report) for each event.
DETECTORS: tuple[type[Detector[Any]], ...] = (
    ExactRepeat,
    Cycle,
    Fingerprint,
    SimilarArgs,
    RepeatedResult,
    StaleOutcome,
    OutputSimilarity,
    TurnSimilarity,
    Chanting,
    Monologue,
    TestFix,
    FailureCascade,
    CompactionLoop,
    Swarm,
    Limits,
    Waiting,
    RetryRounds,
    IdleEdits,
    SameReply,
)

#: Detector name (its ``[detectors.<name>]`` table) -> class, in run order.
REGISTRY: dict[str, type[Detector[Any]]] = {cls.name: cls for cls in DETECTORS}
