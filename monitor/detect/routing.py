"""Which ``observe`` methods the engine calls for each kind of event, per session.

A detector observes the kinds of events in its ``kinds``; while it has
nothing to do with some of them (``exact_repeat`` awaits no result,
``test_fix`` counts no streak for a call to add to), it says so with
:meth:`~monitor.detect.base.SessionView.listen`, and the engine skips it for
those kinds until it asks for them again (a call to ``observe`` that returns
at once costs ~500 instructions; a result went to fourteen).  A detector
starts with its ``listening`` kinds.  Asking for a kind takes effect from the
next event on; giving one up is only ever an economy, so a detector may give
it up lazily, the next time it is called for nothing.  A change costs a few
thousand instructions: it pays for detectors idle for long stretches
(``cycle``, whose runs start and break every few calls, does not use it).

:class:`Plan` is what sessions with the same detectors and mutes share: the
positions of the methods to call and, per state of listening (an ``int`` of
bits, one per detector and kind it does not listen to), the methods for each
kind.  :class:`Router` holds one session's bound methods and its state.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from monitor.detect.base import Detector, TurnDetector
from monitor.events import Kind

_ALL_KINDS = frozenset(Kind)
#: A kind's bit within a detector's eight.
_KIND_BIT = {kind: index for index, kind in enumerate(Kind)}


def _picker(indexes: Any) -> Any:
    """What gives the tuple of a sequence's items at ``indexes`` (an
    ``itemgetter`` gives a lone item, not a tuple, for one index)."""
    if len(indexes) > 1:
        return itemgetter(*indexes)
    if indexes:
        return lambda items, at=indexes[0]: (items[at],)
    return lambda items: ()


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

    def __init__(
        self,
        detectors: list[Detector],
        muted: set[str] | frozenset[str],
        global_by_kind: dict[Kind, list[Detector]],
    ):
        active = [d for d in detectors if d.name not in muted]
        gated = [
            d
            for d in active
            if isinstance(d, TurnDetector)
            and type(d).observe is TurnDetector.observe
            and d.kinds == _ALL_KINDS
        ]
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
                slot_list.append(
                    (position.get(id(detector), detector), "observe_completed" if completed else "observe")
                )
            return slots[key]

        observing = {
            kind: [*(d for d in active if kind in d.kinds), *global_by_kind.get(kind, ())] for kind in Kind
        }
        # The session's slots first, then the global ones (bound once, here).
        for shared in (False, True):
            for detector in (d for row in observing.values() for d in row):
                if (id(detector) not in position) is shared:
                    slot(detector, id(detector) in skip)
                    if id(detector) not in skip:
                        slot(detector, False)
        #: Per kind, ``(bit, slot, quiet slot or None)`` of each method in run order.
        self._rows: dict[Kind, tuple[tuple[int, int, int | None], ...]] = {}
        for kind, row in observing.items():
            self._rows[kind] = tuple(
                (
                    0 if id(d) not in position else 1 << (position[id(d)] * 8 + _KIND_BIT[kind]),
                    slot(d, id(d) in skip),
                    None if id(d) in skip else slot(d, False),
                )
                for d in row
            )
        self.slots = tuple(slot_list)
        mine = [(at, name) for at, name in slot_list if at.__class__ is int]
        self._pick_detectors = _picker([at for at, _ in mine])
        self._names = tuple(name for _, name in mine)
        self._global_bound = tuple(getattr(d, name) for d, name in slot_list[len(mine) :])
        #: Detector name -> (its position, the bits of its kinds).
        self._detectors = {
            d.name: (at, _bits(at, d.kinds)) for at, d in enumerate(detectors) if d.name not in muted
        }
        #: The state a new session starts in: each detector with its ``listening`` kinds.
        self.start = 0
        for at, detector in enumerate(detectors):
            if detector.listening is not None and detector.name not in muted:
                self.start |= _bits(at, detector.kinds - detector.listening)
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._variants: dict[int, dict[Kind, tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        self._changes: dict[tuple[int, str, frozenset[Kind]], tuple[int, tuple]] = {}
        self._layouts: dict[int, tuple] = {}

    def bind(self, detectors: list[Detector]) -> list[Any]:
        """The methods of the slots, bound to a session's ``detectors``."""
        bound = list(map(getattr, self._pick_detectors(detectors), self._names))
        bound += self._global_bound
        return bound

    def layout(self, off: int) -> tuple:
        """:meth:`variant` for a new dispatch: ``(lists, kinds, calls,
        quiet)``: what picks each distinct list of methods from the bound
        ones, and what picks from those lists each kind's own and its quiet
        one (one tuple per distinct list, shared between kinds)."""
        found = self._layouts.get(off)
        if found is None:
            lists: dict[tuple[int, ...], int] = {}
            variant = self.variant(off)
            calls = [lists.setdefault(slots, len(lists)) for slots, _ in variant.values()]
            quiet = [lists.setdefault(slots, len(lists)) for _, slots in variant.values()]
            found = self._layouts[off] = (
                tuple(map(_picker, lists)),
                tuple(variant),
                _picker(calls),
                _picker(quiet),
            )
        return found

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
            changed = tuple(
                (kind, *map(_picker, after[kind])) for kind in Kind if after[kind] != before[kind]
            )
            found = self._changes[key] = (now, changed)
        return found


class Router:
    """One session's dispatch: per kind, the bound methods to call
    (``observers``) and the quiet ones, in its state of listening."""

    __slots__ = ("plan", "bound", "off", "observers", "quiet")

    def __init__(self, plan: Plan, detectors: list[Detector], off: int):
        self.plan = plan
        bound = self.bound = plan.bind(detectors)
        self.off = off
        lists, kinds, calls, quiet = plan.layout(off)
        made = [pick(bound) for pick in lists]
        self.observers: dict[Kind, tuple] = dict(zip(kinds, calls(made)))
        self.quiet: dict[Kind, tuple] = dict(zip(kinds, quiet(made)))

    def listen(self, name: str, kinds: frozenset[Kind]) -> None:
        """Detector ``name`` listens to ``kinds`` (of its own) from the next event on."""
        off = self.off
        now, changed = self.plan.change(off, name, kinds)
        if now != off:
            self.off = now
            bound = self.bound
            for kind, calls, quiet in changed:
                self.observers[kind] = calls(bound)
                self.quiet[kind] = quiet(bound)
