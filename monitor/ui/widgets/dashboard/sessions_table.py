"""The sessions table, sorted so that what needs attention is on top.

Rows are keyed by session id and updated cell by cell when a snapshot changes
(in place, and only for the rows in view: :mod:`.lazy_rows`); the table is
only rebuilt when the filter or the width changes.  Order: escalation level (highest first), then live before idle
before ended, then most recent activity.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets.data_table import CellDoesNotExist, ColumnKey

from monitor.ui.literal import literal
from monitor.ui.render import (
    DEFAULT_PALETTE,
    Palette,
    ago,
    fit_words,
    level_text,
    short_path,
    spark_text,
)
from monitor.ui.sparks import bars
from monitor.ui.widgets.common.row_table import RowTable
from monitor.ui.widgets.dashboard.columns import COLUMNS, layout
from monitor.ui.widgets.dashboard.lazy_rows import LazyRows
from monitor.ui.widgets.dashboard.sorting import (  # noqa: F401 (re-exported)
    COLUMN_KEYS,
    STATUS_RANK,
    attention_key,
    needs_attention,
)

#: Statuses without a theme colour of their own: drawn in this one's.
STATUS_COLOUR = {
    "nudged": "status-live",
    "stopped": "status-ended",
    "waiting": "status-waiting",
    "paused": "status-idle",
}


def shown_status(info: Any) -> str:
    """The status column: "paused" for a live session the operator paused,
    "waiting" for a session waiting for the person (live or idle), "nudged" for
    a live session nudged and not yet recovered."""
    if info.status == "live" and getattr(info, "paused", 0):
        return "paused"
    if getattr(info, "waiting_since", 0) and info.status != "ended":
        return "waiting"
    return "nudged" if info.status == "live" and getattr(info, "nudged", 0) else info.status


SOURCE_MOST = next(c.most for c in COLUMNS if c.key == "source")


class _Same:
    """Wraps the palette so that signatures compare it by identity (cheap)."""

    __slots__ = ("palette",)

    def __init__(self, palette: Palette):
        self.palette = palette

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.palette is self.palette


#: Before a marked session's id (space, or a visual range with v).
MARK = "● "


class SessionCell(Text):
    """The session column's text, which remembers the full id for sorting."""

    def __init__(self, session: str, width: int, marked: bool = False):
        super().__init__(no_wrap=True, overflow="ellipsis")
        if marked:
            self.append(MARK, style="bold reverse")
            width -= len(MARK)
        self.append_text(literal(session, limit=max(1, width)))
        self.session_id = session


def wrapped(line: Text, width: int, lines: int) -> Text:
    """``line`` on at most ``lines`` lines of ``width`` cells, broken at spaces, the last cut
    at a word with "…" (agent text stays literal: it is cut, never parsed)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    rest = line
    for n in range(lines):
        if rest.cell_len <= width or n == lines - 1:
            out.append_text(fit_words(rest, width))
            break
        plain = rest.plain
        cut = plain.rfind(" ", 0, width + 1)
        cut = width if cut <= 0 else cut
        out.append_text(rest[:cut])
        out.append("\n")
        rest = rest[cut:]
        rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")) :]
    return out


def matches(info: Any, needle: str) -> bool:
    """Whether the ``/`` filter text appears in the session's visible fields."""
    if not needle:
        return True
    hay = " ".join(
        str(x)
        for x in (
            info.id,
            info.agent or "",
            info.source,
            info.status,
            info.level.label,
            info.detector or "",
            info.reason,
            shown_status(info),
            getattr(info, "waiting_for", ""),  # what a waiting session asks ("rm -rf")
        )
    )
    return needle.lower() in hay.lower()


class SessionsTable(LazyRows, RowTable):
    """One row per session, keyed by its id."""

    DEFAULT_CSS = """
    SessionsTable { height: 1fr; }
    """

    def __init__(self, **kwargs: Any):
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.palette: Palette = DEFAULT_PALETTE
        self.filter_text = ""
        self._signatures: dict[str, dict[str, Any]] = {}
        self._keys: dict[str, tuple] = {}  # session -> attention_key, to re-sort only on change
        #: Rows whose cells are behind their session: (latest snapshot, clock).
        self._stale: dict[str, tuple[Any, float]] = {}
        self._order: list[str] = []
        self._columns: list[tuple[str, str, int]] = []
        self._built_width = -1
        #: The longest value seen per measured column (cells), for the layout.
        self._natural: dict[str, int] = {}
        self.cell_updates = 0  # for the benchmark: proves rows are updated in place
        self.rebuilds = 0
        #: Until the operator moves the cursor, it stays on the most urgent row;
        #: afterwards it follows the chosen session wherever sorting moves it.
        self.user_selected = False
        self._programmatic = False
        self._dirty: set[tuple[str, str]] = set()  # (row, column) whose render is stale
        #: ``None``: attention order; else a column key (``s`` / header click).
        self.sort_column: str | None = None
        self.sort_reverse = False
        #: Sessions marked for a bulk action (:mod:`monitor.ui.screens.triage`).
        self.marks: set[str] = set()
        #: Only the sessions that need attention (``W``).
        self.attention_only = False
        #: Columns the operator hid (``C``), and Reason given the room of the others (``R``).
        self.hidden: frozenset[str] = frozenset()
        self.reason_wide = False
        #: Lines per row: 2 wraps Reason onto a second line (``R`` twice).
        self.reason_lines = 1

    def shown(self, info: Any) -> bool:
        """Whether ``info`` has a row: the ``/`` filter, and the attention view."""
        return matches(info, self.filter_text) and (not self.attention_only or needs_attention(info))

    # -- columns -----------------------------------------------------------

    def _layout(self, width: int) -> list[tuple[str, str, int]]:
        return layout(width, self._natural, hidden=self.hidden, reason_wide=self.reason_wide)

    def _measure(self, info: Any) -> bool:
        """Note the widths of ``info``'s values; True if one is the longest yet."""
        natural, grew = self._natural, False
        source = str(info.source)
        for key, value in (
            ("agent", info.agent or "-"),
            ("session", (MARK if self.marks else "") + info.id),  # marking does not cut the id
            ("status", shown_status(info)),
            ("source", short_path(source, SOURCE_MOST)),
            ("source_name", short_path(source, 2 + cell_len(source.rsplit("/", 1)[-1]))),
        ):
            size = cell_len(value)
            if size > natural.get(key, 0):
                natural[key] = size
                grew = True
        return grew

    def rebuild(self, sessions: dict[str, Any], now: float, width: int | None = None) -> None:
        """Recreate columns and rows (filter or width changed)."""
        width = width if width is not None else (self.size.width or 120)
        selected = self.selected_session
        self.rebuilds += 1
        self._programmatic = True
        try:
            self.clear(columns=True)
        finally:
            self._programmatic = False
        self._natural = {}
        for info in sessions.values():
            if self.shown(info):
                self._measure(info)
        self._columns = self._layout(width)
        self._built_width = width
        for key, label, w in self._columns:
            self.add_column(label, key=key, width=w)
        self._signatures.clear()
        self._keys.clear()
        self._stale.clear()
        self._order = []
        self.apply(sessions.values(), now, sessions)
        self.show_sort_marker()
        if selected is not None:
            self.select_session(selected)

    def needs_rebuild(self, width: int) -> bool:
        return self._layout(width) != self._columns

    # -- rows ----------------------------------------------------------------

    def _cells(self, info: Any, now: float, width: dict[str, int]) -> dict[str, Any]:
        palette = _Same(self.palette)
        sig: dict[str, Any] = {}
        for key in width:
            if key == "level":
                sig[key] = (info.level, palette)
            elif key == "agent":
                sig[key] = info.agent or "-"
            elif key == "session":
                sig[key] = (info.id, info.id in self.marks)
            elif key == "status":
                sig[key] = (shown_status(info), palette)
            elif key == "events":
                sig[key] = info.events
            elif key == "last":
                sig[key] = ago(info.last_ts, now)
            elif key == "detector":
                sig[key] = info.detector or ""
            elif key == "similarity":
                sig[key] = (info.similarity.tail(width[key]), palette)
            elif key == "source":
                sig[key] = info.source
            elif key == "reason":
                sig[key] = info.reason
        return sig

    def _cell_text(self, key: str, value: Any, width: int) -> Any:
        if key == "level":
            return level_text(value[0], value[1].palette)
        if key == "session":
            return SessionCell(value[0], width, value[1])
        if key == "status":
            status, palette = value[0], value[1].palette
            colour = f"status-{status}" if status in STATUS_RANK else STATUS_COLOUR.get(status)
            return Text(status, style=palette.fg(colour) if colour else "")
        if key == "events":
            return Text(f"{value:,}", justify="right")
        if key == "similarity":
            return spark_text(bars(value[0]), width, value[1].palette)
        if key == "last":
            return Text(value, justify="right")
        if key == "source":
            return literal(short_path(str(value), width))
        if key == "reason":
            if self.reason_lines > 1:
                return wrapped(literal(str(value)), width, self.reason_lines)
            return fit_words(literal(str(value)), width)
        return literal(str(value), limit=width)

    def apply(self, infos: Iterable[Any], now: float, everything: dict[str, Any]) -> None:
        """Add or update the rows of ``infos`` in place, then re-sort if needed.

        Work is proportional to ``infos`` (the sessions that changed): the
        rows are re-sorted only when one of their sort keys changed, and only
        the rows in view get their cells rewritten now; the others when they
        come into view or are read (:class:`.LazyRows`).
        """
        widths = {key: w for key, _, w in self._columns}
        if not widths:
            return
        if iter(infos) is infos:  # an iterator: read twice below
            infos = list(infos)
        if self._outgrown(infos):
            self.rebuild(everything, now, self._built_width)  # measures every row again
            return
        changed_order = False
        was_empty = not self._signatures
        keys, stale, signatures = self._keys, self._stale, self._signatures
        for info in infos:
            sid = info.id
            if not self.shown(info):
                if sid in signatures:
                    self.remove_row(sid)
                    del signatures[sid]
                    keys.pop(sid, None)
                    stale.pop(sid, None)
                    changed_order = True
                continue
            if sid in signatures:
                stale[sid] = (info, now)
            else:
                sig = signatures[sid] = self._cells(info, now, widths)
                cells = (self._cell_text(k, sig[k], widths[k]) for k in widths)
                self.add_row(*cells, key=sid, height=self.reason_lines)
                changed_order = True
            key = self._sort_key(info)
            if keys.get(sid) != key:
                keys[sid] = key
                changed_order = True
        if changed_order:
            order = sorted(keys, key=keys.__getitem__, reverse=self.sort_reverse)
            if order != self._order:
                self._sort(order, keep_selection=self.user_selected and not was_empty)
        self.sync_in_view()

    def _outgrown(self, infos: Iterable[Any]) -> bool:
        """Whether a new or changed row's value is longer than its column and
        the layout would give that column more: then the table is rebuilt.
        Only new rows are measured in full (agent, session and source never
        change), so a busy fleet costs a status length per update."""
        grew, signatures, natural = False, self._signatures, self._natural
        for info in infos:
            if info.id not in signatures:
                if self.shown(info):
                    grew = self._measure(info) or grew
            elif len(status := shown_status(info)) > natural.get("status", 0):
                natural["status"] = len(status)
                grew = True
        return grew and self._layout(self._built_width) != self._columns

    def _sort_key(self, info: Any) -> tuple:
        """Where the session's row goes: attention order, or the sort column's
        value with attention order breaking ties (:mod:`.sorting`)."""
        column = self.sort_column
        if column is None or column not in COLUMN_KEYS:
            return attention_key(info)
        return (COLUMN_KEYS[column](info), attention_key(info))

    def sort_by(self, column: str | None, reverse: bool, sessions: dict[str, Any]) -> None:
        """Order rows by ``column`` (``None``: attention); the selection stays."""
        self.sort_column, self.sort_reverse = column, reverse
        self.show_sort_marker()
        keys = self._keys
        for sid in self._signatures:
            if sid in sessions:
                keys[sid] = self._sort_key(sessions[sid])
        self._sort(sorted(keys, key=keys.__getitem__, reverse=reverse), keep_selection=True)

    def show_sort_marker(self) -> None:
        """▼/▲ after the label of the column the rows are sorted by."""
        for key, label, width in self._columns:
            column = self.columns.get(ColumnKey(key))
            if column is not None:
                mark = (" ▲" if self.sort_reverse else " ▼") if key == self.sort_column else ""
                if mark and len(label) + len(mark) > width:  # a narrow column: the arrow must show
                    label = label[: max(1, width - len(mark))]
                column.label = Text(label + mark)
        self._require_update_dimensions = True
        self.refresh()

    def tick(self, sessions: dict[str, Any], now: float) -> None:
        """Refresh the relative times (``Last``) once a second."""
        if not any(key == "last" for key, _, _ in self._columns):
            return
        stale = self._stale
        for sid in self._signatures:
            info = sessions.get(sid)
            if info is not None:
                stale[sid] = (info, now)
        self.sync_in_view()

    def _sort(self, order: list[str], keep_selection: bool = True) -> None:
        """Reorder rows (no rebuild); the selected session stays selected."""
        selected = self.selected_session if keep_selection else None
        rank = {sid: i for i, sid in enumerate(order)}
        was, self._programmatic = self._programmatic, True
        try:
            self.sort("session", key=lambda cell: rank.get(cell.session_id, len(rank)))
        finally:
            self._programmatic = was
        self._order = order
        if selected is not None:
            self.select_session(selected)
        elif self.row_count:
            self._move(0)

    def remark(self, sessions: dict[str, Any], now: float, ids: Iterable[str]) -> None:
        """Redraw the mark of ``ids`` (their session cells)."""
        for sid in ids:
            if sid in self._signatures and sid in sessions:
                self._stale[sid] = (sessions[sid], now)
        self.sync_in_view()

    def row_ids(self) -> list[str]:
        """The sessions shown, in table order."""
        return list(self._order)

    # -- selection -----------------------------------------------------------

    @property
    def selected_session(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except CellDoesNotExist:
            return None
        return key.value

    def select_session(self, session: str) -> bool:
        try:
            index = self.get_row_index(session)
        except Exception:  # RowDoesNotExist
            return False
        if index != self.cursor_row:
            self._move(index)
        return True

    def _move(self, row: int) -> None:
        was, self._programmatic = self._programmatic, True
        try:
            self.move_cursor(row=row, animate=False)
        finally:
            self._programmatic = was

    def watch_cursor_coordinate(self, old: Any, new: Any) -> None:
        super().watch_cursor_coordinate(old, new)
        if not self._programmatic and old != new and self.row_count:
            self.user_selected = True
