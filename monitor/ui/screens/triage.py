"""Triage on the dashboard, as in k9s: mark several sessions and act on all of them at once.

A mixin for :class:`~monitor.ui.screens.dashboard.DashboardScreen`:

* ``space`` marks or unmarks the selected session (``●`` before its id); ``v`` starts a
  visual range (every row between where it started and the cursor is marked as the cursor
  moves), ``v`` again ends it; ``x`` clears the marks.
* With sessions marked, ``a`` (acknowledge), ``f`` (false positive), ``K`` (kill) and
  ``p`` (pause, or resume when all are paused) act on every marked session instead of the
  selected one.  Each is one action per session in the
  hub, recorded in the store before it is carried out, exactly as from one session; the
  outcome is one notice listing what happened to each.  ``K`` opens ONE confirmation listing
  the sessions (and those refused, with why); each kill is proven by the hub on its own
  (same user, pid and start time; never pid 1, loopwatch or its parent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import getters
from textual.binding import Binding

from monitor.events import Level
from monitor.ui.host import HostApp, ScreenMixin
from monitor.ui.literal import visible
from monitor.ui.render import plural
from monitor.ui.screens.bulk_kill import BulkKillScreen, KillPlan
from monitor.ui.widgets.dashboard.sessions_table import SessionsTable

TRIAGE_BINDINGS = [
    Binding(
        "space", "mark", "Mark", id="mark", tooltip="Mark or unmark the session (a, f, K act on all marked)"
    ),
    Binding(
        "v",
        "mark_range",
        "Range",
        show=False,
        id="mark.range",
        tooltip="Mark a range: v, move with j/k, v again",
    ),
    Binding("x", "unmark_all", "Unmark", show=False, id="mark.clear", tooltip="Clear every mark"),
]
#: Action kind -> (past tense for the summary, why a session is skipped before acting).
BULK_TITLES = {
    "ack": "Acknowledged",
    "false_positive": "False positive",
    "kill": "Kill",
    "pause": "Paused",
    "resume": "Resumed",
}


class DashboardTriage(ScreenMixin):
    """Marks and the actions on every marked session."""

    if TYPE_CHECKING:
        app = getters.app(HostApp)

        @property
        def table(self) -> SessionsTable: ...

    #: The row where a visual range started (``v``), and the marks made before it.
    range_anchor: int | None = None
    _marks_before: frozenset[str] = frozenset()

    # -- marking -----------------------------------------------------------------

    def _set_marks(self, marks: set[str]) -> None:
        table = self.table
        changed, first_or_last = marks ^ table.marks, bool(marks) != bool(table.marks)
        table.marks = marks
        if first_or_last:  # the Session column makes room for the mark (or gives it back)
            table.rebuild(self.app.feed.sessions, self.app.clock(), width=self.size.width)
        else:
            table.remark(self.app.feed.sessions, self.app.clock(), changed)

    def action_mark(self) -> None:
        session = self.table.selected_session
        if session is None:
            return
        self.range_anchor = None
        self._set_marks(set(self.table.marks) ^ {session})

    def action_mark_range(self) -> None:
        table = self.table
        if self.range_anchor is not None:
            self.extend_range()  # to where the cursor is now (its move may not have been told yet)
            self.range_anchor = None
            self.app.notify(f"{plural(len(table.marks), 'session')} marked.", markup=False, timeout=2)
            return
        if not table.row_count:
            return
        self.range_anchor = table.cursor_row
        self._marks_before = frozenset(table.marks)
        self.extend_range()
        self.app.notify("Range: move with j/k, v to finish.", markup=False, timeout=3)

    def extend_range(self) -> None:
        """The cursor moved: the range is every row from the anchor to it (and the earlier marks)."""
        anchor = self.range_anchor
        table = self.table
        if anchor is None or not table.row_count:
            return
        low, high = sorted((min(anchor, table.row_count - 1), table.cursor_row))
        get_key = table._row_locations.get_key
        rows = {key.value for key in map(get_key, range(low, high + 1)) if key is not None and key.value}
        self._set_marks(set(self._marks_before) | rows)

    def action_unmark_all(self) -> None:
        self.range_anchor = None
        self._set_marks(set())

    def marked(self) -> list[str]:
        """The marked sessions still known, in table order (those filtered out too)."""
        sessions = self.app.feed.sessions
        order = self.table.row_ids()
        marks = [sid for sid in self.table.marks if sid in sessions]
        rank = {sid: i for i, sid in enumerate(order)}
        return sorted(marks, key=lambda sid: (rank.get(sid, len(rank)), sid))

    # -- acting on all marked ----------------------------------------------------------

    def action_ack(self) -> None:
        if not self.table.marks:
            return super().action_ack()  # type: ignore[misc]
        sessions = self.app.feed.sessions
        skipped = {s: "no open warning" for s in self.marked() if sessions[s].level <= Level.NONE}
        self._bulk("ack", skipped)

    def action_false_positive(self) -> None:
        if not self.table.marks:
            return super().action_false_positive()  # type: ignore[misc]
        sessions = self.app.feed.sessions
        skipped = {s: "no detection to mark" for s in self.marked() if sessions[s].last_detection is None}
        self._bulk("false_positive", skipped)

    def action_kill(self) -> None:
        if not self.table.marks:
            return super().action_kill()  # type: ignore[misc]
        hub = self.app.hub
        if hub is None:
            return
        plans = []
        for session in self.marked():
            # afresh, as for one session: the process may have exited since it was marked
            refusal = hub.actions.unreachable(session) or hub.actions.kill_refusal(session)
            plans.append(KillPlan(session, hub.describe_kill(session), refusal))
        refused = {p.session: p.refusal for p in plans if p.refusal}

        def confirmed(chosen: list[str] | None) -> None:
            if chosen:
                self._bulk("kill", refused, only=chosen)

        self.app.push_screen(BulkKillScreen(plans), confirmed)

    def action_pause(self) -> None:
        """Pause every marked session, or resume them all when every one is paused."""
        if not self.table.marks:
            return super().action_pause()  # type: ignore[misc]
        hub = self.app.hub
        if hub is None:
            return
        sessions = self.app.feed.sessions
        marked = self.marked()
        kind = "resume" if all(sessions[s].paused for s in marked) else "pause"
        skipped: dict[str, str] = {}
        for session in marked:
            if kind == "pause" and sessions[session].paused:
                skipped[session] = "already paused"
            elif refusal := hub.actions.unreachable(session) or hub.actions.kill_refusal(session):
                skipped[session] = refusal  # the same proof as a kill, checked afresh
        self._bulk(kind, skipped)

    def _bulk(self, kind: str, skipped: dict[str, str], only: list[str] | None = None) -> None:
        targets = [s for s in (only if only is not None else self.marked()) if s not in skipped]
        self.app.run_worker(
            self._carry_out(kind, targets, skipped),
            name=f"{kind}:marked",
            group="actions",
            exit_on_error=False,
        )

    async def _carry_out(self, kind: str, targets: list[str], skipped: dict[str, str]) -> list[Any]:
        """One hub action per session, one after the other (each recorded before it runs)."""
        hub = self.app.hub
        records, lines = [], []
        for session in targets:
            try:
                if hub is None:
                    raise LookupError("no monitor is running (read-only)")
                fields: dict[str, Any] = {}
                info = self.app.feed.sessions.get(session)
                if kind == "false_positive" and info is not None:
                    fields["detection"] = info.last_detection
                record = await hub.act(kind, session, **fields)
            except Exception as exc:  # the hub should not raise; never take the UI down
                lines.append(f"{session}: failed — {exc}")
                continue
            records.append(record)
            lines.append(f"{session}: {record.outcome}" + (f" — {record.detail}" if record.detail else ""))
        lines += [f"{session}: skipped — {why}" for session, why in skipped.items()]
        bad = any(r.outcome in ("failed", "refused") for r in records) or len(records) < len(targets)
        self.app.notify(
            visible("\n".join(lines), multiline=True),
            title=f"{BULK_TITLES.get(kind, kind)}: {plural(len(records), 'session')}",
            severity="warning" if bad or skipped else "information",
            markup=False,
            timeout=8,
        )
        return records
