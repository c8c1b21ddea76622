"""The "where you are" diagram: one helper, every stage, the same picture on a repeat."""

from __future__ import annotations

import pytest
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text

from workbook.pipeline_figure import STAGES, PipelineFigure, where_you_are


def test_the_pipeline_is_the_arcs_six_stages_in_order() -> None:
    assert list(STAGES) == ["source", "retry", "key", "sink", "checkpoint", "effects"]


@pytest.mark.parametrize("stage", list(STAGES))
def test_the_named_stage_and_only_it_is_highlighted(stage: str) -> None:
    fig = where_you_are(stage)
    assert isinstance(fig, PipelineFigure)
    (ax,) = fig.axes
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == len(STAGES)
    bold = [t.get_text() for t in ax.texts if isinstance(t, Text) and t.get_fontweight() == "bold"]
    assert bold == [stage, "you are here"]
    widths = [b.get_linewidth() for b in boxes]
    assert widths.index(max(widths)) == list(STAGES).index(stage)
    assert repr(fig).startswith("where you are: ") and f"[{stage}]" in repr(fig)


def test_it_shows_as_a_png_and_repeats_byte_for_byte() -> None:
    first = where_you_are("key")._repr_png_()
    assert first.startswith(b"\x89PNG")
    assert where_you_are("key")._repr_png_() == first
    assert where_you_are("sink")._repr_png_() != first


def test_an_unknown_stage_names_the_stages() -> None:
    with pytest.raises(ValueError, match="source, retry, key, sink, checkpoint, effects"):
        where_you_are("load")
