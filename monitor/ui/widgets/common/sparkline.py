"""A similarity sparkline on a fixed 0..1 scale (:mod:`monitor.ui.sparks`).

Textual's :class:`~textual.widgets.Sparkline` scales to the data's own min and
max, so a steady loop (all 1.0) would look flat and low.  Similarity has an
absolute meaning, so this subclass draws on a fixed scale and colours bars
from the theme's ``spark-low`` to ``spark-high``.  As with the base class the
widget refreshes only when :attr:`data` is *assigned* a new sequence: callers
:meth:`~SimilaritySparkline.show` the hub's immutable histories, never mutate them.
"""

from __future__ import annotations

from rich.console import Group
from textual.app import RenderResult
from textual.widgets import Sparkline

from monitor.detect.summary import NO_SPARKS, Sparks
from monitor.ui.render import spark_rows
from monitor.ui.sparks import bars


class SimilaritySparkline(Sparkline):
    """Highest similarity of each recent event, newest on the right."""

    DEFAULT_CSS = """
    SimilaritySparkline { height: 1; width: 1fr; }
    """

    def __init__(self, sparks: Sparks = NO_SPARKS, **kwargs):
        super().__init__(bars(sparks), **kwargs)
        #: The history drawn (:attr:`data` is its bars).
        self.sparks = sparks

    def show(self, sparks: Sparks | None) -> None:
        """Draw another history; the same one again costs nothing."""
        sparks = sparks if sparks is not None else NO_SPARKS
        if sparks is not self.sparks:
            self.sparks = sparks
            self.data = bars(sparks)

    def render(self) -> RenderResult:
        palette = getattr(self.app, "palette", None)
        kwargs = {"palette": palette} if palette is not None else {}
        rows = spark_rows(self.data or (), max(1, self.size.width), max(1, self.size.height), **kwargs)
        return Group(*rows)
