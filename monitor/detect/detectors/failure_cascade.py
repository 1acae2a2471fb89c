"""Failure cascades: shell commands failing one after another, nothing succeeding.

Consecutive failing shell commands with no successful tool call in between.
Different commands failing differently are an agent adapting (``pip install
erfa``, then ``pyerfa``, then a timeout): a ``notice`` at ``threshold`` (3).
The cascade is a loop -- ``warn`` -- when a failure is the same kind as the
one just before it (:func:`failure_kind`: ``brew`` then ``conda`` "command not
found", ``cat`` then ``sed`` "No such file or directory") once the streak
reaches ``threshold``, or when failures go on to ``long_threshold`` (5, the
consecutive-failure limit of design note 000) with no success.  A failure
whose command acted on what the failure before it named and that fails in a
new way (naming the next missing thing, or a kind of failure the streak had
not met: the quoting fixed, then an HTTP 403) moved on
(:mod:`~monitor.detect.analysis.progress`: installing the
missing module, then meeting the next one): the streak starts again at it.
The command before narrowed or filtered, failing the same way but showing
more than its error line anew (``pip install A B C | tail -10`` failing to
build, then ``pip install A | tail -30`` to see why:
:func:`~monitor.detect.analysis.failures.closer_look`) is a closer look at
that failure, not the same failure again; nor is an install of other
versions of a package the command before pinned (``numpy==1.23.5``, then
``numpy==1.24.0``: a search over versions,
:func:`~monitor.detect.analysis.failures.other_versions`).  A command retried after a wait
failing the same way (``sleep 30 && apt-get …`` while a lock is held) is the
same attempt, waiting: it joins the failure before.  When they are
file operations done by hand (``cat``, ``echo >``, ``sed -i``, ``printf >``)
the advice is to use the file tools.

A command fails when its result has ``is_error`` or reports a nonzero exit
code (see :mod:`monitor.detect.analysis.failures`); failing test runs are
``test_fix``'s.  It warns at 3 in a row, before the hard consecutive-failure
limit of 5 (design note 000, the ``limits`` detector).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.analysis.edits import manual_file_op
from monitor.detect.analysis.failures import (
    closer_look,
    failed,
    failure_kind,
    no_status,
    other_versions,
    tests_failed,
)
from monitor.detect.analysis.outcomes import body_lines
from monitor.detect.analysis.progress import FailingForward
from monitor.detect.analysis.shell import SHELL_TOOLS, shell_command
from monitor.detect.analysis.signatures import not_an_outcome
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import TOOL_RESULT, Event, EventRef, Kind, Level

#: Events kept as evidence per streak (calls and results), as references.
EVIDENCE = 12

FILE_TOOLS = (
    "Use the file tools instead of shell one-liners: read_file to read a file, "
    "write_file to create one, edit_file to change one."
)
CASCADE = (
    "Read the last error carefully; check the working directory, the environment and "
    "whether the program exists before trying another variant."
)


@dataclass(frozen=True)
class FailureCascadeSettings(DetectorSettings):
    threshold: int = (
        3  # at the Nth consecutive failing shell command: notice, or warn if one failed as the last
    )
    long_threshold: int = 5  # warn at the Nth consecutive failure, however different


class FailureCascade(Detector[FailureCascadeSettings]):
    name = "failure_cascade"
    title = "Failure cascade"
    Settings = FailureCascadeSettings
    presets = {
        "conservative": {"threshold": 5, "long_threshold": 7},
        "aggressive": {"threshold": 2, "long_threshold": 4},
    }
    kinds = frozenset({Kind.TOOL_RESULT})

    def __init__(self, settings: FailureCascadeSettings | None = None):
        super().__init__(settings)
        self.programs: dict[str, int] = {}
        self.events: deque[EventRef] = deque(maxlen=EVIDENCE)
        self.forward = FailingForward()
        self.reset()

    def reset(self) -> None:
        self.forward.clear()
        self._restart()

    def _restart(self) -> None:
        """A new streak (after a success, or at a failure that moved on)."""
        self.count = 0
        self.file_ops = 0
        self.repeated = 0  # failures of the same kind as the one before
        self.last_kind: str | None = None
        self.last_lines: frozenset[int] = frozenset()  # outcomes.body_lines of the failure before
        self.last_command: str | None = None  # its command
        self.programs.clear()
        self.pattern = ""  # fixed when the streak first crosses the threshold
        self.events.clear()

    def window(self) -> Sequence[Event | EventRef]:
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
        if not self._counts(event, command, tool, view):
            return None
        if not self._count(event, command):
            return None
        threshold = view.threshold(tool, self.settings.threshold)
        view.note_similarity(self.name, min(1.0, self.count / threshold))
        if self.count < threshold:
            return None
        long_threshold = max(threshold, self.settings.long_threshold)
        if self.repeated or self.count >= long_threshold:
            return [self._failing(tool, threshold)]
        return [self._adapting(tool, long_threshold)]

    def _counts(self, event: Event, command: str | None, tool: str | None, view: SessionView) -> bool:
        """Whether a failed result is a shell command failing in its own right."""
        if command is None and (tool or "").lower() not in SHELL_TOOLS:
            return False  # a failing non-shell tool neither extends nor ends it
        if not_an_outcome(event) or no_status(event):
            return False  # cancelled with a failing sibling, or stopped with no status and no output
        if view.tool_overrides and view.exempt(tool):
            return False
        return not tests_failed(event)  # the tests failed, not the command: test_fix's business

    def _count(self, event: Event, command: str | None) -> bool:
        """Add a failed command to the streak; False when it only joined the
        failure before (one reply's parallel calls, or a wait for the same obstacle: one attempt)."""
        if self.forward.joins_round(event) or self.forward.waits_it_out(event):
            self.events.append(ref(event))  # one attempt: one reply's calls, or a wait for the same obstacle
            return False
        if self.forward.moved_on(event):
            self._restart()  # it dealt with the last failure and met a new one: progress
        self.count += 1
        kind = failure_kind(event)
        lines = body_lines(event.content)
        if (
            kind
            and kind == self.last_kind
            and not closer_look(self.last_command, command, self.last_lines, lines)
            and not other_versions(self.last_command, command)  # a search over versions
        ):
            self.repeated += 1
        self.last_kind, self.last_lines, self.last_command = kind, lines, command
        if manual_file_op(command):
            self.file_ops += 1
            program = command.split(None, 1)[0] if command else ""
            if program and (len(self.programs) < 8 or program in self.programs):
                self.programs[program] = self.programs.get(program, 0) + 1
        if event.call is not None:
            self.events.append(ref(event.call))
        self.events.append(ref(event))
        return True

    def _adapting(self, tool: str | None, long_threshold: int) -> Detection:
        """Each command failed differently: a notice (the agent may be adapting)."""
        return Detection(
            detector=self.name,
            level=Level.NOTICE,
            score=self.count / (long_threshold + 2),
            message=f"{self.count} consecutive shell commands failed, each differently: adapting, so far",
            pattern="shell_failures:adapting",
            count=self.count,
            tool=tool,
            summary=f"had {self.count} different shell commands fail in a row",
            advice=CASCADE,
            evidence=evidence(self.events),
        )

    def _failing(self, tool: str | None, threshold: int) -> Detection:
        """Failing the same way again, or for long: a warning."""
        by_hand = self.file_ops * 2 >= self.count
        if not self.pattern:
            # Stable for the whole streak so that each further failure climbs one ladder.
            self.pattern = "shell_failures:file_ops" if by_hand else "shell_failures"
        message = f"{self.count} consecutive shell commands failed"
        if self.repeated:
            message += ", again the same way as the one before"
        if self.file_ops:
            shown = ", ".join(sorted(self.programs)[:4])
            message += f" ({self.file_ops} of them file operations done by hand: {shown})"
        return Detection(
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
