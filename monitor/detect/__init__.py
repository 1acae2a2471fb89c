"""Loop detectors: one module per detector, all behind :class:`~monitor.detect.base.Detector`.

Importing this package registers every detector in ``REGISTRY`` (in the order
below, which is also the order they run in).
"""

from importlib import import_module

from monitor.detect.base import REGISTRY, Detection, Detector, DetectorSettings, SessionView

#: Detector modules, in run order.  A module listed here that does not exist
#: yet is skipped so that the package stays importable while detectors land.
DETECTOR_MODULES = (
    "exact_repeat",
    "cycle",
    "fingerprint",
    "similar_args",
    "repeated_result",
    "output_similarity",
    "turn_similarity",
    "chanting",
    "monologue",
    "test_fix",
    "compaction",
    "swarm",
    "limits",
    "waiting",
    "retry_rounds",
)

for _name in DETECTOR_MODULES:
    try:
        import_module(f"monitor.detect.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"monitor.detect.{_name}":
            raise

__all__ = ["REGISTRY", "Detection", "Detector", "DetectorSettings", "SessionView"]
