"""The backoff explorer: whole retry schedules, drawn, under sliders.

Three layers, kept apart so each can be tested alone:

- *Schedules* (`workbook.teaching.backoff_schedule`, pure and seeded): for a `Settings`, when each
  attempt starts and how long each wait before a retry lasts, for one client or for a whole
  herd of clients, assuming every attempt fails.
- *Drawing* (`workbook.teaching.backoff_figure`): `draw(settings)` returns a matplotlib `Figure`;
  `snapshot(**settings)` is the static picture for stored outputs.
- *The panel* (here): `explore(**settings)` wraps the drawing in an ipywidgets panel that
  redraws on every change, replacing its one image, and states a one-line summary in an HTML
  element with the CSS class ``backoff-summary`` (once: the live picture has no title).

Notebooks use this module alone (``from workbook import explorer``): every name of the two
layers below is here too. It is not a retry loop and has no per-attempt backoff function to
call: that is what build 03 asks a learner to write.
"""

from __future__ import annotations

import base64
import html
from dataclasses import fields, replace
from typing import Any, cast

import ipywidgets as widgets
from matplotlib.figure import Figure

from workbook.teaching.backoff_figure import Snapshot, draw, png, snapshot
from workbook.teaching.backoff_schedule import (
    CROWD_WINDOW,
    JITTERS,
    MAX_CLIENTS,
    OPENING,
    Jitter,
    Schedule,
    Settings,
    Source,
    Wait,
    crowd,
    herd,
    rolling,
    schedule,
    summary,
)

__all__ = [
    "CROWD_WINDOW",
    "JITTERS",
    "MAX_CLIENTS",
    "OPENING",
    "PANEL_DPI",
    "BackoffExplorer",
    "Jitter",
    "Schedule",
    "Settings",
    "Snapshot",
    "Source",
    "Wait",
    "crowd",
    "draw",
    "explore",
    "herd",
    "png",
    "rolling",
    "schedule",
    "snapshot",
    "summary",
]

#: The live panel renders a little larger than the static snapshots (760 px wide at 80 dpi).
PANEL_DPI = 96


def _slider_style() -> dict[str, str]:
    return {"description_width": "initial"}


class BackoffExplorer(widgets.VBox):  # type: ignore[misc]
    """The control panel. Every change redraws `figure` and replaces the one image in place.

    `controls` maps each `Settings` field to its widget (Retry-After has a checkbox,
    ``retry_after_enabled``, plus its value), so code and tests drive it like a learner does.
    """

    def __init__(self, settings: Settings = OPENING) -> None:
        common: dict[str, Any] = {"continuous_update": False, "style": _slider_style()}
        wide = widgets.Layout(width="330px")
        self.controls: dict[str, widgets.Widget] = {
            "max_attempts": widgets.IntSlider(
                value=settings.max_attempts,
                min=1,
                max=12,
                description="max attempts",
                layout=wide,
                **common,
            ),
            "base_delay": widgets.FloatSlider(
                value=settings.base_delay,
                min=0.05,
                max=2.0,
                step=0.05,
                readout_format=".2f",
                description="base delay (s)",
                layout=wide,
                **common,
            ),
            "cap": widgets.FloatSlider(
                value=settings.cap,
                min=0.5,
                max=60.0,
                step=0.5,
                readout_format=".1f",
                description="cap (s)",
                layout=wide,
                **common,
            ),
            "jitter": widgets.ToggleButtons(
                value=settings.jitter,
                options=list(JITTERS),
                description="jitter",
                tooltips=[
                    "min(cap, base·2^(n-1))",
                    "U(0, min(cap, base·2^(n-1)))",
                    "t/2 + U(0, t/2), t = min(cap, base·2^(n-1))",
                    "min(cap, U(base, 3·previous))",
                ],
                style={"description_width": "initial", "button_width": "112px"},
            ),
            "retry_after_enabled": widgets.Checkbox(
                value=settings.retry_after is not None,
                description="server sends Retry-After",
                indent=False,
                layout=widgets.Layout(width="190px"),
            ),
            "retry_after": widgets.BoundedFloatText(
                value=5.0 if settings.retry_after is None else settings.retry_after,
                min=0.0,
                max=3600.0,
                step=0.5,
                description="seconds",
                layout=widgets.Layout(width="150px"),
                **common,
            ),
            "retry_after_on": widgets.BoundedIntText(
                value=settings.retry_after_on,
                min=1,
                max=11,
                description="after attempt",
                layout=widgets.Layout(width="150px"),
                **common,
            ),
            "clients": widgets.IntSlider(
                value=settings.clients,
                min=1,
                max=MAX_CLIENTS,
                description="clients",
                layout=wide,
                **common,
            ),
            "seed": widgets.BoundedIntText(
                value=settings.seed,
                min=0,
                max=9999,
                description="seed",
                layout=widgets.Layout(width="140px"),
                **common,
            ),
        }
        c = self.controls
        self.summary = widgets.HTML().add_class("backoff-summary")
        # Shown at its own size (not stretched to the panel's width, which blurs it), and
        # shrunk only when the page is narrower than the picture.
        self.image = widgets.Image(
            format="png", layout=widgets.Layout(max_width="100%", align_self="flex-start")
        )
        self.figure: Figure = Figure()
        left = widgets.VBox([c["max_attempts"], c["base_delay"], c["cap"]])
        right = widgets.VBox([c["clients"], c["seed"]])
        retry_after = widgets.HBox(
            [c["retry_after_enabled"], c["retry_after"], c["retry_after_on"]]
        )
        super().__init__(
            [widgets.HBox([left, right]), c["jitter"], retry_after, self.summary, self.image]
        )
        self.add_class("backoff-explorer")
        self._batching = False
        for control in c.values():
            control.observe(self._changed, names="value")
        self.refresh()

    @property
    def settings(self) -> Settings:
        """The settings the controls show now (slider floats rounded to their step)."""
        c = self.controls
        enabled = bool(cast(widgets.Checkbox, c["retry_after_enabled"]).value)
        values = {name: c[name].value for name in _FIELD_NAMES}
        values["base_delay"] = round(float(values["base_delay"]), 3)
        values["cap"] = round(float(values["cap"]), 3)
        values["retry_after"] = float(values["retry_after"]) if enabled else None
        return Settings(**values)

    def _changed(self, _change: dict[str, Any]) -> None:
        if not self._batching:
            self.refresh()

    def refresh(self) -> None:
        """Redraw for the current settings, replacing the image and the summary."""
        settings = self.settings
        enabled = settings.retry_after is not None
        self.controls["retry_after"].disabled = not enabled
        self.controls["retry_after_on"].disabled = not enabled
        # The summary line above says it all once; the picture carries no copy of it.
        self.figure = draw(settings, title=False)
        self.image.value = png(self.figure, dpi=PANEL_DPI)
        self.summary.value = f"<b>{html.escape(summary(settings))}</b>"

    def set(self, **changes: Any) -> None:
        """Move several controls at once, then redraw once.

        ``retry_after=None`` unticks the Retry-After box; a number ticks it and sets it.
        """
        unknown = set(changes) - set(self.controls)
        if unknown:
            raise TypeError(f"no such control: {', '.join(sorted(unknown))}")
        self._batching = True
        try:
            for name, value in changes.items():
                if name == "retry_after":
                    self.controls["retry_after_enabled"].value = value is not None
                    if value is None:
                        continue
                self.controls[name].value = value
        finally:
            self._batching = False
        self.refresh()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # JupyterLab prefers the live widget view; renderers without widgets (GitHub,
        # nbviewer, a closed kernel) fall back to this PNG of the current state, and the
        # text is the summary rather than a repr that names every child widget.
        data: dict[str, Any] = dict(super()._repr_mimebundle_(**kwargs) or {})
        data["text/plain"] = f"backoff explorer: {summary(self.settings)}"
        # Without the live summary line, the fallback picture carries the summary as its title.
        titled = draw(self.settings)
        data["image/png"] = base64.b64encode(png(titled)).decode("ascii")
        return data


_FIELD_NAMES = tuple(f.name for f in fields(Settings))


def explore(**initial: Any) -> BackoffExplorer:
    """The panel, opening on `OPENING` with any of `Settings`' fields overridden."""
    return BackoffExplorer(replace(OPENING, **initial))
