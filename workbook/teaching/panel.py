"""What the notebooks' explorers share: a panel that redraws once per change, its picture as an
``<img>`` with an alt text, and a keyboard focus ring.

A panel's controls call `refresh` on every change of value; inside `batch()` they do not, and
`refresh` runs once when the batch ends, so setting several controls from code redraws once.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from workbook import palette
from workbook.teaching.backoff_figure import png


def focus_style(css_class: str, extra: str = "") -> widgets.HTML:
    """A hidden widget carrying the style of keyboard focus inside `css_class`: a thick ring in
    the palette's blue (5:1 against white), where ipywidgets draws a pale border (removed with
    !important) or recolours a slider's handle. `extra`: more rules for the same panel."""
    rules = (
        f".{css_class} :is(input, button, select, .noUi-handle):focus-visible"
        f" {{outline: 3px solid {palette.BLUE} !important; outline-offset: 2px;}}"
        # ipywidgets' boxes scroll (overflow: auto), which would clip the ring at their edges.
        f" .{css_class} .widget-box {{overflow: visible;}}"
    )
    return widgets.HTML(f"<style>{rules}{extra}</style>", layout=widgets.Layout(display="none"))


def picture(figure: Figure, alt: str, dpi: int) -> tuple[bytes, str]:
    """`figure` as PNG bytes, and an ``<img>`` of them with `alt`, at its own size: not
    stretched to the panel's width, which blurs it; shrunk only on a narrower page."""
    data = png(figure, dpi=dpi)
    width, height = (round(x * dpi) for x in figure.get_size_inches())
    encoded = base64.b64encode(data).decode("ascii")
    tag = (
        f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}" '
        f'width="{width}" height="{height}" style="max-width: 100%; height: auto">'
    )
    return data, tag


class RedrawingPanel(widgets.VBox):  # type: ignore[misc]
    """A VBox whose watched controls call `refresh` on every change, except inside `batch()`."""

    def __init__(self, children: list[widgets.Widget], css_class: str) -> None:
        super().__init__(children)
        self.add_class(css_class)
        self._batching = False

    def watch(self, controls: Iterable[widgets.Widget]) -> None:
        for control in controls:
            control.observe(self._changed, names="value")

    def _changed(self, _change: dict[str, Any]) -> None:
        if not self._batching:
            self.refresh()

    @contextmanager
    def batch(self, *, redraw: bool = True) -> Iterator[None]:
        """Change controls without a redraw per change; then one redraw (unless not `redraw`)."""
        self._batching = True
        try:
            yield
        finally:
            self._batching = False
        if redraw:
            self.refresh()

    def refresh(self) -> None:
        raise NotImplementedError
