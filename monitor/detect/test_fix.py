"""Test-fix cycles and failure cascades: two detectors about failing commands.

``test_fix``: consecutive failing test runs (pytest, npm/yarn/pnpm test, jest,
vitest, go test, cargo test, make test, unittest, rspec, …) that fail *the same
way* although the agent edits in between — the edits are not working, so the
nudge is design note 003's "step back and rethink".  An edit-test cycle whose
failure count falls, whose passing count rises or whose failing tests or
errors change is progress and starts a new streak; a passing run ends it.

``failure_cascade``: consecutive failing shell commands with no successful
tool call in between.  Different commands failing differently are an agent
adapting (``pip install erfa``, then ``pyerfa``, then a timeout): a
``notice`` at ``threshold`` (3).  The cascade is a loop -- ``warn`` -- when a
failure is the same kind as the one just before it (:func:`failure_kind`:
``brew`` then ``conda`` "command not found", ``cat`` then ``sed`` "No such
file or directory") once the streak reaches ``threshold``, or when failures
go on to ``long_threshold`` (5, the consecutive-failure limit of design note
000) with no success.  When they are file operations done by hand (``cat``,
``echo >``, ``sed -i``, ``printf >``) the advice is to use the file tools.

A command fails when its result has ``is_error`` or reports a nonzero exit code
(see :mod:`monitor.detect.failures`).  Both warn at 3 in a row — design note
003's first nudge comes at 3 repetitions — so the nudge arrives before the hard
consecutive-failure limit of 5 (design note 000, the ``limits`` detector).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref, register
from monitor.detect.failures import (
    SHELL_TOOLS,
    failed,
    failure_kind,
    is_edit,
    is_test_run,
    manual_file_op,
    run_outcome,
    shell_command,
    tests_failed,
)
from monitor.detect.fingerprints import not_an_outcome
from monitor.events import TOOL_CALL, TOOL_RESULT, Event, EventRef, Kind, Level

#: Events kept as evidence per streak (calls and results), as references:
#: a test report may be megabytes.
EVIDENCE = 12

RETHINK = (
    "Step back and rethink:\n"
    "1. Re-read the error messages carefully\n"
    "2. Consider whether your approach is fundamentally wrong\n"
    "3. Try a DIFFERENT fix strategy instead of iterating on the same one"
)
RERUN = "Re-running the tests without changing anything will not change the result."
FILE_TOOLS = (
    "Use the file tools instead of shell one-liners: read_file to read a file, "
    "write_file to create one, edit_file to change one."
)
CASCADE = (
    "Read the last error carefully; check the working directory, the environment and "
    "whether the program exists before trying another variant."
)


@dataclass(frozen=True)
class TestFixSettings(DetectorSettings):
    threshold: int = 3  # warn at the Nth consecutive failing run with the same failure


@register
class TestFix(Detector):
    name = "test_fix"
    title = "Test-fix cycle"
    Settings = TestFixSettings
    presets = {"conservative": {"threshold": 5}, "aggressive": {"threshold": 2}}
    kinds = frozenset({Kind.TOOL_CALL, Kind.TOOL_RESULT})

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, settings: TestFixSettings | None = None):
        super().__init__(settings)
        self.events: deque[EventRef] = deque(maxlen=EVIDENCE)
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.signature = ""
        self.failures: int | None = None
        self.passed: int | None = None
        self.edits_since_run = 0
        self.edits_in_streak = 0
        self.events.clear()

    def window(self) -> list[EventRef]:
        return list(self.events)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        kind = event.kind
        if kind is TOOL_CALL:
            if self.count and is_edit(event):
                self.edits_since_run += 1
            return None
        if kind is not TOOL_RESULT:
            return None
        call = event.call
        if call is None or not is_test_run(call) or view.exempt(call.tool):
            return None
        outcome = run_outcome(event)
        if not outcome.failing:
            if self.count:  # (without a streak there is nothing to forget)
                self.reset()
            return None

        progress = (
            (outcome.failures is not None and self.failures is not None and outcome.failures < self.failures)
            or (outcome.passed is not None and self.passed is not None and outcome.passed > self.passed)
        )
        if self.count and outcome.signature == self.signature and not progress:
            self.count += 1
            self.edits_in_streak += self.edits_since_run
            view.note_similarity(self.name, 1.0)
        else:
            # First failure, or the failure changed: a new streak starts here.
            self.count = 1
            self.signature = outcome.signature
            self.edits_in_streak = 0
            self.events.clear()
        self.failures = outcome.failures
        self.passed = outcome.passed
        self.edits_since_run = 0
        self.events.append(ref(call))
        self.events.append(ref(event))

        threshold = view.threshold(call.tool, self.settings.threshold)
        if self.count < threshold:
            return None
        what = outcome.headline or "the same error"
        if outcome.failures:
            what = f"{outcome.failures} failing: {what}"
        edits = self.edits_in_streak
        edited = f" despite {edits} edit{'s' if edits != 1 else ''} in between" if edits else " with no edit in between"
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, self.count / (threshold + 2)),
                message=f"{self.count} consecutive test runs failed the same way ({what[:120]}){edited}",
                pattern=f"tests:{self.signature}",
                count=self.count,
                tool=call.tool,
                summary=f"had {self.count} consecutive test failures with the same failure{edited}",
                advice=RETHINK if edits else RERUN + "\n" + RETHINK,
                evidence=evidence(self.events),
            )
        ]


@dataclass(frozen=True)
class FailureCascadeSettings(DetectorSettings):
    threshold: int = 3  # at the Nth consecutive failing shell command: notice, or warn if one failed as the last
    long_threshold: int = 5  # warn at the Nth consecutive failure, however different


@register
class FailureCascade(Detector):
    name = "failure_cascade"
    title = "Failure cascade"
    Settings = FailureCascadeSettings
    presets = {"conservative": {"threshold": 5, "long_threshold": 7},
               "aggressive": {"threshold": 2, "long_threshold": 4}}
    kinds = frozenset({Kind.TOOL_RESULT})

    def __init__(self, settings: FailureCascadeSettings | None = None):
        super().__init__(settings)
        self.programs: dict[str, int] = {}
        self.events: deque[EventRef] = deque(maxlen=EVIDENCE)
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.file_ops = 0
        self.repeated = 0  # failures of the same kind as the one before
        self.last_kind: str | None = None
        self.programs.clear()
        self.pattern = ""  # fixed when the streak first crosses the threshold
        self.events.clear()

    def window(self) -> list[EventRef]:
        return list(self.events)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        if event.kind is not TOOL_RESULT:
            return None
        if not failed(event):
            if self.count:
                self.reset()  # any successful tool call ends the cascade
            return None
        call = event.call
        command = shell_command(call)
        tool = event.tool or (call.tool if call is not None else None)
        if command is None and (tool or "").lower() not in SHELL_TOOLS:
            return None  # a failing non-shell tool neither extends nor ends it
        if not_an_outcome(event):
            return None  # cancelled with a failing sibling: that one counted already
        if view.exempt(tool):
            return None
        if tests_failed(event):
            return None  # the tests failed, not the command: test_fix's business
        self.count += 1
        kind = failure_kind(event)
        if kind and kind == self.last_kind:
            self.repeated += 1
        self.last_kind = kind
        if manual_file_op(command):
            self.file_ops += 1
            program = (command or "").split(None, 1)[0] if command else ""
            if program and (len(self.programs) < 8 or program in self.programs):
                self.programs[program] = self.programs.get(program, 0) + 1
        if call is not None:
            self.events.append(ref(call))
        self.events.append(ref(event))
        threshold = view.threshold(tool, self.settings.threshold)
        view.note_similarity(self.name, min(1.0, self.count / threshold))
        if self.count < threshold:
            return None
        long_threshold = max(threshold, self.settings.long_threshold)
        level = Level.WARN if self.repeated or self.count >= long_threshold else Level.NOTICE

        by_hand = self.file_ops * 2 >= self.count
        if level is Level.NOTICE:
            message = f"{self.count} consecutive shell commands failed, each differently: adapting, so far"
            return [Detection(detector=self.name, level=level, score=self.count / (long_threshold + 2),
                              message=message, pattern="shell_failures:adapting", count=self.count,
                              tool=tool, summary=f"had {self.count} different shell commands fail in a row",
                              advice=CASCADE, evidence=evidence(self.events))]
        if not self.pattern:
            # Stable for the whole streak so that each further failure climbs one ladder.
            self.pattern = "shell_failures:file_ops" if by_hand else "shell_failures"
        message = f"{self.count} consecutive shell commands failed"
        if self.repeated:
            message += ", again the same way as the one before"
        if self.file_ops:
            shown = ", ".join(sorted(self.programs)[:4])
            message += f" ({self.file_ops} of them file operations done by hand: {shown})"
        return [
            Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, self.count / (threshold + 2)),
                message=message,
                pattern=self.pattern,
                count=self.count,
                tool=tool,
                summary=f"had {self.count} shell commands fail in a row",
                advice=FILE_TOOLS if by_hand else CASCADE,
                evidence=evidence(self.events),
            )
        ]
