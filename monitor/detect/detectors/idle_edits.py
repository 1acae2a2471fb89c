"""Idle edits: the agent edits one stretch of code again and again and its code never changes.

The agent says it will apply the fix and makes an edit -- the same text again
(the tool answers "old_string and new_string must be different"), a blank line,
a comment, a refactor undone by the next edit -- then announces the fix again
and makes another such edit.  Each edit "applied", so nothing fails and no
other detector sees a repeat, but the code is where it was.

An edit tool call that names its place (a file, and the text it replaces:
``old_string``/``new_string``, ``old_str``/``new_str``) is *idle* when the
code it leaves is code that place already had: its new text equals its old
text once white space, blank lines and whole-line comments (``#``, ``//``,
``/*``, ``*``) are dropped, or equals the code of an earlier edit of the same
place (an undo: back to the original, or to a version tried before).  The
place is the file and the first line of code of the replaced text.
``threshold`` (4) idle edits among the last ``window`` (6) edits of one place
warn.  So do ``unrun_threshold`` (3) edits of one place back to a version it
already had with no command run since the first of them that could try it
(a look at the files -- ``ls``, ``grep``, ``git diff`` -- tries nothing): a
change applied, undone and applied again, never tried (dithering).

Left alone: edits that change the code (an edit-test cycle, each round another
version), a comment or blank line added once or twice, comments added to many
places (each place edited once), writes of whole files and shell edits (no
old text to compare), and edits of other places between.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.inputs import call_io
from monitor.detect.analysis.shell import shell_command
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level

_PATH_KEYS = ("path", "file_path", "filePath", "filename", "target_file")
_OLD_KEYS = ("old_string", "old_str")
_NEW_KEYS = ("new_string", "new_str")
_OLD_KEY_SET = frozenset(_OLD_KEYS)
#: A line that is only a comment, in the common languages.
_COMMENT = re.compile(r"^(?:#|//|/\*|\*)")
_SPACE = re.compile(r"\s+")
#: Places remembered per session (the least recently edited goes).
_PLACES = 16
#: Characters of an edit's text read.
_TEXT_CHARS = 20_000

ADVICE = (
    "Your last edits left the code as it was (the same text, white space, comments, "
    "or a change undone). Write the change that fixes the problem, or say what stops you."
)


def code_of(text: str) -> list[str]:
    """The lines of code of ``text``: white space squashed, blank and comment-only lines dropped."""
    lines = []
    for line in text[:_TEXT_CHARS].splitlines():
        stripped = line.strip()
        if stripped and not _COMMENT.match(stripped):
            lines.append(_SPACE.sub(" ", stripped))
    return lines


def _first_string(args: dict[str, object], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


@dataclass(frozen=True)
class IdleEditsSettings(DetectorSettings):
    threshold: int = 4  # idle edits of one place among its last `window` edits that warn
    window: int = 6  # the edits of one place compared
    unrun_threshold: int = 3  # edits of one place back to a version it had, nothing run between


@dataclass(slots=True)
class _Place:
    """One place's recent edits: whether each was idle, and the code versions seen there."""

    edits: list[tuple[bool, EventRef]]
    #: The code versions of its last edits (before and after each), oldest first.
    versions: list[str]
    #: Its edits back to a version it had since a shell command last ran.
    unrun: int = 0


class IdleEdits(Detector[IdleEditsSettings]):
    name = "idle_edits"
    title = "Idle edits"
    Settings = IdleEditsSettings
    presets = {
        "conservative": {"threshold": 5, "unrun_threshold": 4},
        "aggressive": {"threshold": 3, "unrun_threshold": 2},
    }
    kinds = frozenset({Kind.TOOL_CALL})

    def __init__(self, settings: IdleEditsSettings | None = None):
        super().__init__(settings)
        self.places: dict[tuple[str, str], _Place] = {}
        self.last: tuple[str, str] | None = None

    def reset(self) -> None:
        self.places.clear()
        self.last = None

    def window(self) -> Sequence[Event | EventRef]:
        place = self.places.get(self.last) if self.last is not None else None
        return [event for _, event in place.edits] if place is not None else []

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        args = event.args
        if not args or _OLD_KEY_SET.isdisjoint(args):
            if shell_command(event) is not None and call_io(event).runs:
                self._ran()  # (a look at files, ``ls`` or ``git diff``, tries nothing)
            return None  # not an edit that replaces a text (most calls)
        old, new = _first_string(args, _OLD_KEYS), _first_string(args, _NEW_KEYS)
        path = _first_string(args, _PATH_KEYS)
        if old is None or new is None or not path:
            return None
        before, after = code_of(old), code_of(new)
        place = self._place((path, before[0] if before else old.strip().partition("\n")[0]))
        was, now = digest("\n".join(before)), digest("\n".join(after))
        back = now != was and now in place.versions
        idle = now == was or back
        place.versions += (was, now)
        place.edits.append((idle, ref(event)))
        if len(place.edits) > self.settings.window:
            del place.edits[0]
            del place.versions[:2]
        if back:
            place.unrun += 1
        count = sum(1 for flag, _ in place.edits if flag)
        s = self.settings
        view.note_similarity(self.name, min(1.0, count / max(1, s.threshold)))
        if idle and count >= s.threshold:
            return [self._detection(path, count, place)]
        if back and s.unrun_threshold and place.unrun >= s.unrun_threshold:
            return [self._detection(path, count, place, unrun=True)]
        return None

    def _place(self, key: tuple[str, str]) -> _Place:
        """The place an edit is of, now the most recently edited (the oldest of too many goes)."""
        place = self.places.pop(key, None) or _Place([], [])
        self.places[key] = place
        if len(self.places) > _PLACES:
            del self.places[next(iter(self.places))]
        self.last = key
        return place

    def _ran(self) -> None:
        """A shell command ran: the edits before it were tried."""
        for place in self.places.values():
            place.unrun = 0

    def _detection(self, path: str, count: int, place: _Place, unrun: bool = False) -> Detection:
        name = path.rsplit("/", 1)[-1]
        if unrun:
            message = (
                f"{place.unrun} edits of one place in {name} went back to code it already had, "
                "with nothing run between (applied, undone, applied again)"
            )
        else:
            message = (
                f"{count} of the last {len(place.edits)} edits of one place in {name} "
                "left its code as it was (the same text, white space, comments, or undone)"
            )
        return Detection(
            detector=self.name,
            level=Level.WARN,
            score=min(1.0, count / len(place.edits)),
            message=message,
            pattern=f"idle_edits:{digest(path)}",
            count=count,
            summary=f"edited the same code in {name} {count} times without changing it",
            advice=ADVICE,
            evidence=evidence([e for _, e in place.edits]),
        )
