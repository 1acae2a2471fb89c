"""A similarity sparkline on a fixed 0..1 scale.

Textual's :class:`~textual.widgets.Sparkline` scales to the data's own min and
max, so a steady loop (all 1.0) would look flat and low.  Similarity has an
absolute meaning, so this subclass draws on a fixed scale and colours bars
from the theme's ``spark-low`` to ``spark-high``.  As with the base class the
widget refreshes only when :attr:`data` is *assigned* a new sequence: callers
assign the hub's immutable tuples, never mutate them.
"""

from __future__ import annotations

from rich.console import Group
from textual.app import RenderResult
from textual.widgets import Sparkline

from monitor.ui.render import spark_rows


class SimilaritySparkline(Sparkline):
    """Highest similarity of each recent event, newest on the right."""

    DEFAULT_CSS = """
    SimilaritySparkline { height: 1; width: 1fr; }
    """

    def show(self, values: tuple[float, ...] | None) -> None:
        """Assign (never mutate) new data; unchanged data costs nothing."""
        if values is not self.data:
            self.data = values if values is not None else ()

    def render(self) -> RenderResult:
        palette = getattr(self.app, "palette", None)
        kwargs = {"palette": palette} if palette is not None else {}
        rows = spark_rows(self.data or (), max(1, self.size.width), max(1, self.size.height), **kwargs)
        return Group(*rows)
