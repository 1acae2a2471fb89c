"""One labelled similarity sparkline per detector that has reported any."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from monitor.detect.summary import Sparks
from monitor.ui.literal import literal
from monitor.ui.widgets.common.sparkline import SimilaritySparkline


class DetectorSparkline(Horizontal):
    DEFAULT_CSS = """
    DetectorSparkline { height: 1; }
    DetectorSparkline > Label { width: 18; }
    """

    def __init__(self, detector: str, values: Sparks):
        super().__init__()
        self.detector = detector
        self.values = values

    def compose(self) -> ComposeResult:
        yield Label(literal(self.detector, limit=17))
        yield SimilaritySparkline(self.values)


class DetectorSparklines(Vertical):
    """Adds a line per new detector; assigns new data to existing ones."""

    DEFAULT_CSS = """
    DetectorSparklines { height: auto; }
    """

    def __init__(self, series: Mapping[str, Sparks] | None = None, **kwargs):
        super().__init__(**kwargs)
        self._initial = dict(series or {})
        self._lines: dict[str, DetectorSparkline] = {}

    def compose(self) -> ComposeResult:
        for name in sorted(self._initial):
            line = self._lines[name] = DetectorSparkline(name, self._initial[name])
            yield line
        if not self._lines:
            yield Label(Text("No similarity reported yet.", style="dim"), id="no-sparklines")

    def show(self, series: Mapping[str, Sparks]) -> None:
        added = []
        for name in sorted(series):
            values = series[name]
            line = self._lines.get(name)
            if line is None:
                line = self._lines[name] = DetectorSparkline(name, values)
                added.append(line)
            elif line.is_mounted:
                line.query_one(SimilaritySparkline).show(values)
        if added:
            self.query("#no-sparklines").remove()
            self.mount_all(added)
            self.call_after_refresh(self.refresh, layout=True)
