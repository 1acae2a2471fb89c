"""A command stopped without a status that printed nothing is no outcome (issue 31).

Vorflux records a call the harness stopped (killed, timed out) as exit code -1
with empty output: it says nothing of how the command went, so the failure
streaks (``failure_cascade``, ``limits``) neither count it nor end at it.
"""

from __future__ import annotations

from pathlib import Path

from monitor.detect.analysis.failures import failed, no_status
from monitor.events import Event, Kind
from monitor.formats import documents
from monitor.scan import scan

CORPUS = Path(__file__).parent / "corpus"


def _result(content: str, code: int) -> Event:
    call = Event(Kind.TOOL_CALL, "s", 0.0, tool="bash", args={"command": "python setup.py build_ext"})
    return Event(
        Kind.TOOL_RESULT,
        "s",
        1.0,
        tool="bash",
        content=content,
        is_error=True,
        meta={"exit_code": code},
        call=call,
    )


def test_stopped_without_output_is_no_status() -> None:
    result = _result("", -1)
    assert failed(result)
    assert no_status(result)


def test_output_or_a_real_status_is_an_outcome() -> None:
    assert not no_status(_result("Successfully installed numpy-1.21.0", -1))
    assert not no_status(_result("", 1))


def test_stopped_builds_do_not_reach_the_failure_limit() -> None:
    # vorflux astropy-7606 (development part): a build through changing setbacks,
    # two of its calls stopped with no output; the limit of 5 is not reached.
    run = CORPUS / "vorflux-opus46" / "astropy__astropy-7606.json.gz"
    events, _ = documents.load(run, session="astropy", named=True)
    assert sum(1 for e in events if e.kind is Kind.TOOL_RESULT and not e.content.strip()) >= 2
    report = scan([str(run)])
    assert not [d for d in report.detections if d.detector == "limits" and d.level.name != "NOTICE"]
