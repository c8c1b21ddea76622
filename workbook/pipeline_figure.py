"""The "where you are" diagram: the arc's pipeline with one stage highlighted.

Every concept notebook opens with the same picture, drawn by one call::

    from workbook.pipeline_figure import where_you_are

    where_you_are("retry")  # the last line of a cell: shows the diagram as a PNG

The pipeline is ``source → retry → key → sink → checkpoint → effects`` (`STAGES`). The stage
named is filled and bold, the stages before it are the ground already covered, the ones after
it are pale. The same stage always gives the same picture (no pyplot state, no randomness),
so a stored output reproduces on a re-run.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from workbook import palette
from workbook.teaching.backoff_figure import png

#: The pipeline's stages in order, each with the one line it is about.
STAGES: dict[str, str] = {
    "source": "fetch pages",
    "retry": "try again, wait",
    "key": "id per row",
    "sink": "write once",
    "checkpoint": "remember where",
    "effects": "act once",
}

_HERE, _DONE, _LATER = (
    palette.BLUE,
    palette.tint(palette.BLUE, 0.75),
    palette.tint(palette.GREY, 0.85),
)
_WIDTH, _GAP = 1.0, 0.45


class PipelineFigure(Figure):
    """A `Figure` that shows itself as a PNG in any notebook, and reads as its stage."""

    stage: str = ""

    def _repr_png_(self) -> bytes:
        return png(self, dpi=80)

    def __repr__(self) -> str:
        path = " → ".join(f"[{s}]" if s == self.stage else s for s in STAGES)
        return f"where you are: {path}"


def where_you_are(stage: str) -> PipelineFigure:
    """The pipeline diagram with `stage` (one of `STAGES`) highlighted, as a matplotlib figure.

    Put it last in a cell to show it; `ValueError` names the stages if `stage` is not one.
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}; got {stage!r}")
    here = list(STAGES).index(stage)
    step = _WIDTH + _GAP
    fig = PipelineFigure(figsize=(9.5, 1.35))
    fig.stage = stage
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(-0.2, len(STAGES) * step - _GAP + 0.2)
    ax.set_ylim(0.0, 1.0)
    ax.axis("off")
    for index, (name, gist) in enumerate(STAGES.items()):
        left = index * step
        current = index == here
        face = _HERE if current else _DONE if index < here else _LATER
        ax.add_patch(
            FancyBboxPatch(
                (left, 0.3),
                _WIDTH,
                0.42,
                boxstyle="round,pad=0.02,rounding_size=0.08",
                facecolor=face,
                edgecolor=palette.BLACK if current else palette.GREY,
                linewidth=2.0 if current else 1.0,
            )
        )
        ax.text(
            left + _WIDTH / 2,
            0.51,
            name,
            ha="center",
            va="center",
            fontsize=11,
            fontweight="bold" if current else "normal",
            color=palette.WHITE if current else palette.BLACK,
        )
        ax.text(
            left + _WIDTH / 2,
            0.14,
            gist,
            ha="center",
            va="center",
            fontsize=8.5,
            color=palette.DARK_GREY,
        )
        if index:
            ax.add_patch(
                FancyArrowPatch(
                    (left - _GAP + 0.04, 0.51),
                    (left - 0.04, 0.51),
                    arrowstyle="-|>",
                    mutation_scale=12,
                    color=palette.DARK_GREY,
                )
            )
    ax.text(
        here * step + _WIDTH / 2,
        0.9,
        "you are here",
        ha="center",
        va="center",
        fontsize=9,
        color=_HERE,
        fontweight="bold",
    )
    return fig
