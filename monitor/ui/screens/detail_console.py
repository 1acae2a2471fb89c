"""The detail view's reading tools: the full event view, search, copy, diff.

A mixin for :class:`~monitor.ui.screens.detail.SessionDetailScreen` (kept
apart so that screen stays about layout and live data):

* ``enter`` on an event opens :class:`~monitor.ui.screens.event_view.EventViewScreen`.
* ``/`` searches the session's events as you type; ``n``/``N`` next/previous.
* ``c`` copies what has the focus: the event under the cursor, or the
  selected detection with its evidence; ``y`` copies the detection's nudge.
* ``d`` shows what differs between a detection's repeated events.
* ``e`` writes the session as Markdown and JSON (as ``show --format``) to the
  current directory, in a worker thread (a live session's queued writes are
  flushed first).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters
from textual.binding import Binding

from monitor.ui.clipboard import copy_text
from monitor.ui.event_text import event_plain
from monitor.ui.host import HostApp, ScreenMixin
from monitor.ui.literal import visible
from monitor.ui.records import DetectionRow
from monitor.ui.render import date_time
from monitor.ui.widgets.common.text_panel import TextPanel
from monitor.ui.widgets.detail.detections_list import DetectionsList
from monitor.ui.widgets.detail.event_stream import EventStream
from monitor.ui.widgets.detail.search import SearchBar, next_match

CONSOLE_BINDINGS = [
    Binding("slash", "search", "Search", id="search", tooltip="Search the session's events"),
    Binding("n", "search_step(1)", "Next match", show=False, id="search.next", tooltip="Next search match"),
    Binding(
        "N",
        "search_step(-1)",
        "Prev match",
        show=False,
        id="search.previous",
        tooltip="Previous search match",
    ),
    Binding(
        "c", "copy", "Copy", id="copy", tooltip="Copy the event, or the selected detection with its evidence"
    ),
    Binding(
        "y",
        "copy_nudge",
        "Copy nudge",
        show=False,
        id="copy.nudge",
        tooltip="Copy the selected (or latest) detection's nudge",
    ),
    Binding("d", "diff", "Diff", id="diff", tooltip="What differs between a detection's repeats"),
    Binding(
        "e",
        "export",
        "Export",
        show=False,
        id="export",
        tooltip="Write the session as Markdown and JSON to the current directory",
    ),
]


def detection_plain(row: DetectionRow, evidence: list[dict[str, Any]]) -> str:
    """A detection, its nudge and its evidence events as plain text."""
    lines = [
        f"{row.level.label.upper()}  {row.detector}  at event #{row.seq}  {date_time(row.ts)}",
        visible(row.message),
    ]
    if row.count:
        lines.append(f"count: {row.count}  score: {row.score:.2f}")
    if row.nudge:
        lines += ["", "Nudge:", visible(row.nudge, multiline=True)]
    if evidence:
        lines += ["", f"Evidence ({len(evidence)} events):"]
        for record in evidence:
            lines += ["", event_plain(record).rstrip("\n")]
    return "\n".join(lines) + "\n"


class ConsoleActions(ScreenMixin):
    """Event view, search, copy and diff for the detail screen."""

    search_matches: list[int] = []

    if TYPE_CHECKING:  # the app, and what the screen provides
        app = getters.app(HostApp)
        session: str
        read_only: bool

        @property
        def stream(self) -> EventStream: ...

        def show_header(self) -> None: ...

    def evidence_records(self, row: DetectionRow) -> list[dict[str, Any]]:
        """The detection's evidence events that the stream's source still has."""
        source = self.stream.source
        records = []
        for seq in row.evidence or (row.seq,):
            record = source.record(source.index_of_seq(seq)) if source.count() else None
            if record is not None and record.get("seq") == seq:
                records.append(record)
        return records

    def selected_detection(self, latest: bool = False) -> DetectionRow | None:
        """The highlighted detection; else (``latest``) the newest one."""
        detections = self.query_one(DetectionsList)
        rows, index = detections.rows, detections.highlighted
        if index is not None and 0 <= index < len(rows):
            return rows[index]
        return rows[-1] if latest and rows else None

    # -- full event view -----------------------------------------------------

    def on_event_stream_open(self, message: EventStream.Open) -> None:
        from monitor.ui.screens.event_view import EventViewScreen

        stream = self.stream

        def back(index: int | None) -> None:
            if index is not None:
                stream.cursor = index
            stream.focus()

        self.app.push_screen(EventViewScreen(stream.source, message.index, search=stream.search), back)

    # -- search ----------------------------------------------------------------

    def action_search(self) -> None:
        self.query_one(SearchBar).open()

    def on_input_changed(self, message: Any) -> None:
        if not isinstance(message.input, SearchBar):
            return
        self.run_search(message.value)

    def run_search(self, text: str) -> None:
        stream = self.stream
        stream.search = text
        self.search_matches = sorted(set(stream.source.find(text))) if text else []
        target = next_match(self.search_matches, stream.cursor, 1, inclusive=True)
        if target is not None:
            stream.follow = False
            stream.cursor = target
        stream.refresh()
        self.show_search_status()

    def show_search_status(self) -> None:
        stream = self.stream
        if not stream.search:
            self.show_header()
            return
        matches = self.search_matches
        where = ""
        if matches and stream.cursor in matches:
            where = f"{matches.index(stream.cursor) + 1} of "
        title = Text(f"Events — {stream.source.count():,} · search “")
        title.append(visible(stream.search), style="bold")
        title.append(f"”: {where}{len(matches):,} matching events (n/N next/previous)")
        self.query_one("#stream-title", TextPanel).show_renderable(title)

    def on_input_submitted(self, message: Any) -> None:
        if isinstance(message.input, SearchBar):
            self.stream.focus()

    def on_search_bar_cancelled(self, message: SearchBar.Cancelled) -> None:
        self.run_search("")
        self.stream.focus()

    def action_search_step(self, direction: int) -> None:
        stream = self.stream
        if not stream.search:
            self.app.notify("No search: press / first.", markup=False, timeout=3)
            return
        target = next_match(self.search_matches, stream.cursor, direction)
        if target is None:
            self.app.notify(visible(f"No event matches “{stream.search}”."), markup=False, timeout=3)
            return
        stream.follow = False
        stream.cursor = target
        self.show_search_status()

    # -- copy --------------------------------------------------------------------

    def action_copy(self) -> None:
        detections = self.query_one(DetectionsList)
        if detections.has_focus:
            row = self.selected_detection(latest=True)
            if row is not None:
                copy_text(
                    self.app,
                    detection_plain(row, self.evidence_records(row)),
                    f"{row.detector} detection at #{row.seq} with {len(row.evidence)} evidence events",
                )
            return
        stream = self.stream
        record = stream.source.record(stream.cursor)
        if record is not None:
            copy_text(self.app, event_plain(record), f"event #{record.get('seq')}")

    def action_copy_nudge(self) -> None:
        row = self.selected_detection(latest=True)
        if row is None or not row.nudge:
            self.app.notify("No nudge to copy: the detection has none.", markup=False, timeout=3)
            return
        copy_text(self.app, row.nudge, f"the nudge of {row.detector} at #{row.seq}")

    # -- export ------------------------------------------------------------------

    def action_export(self) -> None:
        store = self.app.store
        if store is None:
            self.app.notify("Export needs a database (run with a store).", severity="warning", markup=False)
            return
        self.app.run_worker(
            partial(self._export, store, self.session, Path.cwd()),
            thread=True,
            name="export",
            group="export",
            exit_on_error=False,
        )

    def _export(self, store: Any, session: str, directory: Path) -> list[Path]:
        from monitor.export import write_exports

        try:
            if not self.read_only:
                store.flush()  # what the live session queued so far is in the file
            paths = write_exports(store, session, directory)
        except Exception as exc:  # a full disk or a bad directory: say so, keep the UI
            self.app.call_from_thread(
                self.app.notify,
                visible(f"{session}: {exc}"),
                title="Export failed",
                severity="error",
                markup=False,
            )
            return []
        self.app.call_from_thread(
            self.app.notify, visible("Wrote " + " and ".join(map(str, paths))), title="Export", markup=False
        )
        return paths

    # -- diff of repeats ----------------------------------------------------------

    def action_diff(self) -> None:
        from monitor.ui.screens.repeat_diff import RepeatDiffScreen

        row = self.selected_detection(latest=True)
        if row is None:
            self.app.notify("No detection to compare.", markup=False, timeout=3)
            return
        self.app.push_screen(RepeatDiffScreen(row, self.evidence_records(row)))
