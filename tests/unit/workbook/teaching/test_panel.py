"""The explorers' shared panel: one redraw per change, one per batch, and the picture's tag."""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.figure import Figure

from workbook.teaching.panel import RedrawingPanel, focus_style, picture


class Counting(RedrawingPanel):
    def __init__(self) -> None:
        self.box = widgets.IntText(value=0)
        self.other = widgets.IntText(value=0)
        self.redraws = 0
        super().__init__([self.box, self.other], "counting-panel")
        self.watch([self.box, self.other])

    def refresh(self) -> None:
        self.redraws += 1


def test_each_change_redraws_once_and_a_batch_once_in_all() -> None:
    panel = Counting()
    panel.box.value = 1
    assert panel.redraws == 1
    with panel.batch():
        panel.box.value = 2
        panel.other.value = 3
    assert panel.redraws == 2
    with panel.batch(redraw=False):
        panel.box.value = 4
    assert panel.redraws == 2
    assert "counting-panel" in panel._dom_classes


def test_a_batch_that_raises_does_not_redraw_and_watching_resumes() -> None:
    panel = Counting()
    try:
        with panel.batch():
            panel.box.value = 5
            raise ValueError("bad value")
    except ValueError:
        pass
    assert panel.redraws == 0
    panel.box.value = 6
    assert panel.redraws == 1


def test_the_picture_is_an_img_at_its_own_size_with_the_alt_escaped() -> None:
    figure = Figure(figsize=(2, 1))
    figure.add_subplot().plot([0, 1], [1, 0])
    data, tag = picture(figure, 'waits "capped" & <jittered>', dpi=50)
    assert data.startswith(b"\x89PNG")
    assert 'width="100" height="50"' in tag
    assert 'alt="waits &quot;capped&quot; &amp; &lt;jittered&gt;"' in tag


def test_the_focus_style_is_hidden_and_scoped_to_its_panel() -> None:
    style = focus_style("some-panel", " .some-panel p {color: inherit;}")
    assert style.layout.display == "none"
    assert ".some-panel :is(input" in style.value and ".some-panel p" in style.value
