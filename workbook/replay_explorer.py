"""The replay explorer: crash notebook 06's pipeline anywhere, replay it, and see what is left.

Three layers, each tested alone: the *model* (`workbook.teaching.replay_model`: the designs,
step by step, on notebook 06's own store, disturbed and replayed), the *picture*
(`workbook.teaching.replay_figure`) and the *panel* here: `explore()` puts a design, a
disturbance and, for a crash, the step it follows under controls a keyboard can work, and
redraws on every change. Above the picture, the verdict (CSS class ``replay-verdict``); under
it, the line a screen reader would read (class ``replay-alt``), also the image's ``alt``: both
are rebuilt with the picture from one run of the model.

The design and the disturbance are radio buttons (Tab, then Space), the crash step a labelled
number box tied to a slider (arrow keys step either): in JupyterLab's command mode the notebook
takes the arrow keys from a dropdown. Nothing here writes or checks a build 07 answer: its
functions take a design's name and return pictures and outcomes.
"""

from __future__ import annotations

import base64
import html
from typing import Any, cast

import ipywidgets as widgets
from matplotlib.figure import Figure

from workbook.teaching.backoff_figure import png
from workbook.teaching.panel import RedrawingPanel, focus_style, picture
from workbook.teaching.replay_figure import describe, draw
from workbook.teaching.replay_model import BY_NAME, DESIGNS, DISTURBANCES, Disturbance, Outcome, run

__all__ = ["ALT_PREFIX", "ReplayExplorer", "describe", "draw", "explore", "run"]

#: How the line under a figure begins, as under every figure of the notebooks.
ALT_PREFIX = "Figure: "
PANEL_DPI = 90

_LABEL_WIDTH = {"description_width": "90px"}


class ReplayExplorer(RedrawingPanel):
    """The panel. `controls` maps ``design``, ``disturbance`` and ``crash_after`` to the
    labelled widget that sets each (`slider` moves ``crash_after`` too); every change runs the
    model once and replaces the verdict, the image and the line under it."""

    def __init__(
        self, design: str = "naive", disturbance: Disturbance = "crash", crash_after: int = 2
    ) -> None:
        steps = len(BY_NAME[design].steps)
        self.controls: dict[str, widgets.Widget] = {
            "design": widgets.RadioButtons(
                options=[(d.title, d.name) for d in DESIGNS],
                value=design,
                description="design",
                style=_LABEL_WIDTH,
                layout=widgets.Layout(width="470px"),
            ),
            "disturbance": widgets.RadioButtons(
                options=[(label, name) for name, label in DISTURBANCES.items()],
                value=disturbance,
                description="disturbance",
                style=_LABEL_WIDTH,
                layout=widgets.Layout(width="360px"),
            ),
            "crash_after": widgets.BoundedIntText(
                value=crash_after,
                min=1,
                max=steps,
                description="crash after step",
                style={"description_width": "120px"},
                layout=widgets.Layout(width="190px"),
            ),
        }
        self.slider = widgets.IntSlider(
            value=crash_after,
            min=1,
            max=steps,
            readout=False,
            continuous_update=False,  # one redraw per move, not one per step passed
            layout=widgets.Layout(width="300px"),
        )
        widgets.link((self.controls["crash_after"], "value"), (self.slider, "value"))
        self.verdict = widgets.HTML().add_class("replay-verdict")
        self.image = widgets.HTML().add_class("replay-figure")
        self.alt = widgets.HTML().add_class("replay-alt")
        self.outcome: Outcome  # set by every refresh, the first one below
        self.figure: Figure = Figure()
        self.picture = b""
        style = focus_style("replay-explorer")
        c = self.controls
        super().__init__(
            [
                style,
                widgets.HBox([c["design"], c["disturbance"]]),
                self.verdict,
                self.image,
                # Under the figure, whose bottom row is the page's steps: the slider moves
                # the crash along them.
                widgets.HBox([c["crash_after"], self.slider]).add_class("replay-crash"),
                self.alt,
            ],
            "replay-explorer",
        )
        self.watch(c.values())
        self.refresh()

    @property
    def focus_order(self) -> list[widgets.Widget]:
        """Every control in the order Tab reaches it."""
        c = self.controls
        return [c["design"], c["disturbance"], c["crash_after"], self.slider]

    @property
    def alt_text(self) -> str:
        return ALT_PREFIX + describe(self.outcome)

    def refresh(self) -> None:
        """Run the chosen combination and redraw everything from its one outcome."""
        c = self.controls
        design = str(c["design"].value)
        disturbance = cast(Disturbance, c["disturbance"].value)
        steps = len(BY_NAME[design].steps)
        # A design with fewer steps pulls the crash step within its range, without a redraw.
        with self.batch(redraw=False):
            for control in (c["crash_after"], self.slider):
                control.max = steps
                control.disabled = disturbance != "crash"
        # A disabled slider's handle stays a Tab stop with nothing to do: hide it instead.
        self.slider.layout.visibility = "visible" if disturbance == "crash" else "hidden"
        self.outcome = run(design, disturbance, int(c["crash_after"].value))
        self.figure = draw(self.outcome)
        line = describe(self.outcome)
        self.picture, self.image.value = picture(self.figure, line, PANEL_DPI)
        self.alt.value = html.escape(ALT_PREFIX + line)
        mark = "✓" if self.outcome.converged else "✗"
        self.verdict.value = f"<b>{mark} {html.escape(self.outcome.verdict)}</b>"

    def set(self, **changes: Any) -> None:
        """Move several controls at once, then redraw once."""
        unknown = set(changes) - set(self.controls)
        if unknown:
            raise TypeError(f"no such control: {', '.join(sorted(unknown))}")
        with self.batch():
            if "design" in changes:
                steps = len(BY_NAME[changes["design"]].steps)
                self.controls["crash_after"].max = self.slider.max = steps
            for name, value in changes.items():
                self.controls[name].value = value

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # Without a live kernel (GitHub, nbviewer), the stored PNG and the verdict stand in.
        data: dict[str, Any] = dict(super()._repr_mimebundle_(**kwargs) or {})
        data["text/plain"] = f"replay explorer: {self.outcome.verdict}"
        data["image/png"] = base64.b64encode(png(self.figure)).decode("ascii")
        return data


def explore(
    design: str = "naive", disturbance: Disturbance = "crash", crash_after: int = 2
) -> ReplayExplorer:
    """The panel, opening on notebook 06's first demo: the naive loop, dying two items into
    page 3."""
    return ReplayExplorer(design, disturbance, crash_after)
