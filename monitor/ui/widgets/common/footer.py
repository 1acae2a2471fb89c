"""The footer of every screen, fitted to narrow terminals.

Textual's footer lays its keys out in one row and cuts whatever does not fit,
which at 80 columns was ``q`` Quit and ``?`` Help.  Narrow, this footer
drops the spacing between keys, the command palette's key and the keys of
``NARROW_HIDDEN`` (all still work, and the help screen lists them) so that
the others stay visible.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: Below this width the footer is compact and hides the palette key.
NARROW_FOOTER = 120
#: Actions whose keys a narrow footer leaves to the help screen.
NARROW_HIDDEN = frozenset(
    {
        "next_attention",
        "cycle_sort",
        "diff",
        "mark",
        "mark_range",
        "attention_view",
        "toggle_log",
        "maximize_pane",
    }
)


class FittedFooter(Footer):
    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        if self.compact:
            kept = [w for w in widgets if not (isinstance(w, FooterKey) and w.action in NARROW_HIDDEN)]
            if len(kept) != len(widgets):
                self.styles.grid_size_columns = sum(isinstance(w, FooterKey) for w in kept)
                widgets = kept
        yield from widgets

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW_FOOTER
        if narrow != self.compact:
            self.compact = narrow
            self.show_command_palette = not narrow
            if self._bindings_ready:
                self.call_after_refresh(self.recompose)
