"""What differs between a detection's repeats: a word diff of its evidence.

"The same patch written four times" and "the same command on a different
file" look alike in a one-line summary; here each evidence event (a call: its
tool and pretty-printed arguments; a result or message: its text) is compared
word by word with the previous event of the same kind and tool: inserted
words are highlighted, removed ones struck through, and an identical repeat
says so in one line.  Everything is shown literally.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from monitor.ui.event_text import pretty_json
from monitor.ui.host import HostApp
from monitor.ui.literal import literal, visible
from monitor.ui.records import DetectionRow
from monitor.ui.render import DEFAULT_PALETTE, Palette
from monitor.ui.screens.event_view import SCROLL_BINDINGS
from monitor.ui.vim_keys import scroll_pane
from monitor.ui.widgets.common.text_panel import TextPanel

#: Characters of each event compared (a diff of huge outputs would be unreadable).
COMPARED_CHARS = 4000
_WORDS = re.compile(r"(\s+)")


def compared_text(record: dict[str, Any]) -> str:
    """What is compared for an event: a call's tool and arguments, else its text."""
    if record.get("type") == "tool_call":
        return f"{record.get('tool') or ''} {pretty_json(record.get('args') or {})}"[:COMPARED_CHARS]
    return str(record.get("content") or "")[:COMPARED_CHARS]


def word_diff(old: str, new: str, palette: Palette = DEFAULT_PALETTE) -> tuple[Text, int, int]:
    """``new`` marked against ``old``; (text, words added, words removed)."""
    a, b = _WORDS.split(visible(old, multiline=True)), _WORDS.split(visible(new, multiline=True))
    out = Text()
    added = removed = 0
    inserted = palette.bg("repeat-highlight") + Style(bold=True, underline=True)
    deleted = palette.fg("level-critical") + Style(strike=True)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append("".join(b[j1:j2]))
            continue
        if op in ("delete", "replace"):
            words = "".join(a[i1:i2])
            removed += len(words.split())
            out.append(words, deleted)
            if op == "replace":
                out.append(" ")  # keep the removed and the added words apart
        if op in ("insert", "replace"):
            words = "".join(b[j1:j2])
            added += len(words.split())
            out.append(words, inserted)
    return out, added, removed


def diff_document(
    row: DetectionRow, records: list[dict[str, Any]], palette: Palette = DEFAULT_PALETTE
) -> Text:
    """The detection and each evidence event against the previous one of its kind."""
    doc = Text()
    doc.append_text(literal(f"{row.detector} at #{row.seq}: {row.message}", style="bold", multiline=True))
    doc.append("\n")
    if len(records) < 2:
        doc.append("\nFewer than two evidence events are still available: nothing to compare.\n", style="dim")
        return doc
    doc.append(
        "Underlined on colour: words added since the previous repeat; struck: words removed.\n", style="dim"
    )
    previous: dict[tuple, dict[str, Any]] = {}
    for record in records:
        key = (record.get("type"), record.get("tool"))
        label = f"#{record.get('seq')} {record.get('type')}" + (
            f" {record['tool']}" if record.get("tool") else ""
        )
        doc.append(f"\n── {label} ", style="bold")
        before = previous.get(key)
        text = compared_text(record)
        if before is None:
            doc.append("(first)\n", style="dim")
            doc.append_text(literal(text, multiline=True))
        elif compared_text(before) == text:
            doc.append(f"identical to #{before.get('seq')}\n", style="dim")
            continue
        else:
            diff, added, removed = word_diff(compared_text(before), text, palette)
            doc.append(f"vs #{before.get('seq')}: +{added} −{removed} words\n", style="dim")
            doc.append_text(diff)
        doc.append("\n")
        previous[key] = record
    return doc


class RepeatDiffScreen(Screen[None]):
    """The evidence of one detection, diffed repeat by repeat."""

    if TYPE_CHECKING:
        app = getters.app(HostApp)

    BINDINGS = [
        Binding("escape,d", "close", "Back", id="diff.back", tooltip="Back to the session"),
        *SCROLL_BINDINGS,
    ]
    DEFAULT_CSS = """
    RepeatDiffScreen #diff-title { height: 1; background: $panel; padding: 0 1; }
    RepeatDiffScreen #diff-scroll { height: 1fr; padding: 0 1; }
    """

    def __init__(self, row: DetectionRow, records: list[dict[str, Any]]):
        super().__init__()
        self.row = row
        self.records = records

    def compose(self) -> ComposeResult:
        yield TextPanel(
            Text(
                f"Repeats of {visible(self.row.detector)} — {len(self.records)} evidence events"
                "  ·  j/k g/G scroll · esc back",
                no_wrap=True,
                overflow="ellipsis",
            ),
            id="diff-title",
        )
        with VerticalScroll(id="diff-scroll"):
            yield Static(diff_document(self.row, self.records, self.app.palette), id="diff-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#diff-scroll").focus()

    def action_scroll(self, where: str) -> None:
        scroll_pane(self.query_one("#diff-scroll", VerticalScroll), where)

    def action_close(self) -> None:
        self.dismiss(None)
