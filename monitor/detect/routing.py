"""Which ``observe`` methods the engine calls for each kind of event, per session.

A detector observes the kinds of events in its ``kinds``; while it has
nothing to do with some of them (``exact_repeat`` awaits no result, ``cycle``
has no run for a result to confirm), it says so with
:meth:`~monitor.detect.base.SessionView.listen`, and the engine skips it for
those kinds until it asks for them again (a call to ``observe`` that returns
at once costs ~900 instructions; a result went to fourteen).  A detector
starts with its ``listening`` kinds.  Asking for a kind takes effect from the
next event on; giving one up is only ever an economy, so a detector may give
it up lazily, the next time it is called for nothing.

:class:`Plan` is what sessions with the same detectors and mutes share: the
positions of the methods to call and, per state of listening (an ``int`` of
bits, one per detector and kind it does not listen to), the methods for each
kind.  :class:`Router` holds one session's bound methods and its state.
"""

from __future__ import annotations

from typing import Any

from monitor.detect.base import Detector, TurnDetector
from monitor.events import Kind

_ALL_KINDS = frozenset(Kind)
#: A kind's bit within a detector's eight.
_KIND_BIT = {kind: index for index, kind in enumerate(Kind)}


def _bits(at: int, kinds: frozenset[Kind] | set[Kind]) -> int:
    """The bits of the detector at position ``at`` for ``kinds``."""
    bits = 0
    for kind in kinds:
        bits |= 1 << (at * 8 + _KIND_BIT[kind])
    return bits


class Plan:
    """The dispatch of sessions with the same detectors and mutes (held by
    position, so that it holds no session's objects but global detectors).

    ``slots`` are ``(detector, method name)``: the detector a position in the
    session's ``detectors`` or a global one.  Turn detectors whose ``observe``
    is :meth:`TurnDetector.observe` share the session's turn tracker, which
    the engine feeds itself (``turn_gate``, their ``same_turn_seconds``): for
    an event that completes no turn it runs the *quiet* methods (the same in
    the same order, minus theirs), for one that does, their
    :meth:`TurnDetector.observe_completed`."""

    def __init__(self, detectors: list[Detector], muted: set[str] | frozenset[str],
                 global_by_kind: dict[Kind, list[Detector]]):
        active = [d for d in detectors if d.name not in muted]
        gated = [d for d in active if isinstance(d, TurnDetector)
                 and type(d).observe is TurnDetector.observe and d.kinds == _ALL_KINDS]
        seconds = {d.settings.same_turn_seconds for d in gated}
        self.turn_gate: float | None = seconds.pop() if len(seconds) == 1 else None
        skip = {id(d) for d in gated} if self.turn_gate is not None else set()
        position = {id(d): at for at, d in enumerate(detectors)}
        slots: dict[tuple[int, bool], int] = {}
        slot_list: list[tuple[Any, str]] = []

        def slot(detector: Detector, completed: bool) -> int:
            key = (id(detector), completed)
            if key not in slots:
                slots[key] = len(slot_list)
                slot_list.append((position.get(id(detector), detector),
                                  "observe_completed" if completed else "observe"))
            return slots[key]

        #: Per kind, ``(bit, slot, quiet slot or None)`` of each method in run order.
        self._rows: dict[Kind, tuple[tuple[int, int, int | None], ...]] = {}
        for kind in Kind:
            row = []
            for detector in [*(d for d in active if kind in d.kinds), *global_by_kind.get(kind, ())]:
                at = position.get(id(detector))
                bit = 0 if at is None else 1 << (at * 8 + _KIND_BIT[kind])
                row.append((bit, slot(detector, id(detector) in skip),
                            None if id(detector) in skip else slot(detector, False)))
            self._rows[kind] = tuple(row)
        self.slots = tuple(slot_list)
        #: Detector name -> (its position, the bits of its kinds).
        self._detectors = {d.name: (at, _bits(at, d.kinds)) for at, d in enumerate(detectors)
                           if d.name not in muted}
        #: The state a new session starts in: each detector with its ``listening`` kinds.
        self.start = 0
        for at, detector in enumerate(detectors):
            if detector.listening is not None and detector.name not in muted:
                self.start |= _bits(at, detector.kinds - detector.listening)
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._variants: dict[int, dict[Kind, tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        self._changes: dict[tuple[int, str, frozenset[Kind]], tuple[int, tuple]] = {}

    def variant(self, off: int) -> dict[Kind, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Per kind, the slots to call and the quiet ones, in state ``off``."""
        found = self._variants.get(off)
        if found is None:
            intern = self._interned.setdefault
            found = self._variants[off] = {}
            for kind, row in self._rows.items():
                calls = tuple(at for bit, at, _ in row if not off & bit)
                quiet = tuple(at for bit, _, at in row if at is not None and not off & bit)
                found[kind] = (intern(calls, calls), intern(quiet, quiet))
        return found

    def change(self, off: int, name: str, kinds: frozenset[Kind]) -> tuple[int, tuple]:
        """What detector ``name`` listening to ``kinds`` changes in state
        ``off``: the new state, and ``(kind, slots, quiet slots)`` of each kind
        whose methods change (memoized: a session goes back and forth)."""
        key = (off, name, kinds)
        found = self._changes.get(key)
        if found is None:
            at, mine = self._detectors.get(name, (0, 0))  # (a muted or global one: no change)
            now = off & ~mine | mine & ~_bits(at, kinds)
            before, after = self.variant(off), self.variant(now)
            changed = tuple((kind, *after[kind]) for kind in Kind if after[kind] != before[kind])
            found = self._changes[key] = (now, changed)
        return found


class Router:
    """One session's dispatch: per kind, the bound methods to call
    (``observers``) and the quiet ones, in its state of listening."""

    __slots__ = ("plan", "bound", "off", "observers", "quiet")

    def __init__(self, plan: Plan, detectors: list[Detector], off: int):
        self.plan = plan
        self.bound = [getattr(detectors[at] if at.__class__ is int else at, name) for at, name in plan.slots]
        self.off = off
        # One tuple per distinct list, shared between kinds.
        made: dict[tuple[int, ...], tuple] = {}
        self.observers: dict[Kind, tuple] = {}
        self.quiet: dict[Kind, tuple] = {}
        for kind, (calls, quiet) in plan.variant(off).items():
            self.observers[kind] = made.get(calls) or made.setdefault(calls, self._methods(calls))
            self.quiet[kind] = made.get(quiet) or made.setdefault(quiet, self._methods(quiet))

    def _methods(self, slots: tuple[int, ...]) -> tuple:
        return tuple(map(self.bound.__getitem__, slots))

    def listen(self, name: str, kinds: frozenset[Kind]) -> None:
        """Detector ``name`` listens to ``kinds`` (of its own) from the next event on."""
        off = self.off
        now, changed = self.plan.change(off, name, kinds)
        if now != off:
            self.off = now
            bound = self.bound.__getitem__
            for kind, calls, quiet in changed:
                self.observers[kind] = tuple(map(bound, calls))
                self.quiet[kind] = tuple(map(bound, quiet))
