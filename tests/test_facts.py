"""What the pipeline works out about an event lives in ``Event.facts``, each fact with one owner.

A fact is computed and memoized by the one module that knows how
(``failures.failed``, ``calls.call_record``, ``waits.waited``, …); everything
else asks that module.  A detector that reads a memo itself copies its
"not computed yet" rule, which is how three different sentinels came about.
"""

from __future__ import annotations

import re
from pathlib import Path

from monitor.events import Event, Facts, Kind

ROOT = Path(__file__).resolve().parent.parent / "monitor"

#: Module (relative to monitor/) -> the facts it computes and reads itself.
OWNERS: dict[str, set[str]] = {
    "events.py": {"call_key", "args_rewritten"},  # EventRef's call snapshot
    "text.py": {"call_key", "args_rewritten", "result_key", "outcome_key"},
    "hub/snapshots.py": {"call_key"},  # a bounded copy keeps a bounded key
    "detect/base.py": {"ref", "record"},
    "detect/engine.py": {"spark"},
    "detect/analysis/calls.py": {"record", "ref", "call_key"},
    "detect/analysis/shell.py": {"shell_command"},
    "detect/analysis/testruns.py": {"is_test_run"},
    "detect/analysis/failures.py": {
        "failed",
        "run_outcome",
        "comparable_failure",
        "failure_kind",
    },
    "detect/analysis/signatures.py": {
        "fingerprint",
        "ack",
        "not_an_outcome",
        "failure_signature",
        "primary_args",
    },
    "detect/analysis/waits.py": {"waited", "wait_only"},
    "detect/analysis/progress.py": {"failure_names"},
}

_USE = re.compile(r"\.facts\.(\w+)")
#: ``facts = event.facts``, then ``facts.<name>``.
_ALIAS = re.compile(r"\bfacts = \w+\.facts\b")
_ALIASED = re.compile(r"\bfacts\.(\w+)")


def test_every_fact_is_touched_only_by_its_owner():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        assert ".cache[" not in text and ".cache.get(" not in text, name
        used = set(_USE.findall(text))
        if _ALIAS.search(text):
            used |= set(_ALIASED.findall(text))
        wrong += [f"{name}: facts.{fact}" for fact in sorted(used - OWNERS.get(name, set()))]
    assert not wrong, wrong


def test_every_fact_has_an_owner():
    declared = {name for name in vars(Facts) if not name.startswith("_")}
    owned = set().union(*OWNERS.values())
    assert declared == owned


def test_an_event_has_no_cache_any_more():
    assert not hasattr(Event(Kind.MESSAGE, "s", 0.0), "cache")
