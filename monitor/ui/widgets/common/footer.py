"""The footer of every screen, fitted to narrow terminals.

Textual's footer lays its keys out in one row and cuts whatever does not fit,
which at 80 columns was ``q`` Quit and ``?`` Help.  Narrow, this footer
drops the spacing between keys and the command palette's key (ctrl+p still
works; the help screen lists it) so that every key stays visible.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

#: Below this width the footer is compact and hides the palette key.
NARROW_FOOTER = 120


class FittedFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW_FOOTER
        if narrow != self.compact:
            self.compact = narrow
            self.show_command_palette = not narrow
            if self._bindings_ready:
                self.call_after_refresh(self.recompose)
