"""Cells of the sessions table written in place, and only when they are seen.

:class:`LazyRows` is mixed into a ``DataTable`` subclass that keeps, per row,
the signature of what its cells show (``_signatures``), computes it
(``_cells``) and renders a cell (``_cell_text``).  A changed session is only
marked stale; the cells of the rows in view are written at once, the others
when they are scrolled to, drawn or read (``get_cell``, ``get_row``, sorting
by a column).  With a thousand busy sessions and 25 rows in view that is most
of the table's work saved, and what is drawn is always up to date.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey


class Deferred:
    """A changed cell rendered only when it is drawn: with a thousand busy
    sessions most changed rows are scrolled out of sight."""

    __slots__ = ("_make", "_args", "_made")

    def __init__(self, make: Any, *args: Any):
        self._make, self._args, self._made = make, args, None

    def __rich__(self) -> Any:
        if self._made is None:
            self._made = self._make(*self._args)
        return self._made

    def __str__(self) -> str:
        return str(self.__rich__())

    def __getattr__(self, name: str) -> Any:
        """Read as the rendered cell (``get_cell(...).plain``)."""
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__rich__(), name)


if TYPE_CHECKING:
    #: A DataTable to the type checker; object at run time (the host is the DataTable).
    _TableMixin = DataTable[Any]
else:
    _TableMixin = object


class LazyRows(_TableMixin):
    """In-place, on-sight cell updates for a ``DataTable`` (see the module doc).

    The host sets ``_stale`` ({row: (snapshot, clock)}), ``_dirty`` (a set of
    (row, column)), ``cell_updates`` and ``_columns`` in its ``__init__``.
    """

    if TYPE_CHECKING:  # what the host provides
        _stale: dict[str, tuple[Any, float]]
        _dirty: set[tuple[str, str]]
        cell_updates: int
        _columns: list[tuple[str, str, int]]
        _signatures: dict[str, dict[str, Any]]

        def _cells(self, info: Any, now: float, width: dict[str, int]) -> dict[str, Any]: ...

        def _cell_text(self, key: str, value: Any, width: int) -> Any: ...

    #: The column the host re-sorts by: a row's id, never stale.
    KEY_COLUMN = "session"

    # -- in-place cell updates ---------------------------------------------------
    #
    # ``DataTable.update_cell`` bumps a counter that is part of every render
    # cache key, so one changed cell re-renders every visible cell.  With 200
    # busy sessions that is the whole table ten times a second.  Instead the
    # changed cells are written and only their cached renders are dropped, once
    # per batch.  (Relies on DataTable's cache layout in Textual 8.2.8, which is
    # pinned; ``test_ui_live`` checks the table shows the new values.)

    def _set_cell(self, row: str, column: str, value: Any) -> None:
        self._data[RowKey(row)][ColumnKey(column)] = value
        self._dirty.add((row, column))
        self.cell_updates += 1

    def _invalidate(self) -> None:
        cells = self._dirty
        if not cells:
            return
        # Matched by the keys' string values: RowKey/ColumnKey hash in Python,
        # and the render caches hold thousands of keys.
        rows = {row for row, _ in cells}
        locations = self._row_locations
        indices = {locations.get(RowKey(row)) for row in rows}
        cell_cache = self._cell_render_cache
        for cell_key in [k for k in cell_cache.keys() if (k[0].value, k[1].value) in cells]:
            cell_cache.discard(cell_key)
        row_cache = self._row_render_cache
        for row_key in [k for k in row_cache.keys() if k[0].value in rows]:
            row_cache.discard(row_key)
        renderables = self._row_renderable_cache
        for renderable_key in [k for k in renderables.keys() if k[1] in indices]:
            renderables.discard(renderable_key)
        self._line_cache.clear()
        cells.clear()
        # One refresh of the widget, not one per row: DataTable finds a row's
        # region by summing the heights of the rows above it, so refreshing
        # each of a thousand changed rows costs a million additions.
        top, bottom = self._view_rows()
        if any(index is not None and top <= index <= bottom for index in indices):
            self.refresh()

    # -- rows brought up to date when seen ----------------------------------------

    #: Lines per row (every row is as high: the host sets it, as the sessions table does).
    reason_lines = 1

    def _view_rows(self) -> tuple[int, int]:
        """The first row in view and the one after the last (scroll offsets are in lines)."""
        lines = max(1, self.reason_lines)
        top = int(self.scroll_offset.y) // lines
        return top, top + max(1, self.size.height // lines + 1)

    def _rows_in_view(self) -> list[str]:
        if not self._stale:
            return []
        top, bottom = self._view_rows()
        bottom = min(self.row_count, bottom)
        get_key = self._row_locations.get_key
        keys = map(get_key, range(top, bottom))
        return [key.value for key in keys if key is not None and key.value is not None]

    def _sync(self, rows: Iterable[str]) -> None:
        """Write the changed cells of ``rows`` that are stale (renders stay lazy)."""
        stale = self._stale
        if not stale:
            return
        widths = {key: w for key, _, w in self._columns}
        render = self._cell_text
        for sid in rows:
            entry = stale.pop(sid, None)
            if entry is None:
                continue
            old = self._signatures[sid]
            sig = self._cells(entry[0], entry[1], widths)
            for key, value in sig.items():
                if old[key] != value:
                    self._set_cell(sid, key, Deferred(render, key, value, widths[key]))
            self._signatures[sid] = sig

    def sync_in_view(self) -> None:
        """Bring the rows in view up to date (after a batch or a scroll)."""
        if self._stale:
            self._sync(self._rows_in_view())
        self._invalidate()

    def sync_all(self) -> None:
        """Bring every row up to date (before reading cells or sorting by them)."""
        self._sync(list(self._stale))
        self._invalidate()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._stale:  # rows that came into view may be behind
            self.sync_in_view()

    def render_lines(self, crop: Any) -> Any:
        if self._stale and any(sid in self._stale for sid in self._rows_in_view()):
            self.sync_in_view()
        return super().render_lines(crop)

    # Reads go through get_cell/get_row (get_cell_at and get_row_at too).
    def get_cell(self, row_key: Any, column_key: Any) -> Any:
        self._sync((getattr(row_key, "value", row_key),))
        return super().get_cell(row_key, column_key)

    def get_row(self, row_key: Any) -> list[Any]:
        self._sync((getattr(row_key, "value", row_key),))
        return super().get_row(row_key)

    def get_column(self, column_key: Any) -> Iterable[Any]:
        self.sync_all()
        return super().get_column(column_key)

    def sort(self, *columns: Any, key: Any = None, reverse: bool = False) -> Any:
        if not columns or any(getattr(column, "value", column) != self.KEY_COLUMN for column in columns):
            self.sync_all()  # sorting by a cell that may be behind
        return super().sort(*columns, key=key, reverse=reverse)
