"""The backoff explorer: whole retry schedules, drawn, under controls a keyboard can work.

Three layers, kept apart so each can be tested alone:

- *Schedules* (`workbook.teaching.backoff_schedule`, pure and seeded): for a `Settings`, when each
  attempt starts and how long each wait before a retry lasts, for one client or for a whole
  herd of clients, assuming every attempt fails.
- *Drawing* (`workbook.teaching.backoff_figure`): `draw(settings)` returns a matplotlib `Figure`;
  `snapshot(**settings)` is the static picture for stored outputs.
- *The panel* (here): `explore(**settings)` wraps the drawing in an ipywidgets panel that
  redraws on every change, replacing its one image. Above the image, a one-line summary (CSS
  class ``backoff-summary``; the live picture has no title); under it, the line a screen reader
  would read for the picture (`describe`, class ``backoff-alt``), which is also the image's
  ``alt``. Both are recomputed from the same settings as the picture on every change.

Every control has a label that names it to assistive technology and is reached by Tab in
reading order. A number is set in a labelled box (arrow keys step it, typing and Enter set it)
tied to a slider for the mouse (arrow keys, Home, End, PageUp and PageDown move it).
ipywidgets' slider handle carries no accessible name (jupyter-widgets/ipywidgets#2650), hence
the box. The jitter is a row of radio buttons, each operated by Tab and Space: in JupyterLab's
command mode the notebook takes ArrowUp and ArrowDown from a dropdown (to move between cells),
and toggle buttons do not say which one is pressed.

Notebooks use this module alone (``from workbook import explorer``): every name of the two
layers below is here too. It is not a retry loop and has no per-attempt backoff function to
call: that is what build 03 asks a learner to write.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
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
    plural,
    rolling,
    schedule,
    seconds_text,
    summary,
)
from workbook.teaching.panel import RedrawingPanel, focus_style, picture

__all__ = [
    "ALT_PREFIX",
    "CROWD_WINDOW",
    "FORMULAS",
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
    "describe",
    "draw",
    "explore",
    "herd",
    "png",
    "rolling",
    "schedule",
    "snapshot",
    "summary",
]

#: The live panel renders a little larger than the static snapshots (912 px wide at 96 dpi).
PANEL_DPI = 96

#: How the line under a figure begins, as under every figure of the notebooks.
ALT_PREFIX = "Figure: "

#: What each jitter strategy draws, shown beside the choice (a tooltip would reach the mouse
#: only).
FORMULAS: dict[Jitter, str] = {
    "none": "wait = min(cap, base·2^(n-1))",
    "full": "wait = U(0, t), t = min(cap, base·2^(n-1))",
    "equal": "wait = t/2 + U(0, t/2), t = min(cap, base·2^(n-1))",
    "decorrelated": "wait = min(cap, U(base, 3·previous))",
}

#: The numeric settings a box and a slider set together: type, bounds, step, label.
_SCALES: dict[str, tuple[type, float, float, float, str]] = {
    "max_attempts": (int, 1, 12, 1, "max attempts"),
    "base_delay": (float, 0.05, 2.0, 0.05, "base delay (s)"),
    "cap": (float, 0.5, 60.0, 0.5, "cap (s)"),
    "clients": (int, 1, MAX_CLIENTS, 1, "clients"),
}

_LABEL_WIDTH = {"description_width": "105px"}

#: Inside the explorer, the line under the picture gets room to breathe.
_ALT_STYLE = " .backoff-explorer .backoff-alt .widget-html-content {line-height: 1.4;}"


def _attempts_text(numbers: Sequence[int]) -> str:
    """``attempt 3``, ``attempts 7 and 8``, ``attempts 2 and 5 to 8`` (runs of 3+ joined)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts: list[str] = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"{run[0]} to {run[-1]}")
        else:
            parts += [str(n) for n in run]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"attempt {listed}" if len(numbers) == 1 else f"attempts {listed}"


def _cap_text(waits: Sequence[Wait], jittered: bool) -> str:
    """What the cap does to the waits, as the bottom panel shows it."""
    cut = [w.after_attempt for w in waits if w.cut]
    if not jittered:
        if cut:
            return f"the cap cuts the waits after {_attempts_text(cut)}"
        return "no wait reaches the cap"
    ranged = [w.after_attempt for w in waits if w.capped]
    said = []
    if ranged:
        said.append(f"the cap cuts the ranges of the waits after {_attempts_text(ranged)}")
    if cut:
        said.append(f"the waits after {_attempts_text(cut)} are the cap itself")
    return " and ".join(said) if said else "no range reaches the cap"


def _herd_text(settings: Settings, all_clients: Sequence[Schedule]) -> str:
    """The middle panel: where the rolling count of the herd's retries peaks (its marker)."""
    window = f"{CROWD_WINDOW * 1000:.0f} ms"
    edges, counts = rolling(all_clients)
    if not counts:
        return f"Middle: {settings.clients} clients, none of which retries."
    peak = max(counts)
    at = edges[counts.index(peak)]
    retries = "1 retry" if peak == 1 else f"{peak} retries"
    whole = ", the whole herd at once" if peak == settings.clients else ""
    return (
        f"Middle: the retries of all {settings.clients} clients reaching the server; the busiest "
        f"{window} holds {retries}{whole}, at {seconds_text(at)} s."
    )


def describe(settings: Settings) -> str:
    """What the explorer's picture of `settings` shows, in one line: what a screen reader
    reads for it. Each count, time and wait in it is one the picture shows, rounded as the
    picture's labels are; the same settings always give the same line."""
    all_clients = herd(settings)
    one = all_clients[0]
    waits = one.waits
    jittered = settings.jitter != "none"
    strategy = f"{settings.jitter} jitter, seed {settings.seed}" if jittered else "no jitter"
    failing = "every one failing" if settings.max_attempts > 1 else "failing"
    said = [f"{strategy}, {plural(settings.max_attempts, 'attempt')}, {failing}."]
    if waits:
        said.append(
            f"Top: client 1's attempts (circles) and {plural(len(waits), 'sleep')} (bars), "
            f"{seconds_text(one.total_wait)} s of waiting in all."
        )
    else:
        said.append("Top: client 1's single attempt; it gives up without a sleep.")
    if settings.clients > 1:
        said.append(_herd_text(settings, all_clients))
    cap = f"{settings.cap:.1f} s"
    if waits:
        heights = ", ".join(seconds_text(w.seconds) for w in waits)
        bottom = f"Bottom: each wait against the {cap} cap (dashed line): {heights} s"
        if jittered:
            bottom += ", each drawn from the pale range behind it"
        bottom += f"; {_cap_text(waits, jittered)}"
        if settings.retry_after is not None:
            on = settings.retry_after_on
            if on < settings.max_attempts:
                bottom += (
                    f"; the wait after attempt {on} is the server's Retry-After, "
                    f"{seconds_text(settings.retry_after)} s"
                )
            else:
                bottom += f"; a Retry-After after attempt {on} is never reached"
        said.append(bottom + ".")
    else:
        said.append(f"Bottom: no wait to draw, only the {cap} cap (dashed line).")
    return " ".join(said)


def _scale(name: str, value: float) -> tuple[widgets.Widget, widgets.Widget]:
    """A labelled number box and an unlabelled slider over the same range, kept equal."""
    kind, low, high, step, label = _SCALES[name]
    box_type = widgets.BoundedIntText if kind is int else widgets.BoundedFloatText
    slider_type = widgets.IntSlider if kind is int else widgets.FloatSlider
    bounds: dict[str, Any] = {"min": low, "max": high, "step": step, "continuous_update": False}
    box = box_type(
        value=value,
        description=label,
        style=_LABEL_WIDTH,
        layout=widgets.Layout(width="185px"),
        **bounds,
    )
    slider = slider_type(value=value, readout=False, layout=widgets.Layout(width="165px"), **bounds)
    # In the kernel, so that a change made from code moves both as one made in the page does.
    widgets.link((box, "value"), (slider, "value"))
    return box, slider


class BackoffExplorer(RedrawingPanel):
    """The control panel. Every change redraws `figure` and replaces the one image in place,
    the summary above it and the line under it.

    `controls` maps each `Settings` field to the labelled widget that sets it (Retry-After has
    a checkbox, ``retry_after_enabled``, plus its value), so code and tests drive it like a
    learner does; `sliders` holds the sliders tied to the numeric ones. Widgets appear, and Tab
    reaches them, in the order of `focus_order`.
    """

    def __init__(self, settings: Settings = OPENING) -> None:
        boxes: dict[str, widgets.Widget] = {}
        self.sliders: dict[str, widgets.Widget] = {}
        rows: dict[str, widgets.Widget] = {}
        for name in _SCALES:
            boxes[name], self.sliders[name] = _scale(name, getattr(settings, name))
            rows[name] = widgets.HBox([boxes[name], self.sliders[name]]).add_class(
                f"backoff-{name.replace('_', '-')}"
            )
        small = widgets.Layout(width="185px")
        self.controls: dict[str, widgets.Widget] = {
            **boxes,
            "jitter": widgets.RadioButtons(
                value=settings.jitter,
                options=list(JITTERS),
                description="jitter",
                orientation="horizontal",
                style=_LABEL_WIDTH,
                layout=widgets.Layout(width="330px"),
            ),
            "retry_after_enabled": widgets.Checkbox(
                value=settings.retry_after is not None,
                description="server sends Retry-After",
                indent=False,
                layout=widgets.Layout(width="200px"),
            ),
            "retry_after": widgets.BoundedFloatText(
                value=5.0 if settings.retry_after is None else settings.retry_after,
                min=0.0,
                max=3600.0,
                step=0.5,
                description="Retry-After (s)",
                continuous_update=False,
                style=_LABEL_WIDTH,
                layout=small,
            ),
            "retry_after_on": widgets.BoundedIntText(
                value=settings.retry_after_on,
                min=1,
                max=11,
                description="after attempt",
                continuous_update=False,
                style=_LABEL_WIDTH,
                layout=small,
            ),
            "seed": widgets.BoundedIntText(
                value=settings.seed,
                min=0,
                max=9999,
                description="seed",
                continuous_update=False,
                style=_LABEL_WIDTH,
                layout=small,
            ),
        }
        c = self.controls
        self.summary = widgets.HTML().add_class("backoff-summary")
        self.formula = widgets.HTML().add_class("backoff-formula")
        # An <img> of our own (not widgets.Image, which has no alt), at its own size: not
        # stretched to the panel's width, which blurs it; shrunk only on a narrower page.
        self.image = widgets.HTML().add_class("backoff-figure")
        self.alt = widgets.HTML().add_class("backoff-alt")
        self.picture = b""
        """The PNG bytes the image shows."""
        self.figure: Figure = Figure()
        left = widgets.VBox([rows["max_attempts"], rows["base_delay"], rows["cap"]])
        right = widgets.VBox([rows["clients"], c["seed"]])
        retry_after = widgets.HBox(
            [c["retry_after_enabled"], c["retry_after"], c["retry_after_on"]]
        )
        jitter = widgets.HBox(
            [c["jitter"], self.formula], layout=widgets.Layout(align_items="flex-end")
        )
        # Hidden: it carries only the focus style, which applies wherever it is in the page.
        style = focus_style("backoff-explorer", _ALT_STYLE)
        super().__init__(
            [
                style,
                widgets.HBox([left, right]),
                jitter,
                retry_after,
                self.summary,
                self.image,
                self.alt,
            ],
            "backoff-explorer",
        )
        self.watch(c.values())
        self.refresh()

    @property
    def focus_order(self) -> list[widgets.Widget]:
        """Every control in the order Tab reaches it: reading order, left column first."""
        c, s = self.controls, self.sliders
        return [
            *(
                w
                for name in ("max_attempts", "base_delay", "cap", "clients")
                for w in (c[name], s[name])
            ),
            c["seed"],
            c["jitter"],
            c["retry_after_enabled"],
            c["retry_after"],
            c["retry_after_on"],
        ]

    @property
    def settings(self) -> Settings:
        """The settings the controls show now (floats rounded to the millisecond)."""
        c = self.controls
        enabled = bool(cast(widgets.Checkbox, c["retry_after_enabled"]).value)
        values = {name: c[name].value for name in _FIELD_NAMES}
        values["base_delay"] = round(float(values["base_delay"]), 3)
        values["cap"] = round(float(values["cap"]), 3)
        values["retry_after"] = float(values["retry_after"]) if enabled else None
        return Settings(**values)

    @property
    def alt_text(self) -> str:
        """The line under the picture, as a screen reader reads it."""
        return ALT_PREFIX + describe(self.settings)

    def refresh(self) -> None:
        """Redraw for the current settings, replacing the image, its alt, the summary, the
        line under the image and the formula, all from one reading of the controls."""
        settings = self.settings
        enabled = settings.retry_after is not None
        self.controls["retry_after"].disabled = not enabled
        self.controls["retry_after_on"].disabled = not enabled
        # The summary line above says it all once; the picture carries no copy of it.
        self.figure = draw(settings, title=False)
        line = describe(settings)
        self.picture, self.image.value = picture(self.figure, line, PANEL_DPI)
        self.alt.value = html.escape(ALT_PREFIX + line)
        self.summary.value = f"<b>{html.escape(summary(settings))}</b>"
        self.formula.value = html.escape(FORMULAS[settings.jitter])

    def set(self, **changes: Any) -> None:
        """Move several controls at once, then redraw once.

        ``retry_after=None`` unticks the Retry-After box; a number ticks it and sets it.
        """
        unknown = set(changes) - set(self.controls)
        if unknown:
            raise TypeError(f"no such control: {', '.join(sorted(unknown))}")
        with self.batch():
            for name, value in changes.items():
                if name == "retry_after":
                    self.controls["retry_after_enabled"].value = value is not None
                    if value is None:
                        continue
                self.controls[name].value = value

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
