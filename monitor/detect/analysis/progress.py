"""Failing forward: a failed call that dealt with what the failure before it named.

An agent installing missing dependencies one at a time meets a new error at
every step: ``No module named 'pytz'`` → ``pip install pytz && python repro.py``
→ ``No module named 'sqlparse'`` → …  Each failed call acts on what the
failure before it *named* (the module, the file, the setting) and then fails
in a way not seen before in the streak, naming something the call itself did
not (the next missing thing), or failing in a *kind* of failure the streak has
not met (zsh's ``no matches found: /Users/liza/Videos/%(title)s…`` → the
pattern quoted in ``-o '~/Videos/%(title)s…'`` → the program now runs and
meets ``HTTP Error 403``): it moved on.  A path the failure names is touched
by a call that writes it from the home directory (the shell printed ``~/x``
expanded).  A count of such failures
is no evidence of a loop, so ``failure_cascade`` and ``limits`` start their
streak again at a failure that moved on (:meth:`FailingForward.moved_on`).

Left alone: the same failure again after acting on it (``No module named
'foo'`` → ``pip install foo && …`` → ``No module named 'foo'``: not moved on),
a failure that comes back from earlier in the streak (A, B, A), or whose kind
does (``cat a/config.yml`` → "No such file" → ``cat b/config.yml`` → "No such
file": looking in several places), a failure
that names only what its own call named (``cat conf/config.yml`` → "No such
file": looking for one file in several places), and failures
whose next call does not touch what they named (``brew`` then ``conda``:
"command not found"; five URLs fetched, five different HTTP errors).

Calls one reply made together are one round: when several of them fail (two
parallel greps of one missing file), the streak counts one failure
(:meth:`FailingForward.joins_round`).  A call is of the reply before when an
adapter says so (``meta["reply"]``, as the Vorflux and Claude Code adapters do), or when
it was made before the earlier failure's result was back.

A failure's *names* are the quoted strings, paths, dotted names and
ALL_CAPS settings on its telling line (the last line that reads like an
error, else its last line), at most :data:`MAX_NAMES`; what a call *touches*
is its command line, or its arguments' text.
"""

from __future__ import annotations

import re

from monitor.detect.analysis.failures import clip_tail, failure_kind
from monitor.detect.analysis.shell import output_lines, shell_command
from monitor.detect.analysis.waits import waited
from monitor.events import Event

#: Names kept from one failure, and failure kinds remembered per streak.
MAX_NAMES = 32
MAX_SEEN = 16
#: How much of a call's text is searched for a name.
CALL_CHARS = 4000

_NAMES = re.compile(
    r"'([^'\s]{2,80})'|\"([^\"\s]{2,80})\"|`([^`\s]{2,80})`|‘([^’\s]{2,80})’"
    r"|((?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]+)*|[\w.@+-]+(?:/[\w.@+-]+)+)"
    r"|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b"
    r"|\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b"
)
#: A path a call writes from the home directory (``~/Videos``); a shell prints it expanded.
_HOME_PATH = re.compile(r"~(/[\w.@+-]+(?:/[\w.@+-]+)*)")
_ERRORISH = re.compile(
    r"error|exception|not found|no such|cannot|can't|could not|denied|failed|missing", re.I
)


def _telling_line(result: Event) -> str:
    lines = [line.strip() for line in output_lines(clip_tail(result.content))]
    for line in reversed(lines[-12:]):
        if _ERRORISH.search(line):
            return line[:400]
    return lines[-1][:400] if lines else ""


def failure_names(result: Event) -> frozenset[str]:
    """What a failed result's telling line names (modules, files, settings);
    worked out once per result (``failure_cascade`` and ``limits`` both ask)."""
    known: frozenset[str] | None = result.facts.failure_names
    if known is not None:
        return known
    found: set[str] = set()
    for match in _NAMES.finditer(_telling_line(result)):
        name = next(group for group in match.groups() if group)
        if match.group(5):
            name = name.rstrip(".")  # a path ending a sentence: its full stop is not part of it
        if len(name) >= 2:
            found.add(name)
            if len(found) >= MAX_NAMES:
                break
    names = result.facts.failure_names = frozenset(found)
    return names


def _call_text(call: Event | None) -> str:
    if call is None:
        return ""
    text = shell_command(call)
    if text is None:
        args = call.args or {}
        text = " ".join(str(value) for value in args.values())
    return text[:CALL_CHARS]


def touches(text: str, name: str) -> bool:
    """Whether a call's text touches a name a failure gave: the name itself,
    or, for an absolute path, the same path written from the home directory
    (``~/Videos`` for the ``/Users/liza/Videos`` the shell printed)."""
    if name in text:
        return True
    if not name.startswith("/"):
        return False
    return any(len(name) > len(tail) and name.endswith(tail) for tail in _HOME_PATH.findall(text))


def round_of(result: Event) -> tuple[object, int, int]:
    """A result's round: its call's reply (``meta["reply"]``, if an adapter
    knows it), the call's seq and the result's seq."""
    call = result.call
    reply = call.meta.get("reply") if call is not None and call.meta else None
    return (reply, call.seq if call is not None else result.seq, result.seq)


def same_round(before: tuple[object, int, int] | None, now: tuple[object, int, int]) -> bool:
    """Whether the result of round ``now`` came from the same reply as ``before``'s."""
    if before is None:
        return False
    if now[0] is not None and now[0] == before[0]:
        return True  # the adapter says so
    return now[1] < before[2]  # made before the earlier result was back


class FailingForward:
    """Per streak: the failure before, and the kinds of failure seen so far."""

    __slots__ = ("names", "seen", "kinds", "round", "kind")

    def __init__(self) -> None:
        self.names: frozenset[str] = frozenset()
        self.seen: dict[tuple[str, frozenset[str]], None] = {}
        #: The failure kinds seen so far in the streak.
        self.kinds: dict[str, None] = {}
        #: The last failure's round: its call's reply (if known), the call's and the result's seq.
        self.round: tuple[object, int, int] | None = None
        #: The last failure's kind (:func:`failure_kind`).
        self.kind: str | None = None

    def clear(self) -> None:
        """A success: the next failure starts a new streak."""
        self.names = frozenset()
        self.seen.clear()
        self.kinds.clear()
        self.round = None
        self.kind = None

    def waits_it_out(self, result: Event) -> bool:
        """Feed each failed result (after :meth:`joins_round`): True when its call
        waited first and it failed the way the failure before did (``sleep 30 &&
        apt-get install …`` while another process holds the lock): the same
        attempt, waiting for what blocks it to clear, not another failure
        (``waiting`` judges polls)."""
        kind, self.kind = self.kind, failure_kind(result)
        call = result.call
        return bool(kind) and kind == self.kind and call is not None and waited(call) > 0

    def joins_round(self, result: Event) -> bool:
        """Feed each failed result first: True when its call was made in the
        same round as the failure before (one reply's calls, made together)."""
        now = round_of(result)
        before, self.round = self.round, now
        return same_round(before, now)

    def moved_on(self, result: Event) -> bool:
        """Feed each failed result of the streak in order: True when its call
        acted on what the failure before named and it failed in a new way,
        naming something the call itself did not (the next missing thing), or
        only part of what the failure before named (the rest dealt with), or in a
        kind of failure the streak has not met."""
        names = failure_names(result)
        kind = failure_kind(result)
        key = (kind, names)
        new = key not in self.seen
        moved = False
        if new and self.seen and self.names:
            text = _call_text(result.call)
            # It acted on what the last failure named, and its own failure names
            # something the call did not (the next missing thing, found), or is
            # a kind of failure not met before (the last one dealt with).
            # Or it names only part of what the last one named (the rest dealt with).
            moved = any(touches(text, n) for n in self.names) and (
                any(n not in text for n in names)
                or kind not in self.kinds
                or bool(names)
                and names < self.names
            )
        if new and len(self.seen) < MAX_SEEN:
            self.seen[key] = None
        if len(self.kinds) < MAX_SEEN:
            self.kinds[kind] = None
        self.names = names
        return moved
