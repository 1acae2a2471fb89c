"""Loop detection: the detectors, the analysis they share, the engine that runs them.

* :mod:`~monitor.detect.base` — the :class:`Detector` interface and what a
  detector reports (:class:`Detection`);
* :mod:`~monitor.detect.detectors` — the built-in detectors, one module each,
  and ``REGISTRY``, name -> class in run order;
* :mod:`~monitor.detect.analysis` — what several detectors compute about
  events (call records, turns, failures, signatures);
* :mod:`~monitor.detect.engine` and :mod:`~monitor.detect.escalation` — the one
  pipeline that feeds events to the detectors and escalates what they find.
"""

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView
from monitor.detect.detectors import DETECTORS, REGISTRY

__all__ = ["DETECTORS", "REGISTRY", "Detection", "Detector", "DetectorSettings", "SessionView"]
