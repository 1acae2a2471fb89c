"""A fixed-size text panel that repaints without a layout pass.

``Static.update`` always asks for a layout refresh of the whole screen, which
re-renders every widget on it — too costly for panels that change ten times a
second.  A :class:`TextPanel` has its size fixed by CSS, keeps its renderable
and only repaints itself; content taller than the panel is cropped.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget


class TextPanel(Widget):
    DEFAULT_CSS = """
    TextPanel { height: 1; }
    """

    def __init__(self, renderable: RenderableType = "", **kwargs):
        super().__init__(**kwargs)
        self._renderable: RenderableType = renderable if renderable != "" else Text("")

    def show_renderable(self, renderable: RenderableType) -> None:
        self._renderable = renderable
        self.refresh()

    def render(self) -> RenderResult:
        return self._renderable
