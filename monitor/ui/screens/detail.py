"""One session in full: its event stream, per-detector sparklines,
detections with their evidence, and the actions taken.

The same screen shows a live session (updated from the hub, operator actions
enabled) and a stored one (``read_only``: from the store alone, actions
hidden).  For a stored session the per-detector sparklines are recomputed by
replaying its last events through the same engine
(:func:`~monitor.hub.replay.replay_similarity`) in a background thread.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Label
from textual.worker import Worker, WorkerState

from monitor.cost import stored_loop_cost
from monitor.detect.summary import Sparks
from monitor.events import Level
from monitor.ui.literal import literal
from monitor.ui.live import Batch
from monitor.ui.operator import OPERATOR_BINDINGS, OperatorActions
from monitor.ui.read_only_keys import ReadOnlyKeys
from monitor.ui.records import DetectionRow, action_row, detection_row, episode_row, stored_episode_row
from monitor.ui.render import DEFAULT_PALETTE, LEVEL_ICONS, SEP, Palette, clock, date_time
from monitor.ui.screens.detail_console import CONSOLE_BINDINGS, ConsoleActions
from monitor.ui.widgets.common.footer import FittedFooter
from monitor.ui.widgets.common.text_panel import TextPanel
from monitor.ui.widgets.detail.actions_list import ActionsList
from monitor.ui.widgets.detail.detections_list import DetectionsList, episode_key
from monitor.ui.widgets.detail.event_source import EventSource, MemoryEvents, StoreEvents
from monitor.ui.widgets.detail.event_stream import EventStream
from monitor.ui.widgets.detail.search import SearchBar
from monitor.ui.widgets.detail.sparklines import DetectorSparklines

OVERALL = "(any detector)"
#: The stream counts what the store committed, the header what the hub took (a
#: moment earlier): while they differ the stream looks again this often, so many times.
CATCH_UP_SECONDS = 0.25
CATCH_UP_TRIES = 40


def _detection_key(row: DetectionRow) -> tuple:
    return (round(row.ts, 3), row.detector, row.seq, row.level)


def header_text(info: dict[str, Any], read_only: bool, palette: Palette = DEFAULT_PALETTE) -> Text:
    level = info["level"]
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(
        f" {LEVEL_ICONS[level]} {level.label.upper()} ", style=palette.level(level) + Style(reverse=True)
    )
    text.append(" ")
    text.append_text(literal(info["id"], style="bold"))
    for label, value in (
        ("agent", info.get("agent")),
        ("status", info.get("status")),
        ("events", f"{info.get('events') or 0:,}"),
        ("pid", info.get("pid")),
        # "none" is how the snapshot says no channel: say nothing rather than "via none"
        ("via", info.get("channel") if info.get("channel") != "none" else None),
        ("detector", info.get("detector")),
    ):
        if value not in (None, ""):
            text.append(SEP)
            text.append(f"{label} ", style="dim")
            text.append_text(literal(str(value)))
    text.append(f"{SEP}read-only: history" if read_only else "", style="dim")
    if info.get("reason"):
        text.append("\n")
        text.append_text(literal(info["reason"], style="italic"))
    cost = cost_text(info)
    if cost:
        text.append("\n")
        text.append(cost, style=palette.level(Level.WARN))
    text.append("\n")
    text.append_text(
        literal(
            f"{info.get('source') or ''}  ·  {date_time(info.get('first_ts'))} → "
            f"{date_time(info.get('last_ts'))}",
            style="dim",
        )
    )
    return text


def cost_text(info: dict[str, Any]) -> str:
    """What the open loop episode has cost so far and what the session's loops
    cost in all; "" when the log reports no usage (monitor/cost.py)."""
    parts = []
    episode = info.get("episode_cost")
    if episode is not None:
        since, spend = episode
        parts.append(f"this loop so far {spend.text()} (since {clock(since)})")
    loops = info.get("loop_cost")
    if loops:
        parts.append(f"loops in this session {loops.text()}")
    return " · ".join(parts)


def live_header(info: Any) -> dict[str, Any]:
    status = "nudged" if info.status == "live" and getattr(info, "nudged", 0) else info.status
    if getattr(info, "waiting", False):
        status = "waiting"  # for the person (the dashboard's status, monitor/hub/waiting.py)
    return {
        "id": info.id,
        "level": info.level,
        "agent": info.agent,
        "status": status,
        "events": info.events,
        "pid": info.pid,
        "channel": info.channel,
        "detector": info.detector,
        "reason": info.reason,
        "source": info.source,
        "first_ts": info.first_ts,
        "last_ts": info.last_ts,
        "episode_cost": getattr(info, "episode_cost", None),
        "loop_cost": getattr(info, "loop_cost", None),
    }


def stored_header(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "level": Level.parse(row.get("level") or "watching"),
        "agent": row.get("agent"),
        "status": row.get("status"),
        "events": row.get("events"),
        "pid": row.get("pid"),
        "channel": None,
        "detector": row.get("detector"),
        "reason": row.get("reason") or "",
        "source": row.get("source"),
        "first_ts": row.get("first_seen"),
        "last_ts": row.get("last_seen"),
        "loop_cost": stored_loop_cost(row),
    }


class SessionDetailScreen(ReadOnlyKeys, ConsoleActions, OperatorActions, Screen):
    """The whole story of one session."""

    BINDINGS = [
        *OPERATOR_BINDINGS,
        *CONSOLE_BINDINGS,
        Binding("escape", "back", "Back", id="back", tooltip="Back to the previous screen"),
        Binding("tab", "app.focus_next", "Next pane", show=False, id="detail.focus_next"),
    ]

    def __init__(self, session: str, *, read_only: bool = False):
        super().__init__()
        self.session = session
        self.read_only = read_only
        self._seen_detections: set[tuple] = set()
        self._catch_ups = 0  # looks left for the stream to reach the header's count
        self._catching_up = False

    # -- layout -------------------------------------------------------------

    def compose(self) -> ComposeResult:
        app = self.app
        store = app.store
        source: EventSource
        if store is not None:
            source = StoreEvents(store, self.session)
        else:
            info = app.feed.sessions.get(self.session)
            source = MemoryEvents(info.window if info else ())
        yield TextPanel(id="detail-header")
        with Horizontal(id="detail-body"):
            with Vertical(id="stream-pane"):
                yield TextPanel("Events", id="stream-title", classes="panel-title")
                yield EventStream(source, id="stream")
                yield SearchBar(id="search")
            with Vertical(id="detail-side"):
                yield Label("Similarity by detector", classes="panel-title", id="sparks-title")
                yield DetectorSparklines(self.initial_series(), id="detector-sparks")
                yield Label("Loop episodes — enter: jump to evidence", classes="panel-title")
                yield DetectionsList(id="detections")
                yield Label("Actions", classes="panel-title")
                yield ActionsList(id="actions")
        yield FittedFooter()

    #: Set once mounted: live batches and restyles are applied only then.
    ready = False

    def on_mount(self) -> None:
        self.ready = True
        palette = self.app.palette
        for widget in (self.stream, self.query_one(DetectionsList), self.query_one(ActionsList)):
            widget.palette = palette
        store = self.app.store
        actions = [action_row(r) for r in store.actions(self.session)] if store else []
        if not self.read_only:
            actions += [action_row(a) for a in self.app.feed.actions_for(self.session)]
        self.query_one(DetectionsList).set_rows(self._episode_rows())
        self.query_one(ActionsList).set_rows(actions)
        self.show_false_positives()
        self.show_header()
        if self.read_only and store is not None:
            self.replay_sparklines()
        self.stream.focus()

    @property
    def stream(self) -> EventStream:
        return self.query_one(EventStream)

    def _episode_rows(self) -> list[DetectionRow]:
        """One row per loop episode: the stored ones, then (live) the feed's, which
        are newer; a database without episodes lists its detections."""
        store = self.app.store
        read = getattr(store, "episodes", None) if store is not None else None
        rows: dict[tuple[float, str], DetectionRow] = {}
        if read is not None:
            for stored in read(self.session):
                row = stored_episode_row(stored)
                rows[episode_key(row)] = row
        elif store is not None and (self.read_only or not self.app.feed.episodes_for(self.session)):
            return self._new_detections([detection_row(r) for r in store.detections(self.session)])
        for row in self._live_episode_rows():
            rows[episode_key(row)] = row
        return sorted(rows.values(), key=lambda r: (r.first_ts, r.episode))

    def _live_episode_rows(self) -> list[DetectionRow]:
        if self.read_only:
            return []
        return [episode_row(change) for change in self.app.feed.episodes_for(self.session)]

    def _new_detections(self, rows: list[DetectionRow]) -> list[DetectionRow]:
        fresh = []
        for row in sorted(rows, key=lambda r: (r.ts, r.seq)):
            key = _detection_key(row)
            if key not in self._seen_detections:
                self._seen_detections.add(key)
                fresh.append(row)
        return fresh

    # -- data ----------------------------------------------------------------

    def selected_info(self) -> Any | None:
        return None if self.read_only else self.app.feed.sessions.get(self.session)

    def show_header(self) -> None:
        info = self.selected_info()
        if info is not None:
            header = live_header(info)
        else:
            row = self.app.store.get_session(self.session) if self.app.store else None
            header = stored_header(row) if row else {"id": self.session, "level": Level.NONE}
        self.query_one("#detail-header", TextPanel).show_renderable(
            header_text(header, self.read_only, self.app.palette)
        )
        count = self.stream.source.count()
        self.query_one("#stream-title", TextPanel).show_renderable(
            Text(f"Events — {count:,} (↑↓ jk pgup pgdn g G; enter: open, /: search)")
        )
        if self.stream.search:
            self.show_search_status()

    def read_only_view(self) -> str | None:
        return "This stored session" if self.read_only else None

    def show_false_positives(self) -> None:
        """The patterns marked a false positive in the session (live: the hub's,
        kept across a restart; stored: the store's), above the actions."""
        info = self.selected_info()
        if info is not None:
            marks = getattr(info, "false_positives", ())
        else:
            read = getattr(self.app.store, "false_positives", None)
            stored = read(self.session).get(self.session, []) if read is not None else []
            marks = tuple((m["detector"], m["pattern"], m["since"]) for m in stored)
        self.query_one(ActionsList).set_false_positives(marks)

    def initial_series(self) -> dict[str, Sparks]:
        info = None if self.read_only else self.app.feed.sessions.get(self.session)
        if info is None:
            return {}
        return {OVERALL: info.similarity, **info.detector_similarity}

    def show_sparklines(self) -> None:
        info = self.selected_info()
        if info is None:
            return
        series = {OVERALL: info.similarity, **info.detector_similarity}
        self.query_one(DetectorSparklines).show(series)

    def apply_live(self, batch: Batch) -> None:
        if self.read_only or not batch.touches(self.session):
            return
        self.stream.grew()
        self.show_header()
        self._catch_ups = CATCH_UP_TRIES
        self._catch_up()
        self.show_sparklines()
        changes = [change for (session, _), change in batch.episodes.items() if session == self.session]
        if changes:  # one row per loop episode, changed where it is
            self.query_one(DetectionsList).upsert_rows([episode_row(change) for change in changes])
        actions = [action_row(a) for a in batch.actions if a.session == self.session]
        if actions:
            self.query_one(ActionsList).add_rows(actions)
        self.show_false_positives()
        self.refresh_operator_bindings()

    def _catch_up(self) -> None:
        """The header counted an event the store had not committed yet: look at the
        stream again shortly (a session that went quiet stayed one event behind)."""
        info = self.selected_info()
        source = self.stream.source
        if info is None or not isinstance(source, StoreEvents) or self._catching_up:
            return
        if source.count() >= info.events or self._catch_ups <= 0:
            return  # caught up (or never will: retention pruned the head, the store lost rows)
        self._catch_ups -= 1
        self._catching_up = True
        self.set_timer(CATCH_UP_SECONDS, self._caught_up, name="detail-catch-up")

    def _caught_up(self) -> None:
        self._catching_up = False
        if not self.is_attached:
            return
        self.stream.grew()
        self.show_header()
        self._catch_up()

    def restyle(self) -> None:
        palette = self.app.palette
        self.stream.palette = palette
        self.stream.refresh()
        detections = self.query_one(DetectionsList)
        detections.palette = palette
        detections.set_rows(detections.rows)
        actions = self.query_one(ActionsList)
        actions.palette = palette
        actions.add_rows([])
        self.show_header()

    # -- stored sessions: sparklines by replay -----------------------------------

    @work(thread=True, name="replay-sparklines", group="detail", exclusive=True)
    def replay_sparklines(self) -> dict[str, Sparks]:
        from monitor.hub.replay import replay_similarity

        replayed = replay_similarity(
            self.app.config, self.app.store, self.session, progress=self._report_replay
        )
        if replayed is None:
            return {}
        overall, by_detector = replayed
        return {OVERALL: overall, **by_detector}

    def _report_replay(self, done: int, total: int) -> None:
        try:
            self.app.call_from_thread(self.show_replay_progress, done, total)
        except RuntimeError:  # the app is shutting down
            pass

    def show_replay_progress(self, done: int, total: int) -> None:
        """The sparklines' title counts the replay (a long session takes a moment)."""
        self.replay_reports += 1
        title = "Similarity by detector"
        if done < total:
            title += f" — replaying {done:,} of {total:,} events ({done * 100 // max(1, total)}%)"
        try:
            self.query_one("#sparks-title", Label).update(Text(title))
        except NoMatches:  # the screen was closed meanwhile
            pass

    replay_reports = 0

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.name == "replay-sparklines" and event.state is WorkerState.SUCCESS:
            self.query_one(DetectorSparklines).show(event.worker.result or {})
            self.query_one("#sparks-title", Label).update(Text("Similarity by detector"))

    # -- interactions ----------------------------------------------------------

    def on_detections_list_jump(self, event: DetectionsList.Jump) -> None:
        row = event.row
        # (a stored episode keeps no evidence: its first and latest events)
        ends = tuple(seq for seq in (row.first_seq, row.seq) if seq)
        target = row.evidence[0] if row.evidence else (ends[0] if ends else row.seq)
        self.stream.jump_to_seq(target, frozenset(row.evidence or ends or (row.seq,)))
        self.stream.focus()

    def action_back(self) -> None:
        self.app.go_back()
