"""The backoff explorer: whole retry schedules, drawn, under sliders.

Two layers, kept apart so each can be tested alone:

- *Schedules* (pure, seeded): for a `Settings`, when each attempt starts and how long each
  wait before a retry lasts, for one client or for a whole herd of clients, assuming every
  attempt fails (the worst case a retry policy must be sized for). The same settings always
  give the same schedules; client 1's schedule does not depend on how many clients there are.
- *Drawing*: `draw(settings)` returns a matplotlib `Figure` (a timeline of client 1, when the
  herd's retries reach the server, and the wait before each retry against the cap);
  `explore(**settings)` wraps it in an ipywidgets panel that redraws on every change,
  replacing its one image, and states a one-line summary in an HTML element with the CSS
  class ``backoff-summary``; `snapshot(**settings)` is the static picture for stored outputs.

This module is for looking at schedules. It is not a retry loop and has no per-attempt
backoff function to call: that is what build 03 asks a learner to write.
"""

from __future__ import annotations

import base64
import html
import io
import random
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, cast, get_args

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

Jitter = Literal["none", "full", "equal", "decorrelated"]
JITTERS: tuple[Jitter, ...] = get_args(Jitter)

#: How a wait was chosen: by the backoff formula, or by the server's Retry-After.
Source = Literal["backoff", "retry-after"]

#: The live panel renders a little larger than the static snapshots (760 px wide at 80 dpi).
PANEL_DPI = 96

#: The most clients the herd view draws; more would only slow the panel down.
MAX_CLIENTS = 200

_BLUE, _PURPLE, _ORANGE, _RED, _GREY = "#1f77b4", "#7b4fa8", "#ff7f0e", "#d62728", "#9a9a9a"


@dataclass(frozen=True)
class Settings:
    """Everything the explorer's controls set. The defaults are the seed's retry policy:
    4 attempts, 200 ms base delay, 10 s cap, no jitter, one client.

    `retry_after` (seconds), when not None, is what the server answers on the failure of
    attempt `retry_after_on`: it replaces that one wait, uncapped, and nothing else.
    """

    max_attempts: int = 4
    base_delay: float = 0.2
    cap: float = 10.0
    jitter: Jitter = "none"
    retry_after: float | None = None
    retry_after_on: int = 1
    clients: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.max_attempts <= 50:
            problems.append(f"max_attempts must be 1..50, got {self.max_attempts}")
        if not self.base_delay > 0:
            problems.append(f"base_delay must be > 0 s, got {self.base_delay}")
        if not self.cap > 0:
            problems.append(f"cap must be > 0 s, got {self.cap}")
        if self.jitter not in JITTERS:
            problems.append(f"jitter must be one of {JITTERS}, got {self.jitter!r}")
        if self.retry_after is not None and not 0 <= self.retry_after < float("inf"):
            problems.append(f"retry_after must be >= 0 s and finite, got {self.retry_after}")
        if self.retry_after_on < 1:
            problems.append(f"retry_after_on must be >= 1, got {self.retry_after_on}")
        if not 1 <= self.clients <= MAX_CLIENTS:
            problems.append(f"clients must be 1..{MAX_CLIENTS}, got {self.clients}")
        if problems:
            raise ValueError("; ".join(problems))


#: The explorer's opening state: the seed's base delay and cap, but enough attempts for the
#: cap to bite (the 7th and 8th waits would be 12.8 s and 25.6 s), and a herd of 20 clients.
OPENING = Settings(max_attempts=9, clients=20)


@dataclass(frozen=True)
class Wait:
    """The wait after attempt `after_attempt` failed, before the next attempt starts.

    `low`..`high` is the range the strategy draws from (equal for no jitter); `uncapped` is
    the top of that range before the cap was applied, so `capped` says whether the cap cut it.
    `computed` is the strategy's value; `seconds` is what is slept (Retry-After may replace it).
    """

    after_attempt: int
    start: float
    seconds: float
    computed: float
    low: float
    high: float
    uncapped: float
    source: Source

    @property
    def capped(self) -> bool:
        return self.uncapped > self.high

    @property
    def end(self) -> float:
        return self.start + self.seconds


@dataclass(frozen=True)
class Schedule:
    """One client's attempts and waits when every attempt fails.

    N attempts have exactly N-1 waits: nobody waits after the last attempt, they give up.
    """

    client: int
    attempts: tuple[float, ...]
    waits: tuple[Wait, ...]

    @property
    def total_wait(self) -> float:
        return sum(w.seconds for w in self.waits)

    @property
    def retries(self) -> tuple[float, ...]:
        """When each retry (every attempt after the first) starts."""
        return self.attempts[1:]


def schedule(settings: Settings, client: int = 0) -> Schedule:
    """Client `client`'s schedule (0 is "client 1"). Seeded by (settings.seed, client)."""
    # A string seed is hashed with SHA-512 by `random`, the same in every process.
    rng = random.Random(f"backoff-explorer:{settings.seed}:{client}")
    base, cap = settings.base_delay, settings.cap
    now = 0.0
    attempts = [now]
    waits: list[Wait] = []
    previous = base  # decorrelated jitter grows from the previous wait
    for n in range(1, settings.max_attempts):
        exponential = base * 2.0 ** (n - 1)
        window = min(cap, exponential)
        if settings.jitter == "none":
            low, high, uncapped, computed = window, window, exponential, window
        elif settings.jitter == "full":
            low, high, uncapped = 0.0, window, exponential
            computed = rng.uniform(0.0, window)
        elif settings.jitter == "equal":
            low, high, uncapped = window / 2, window, exponential
            computed = window / 2 + rng.uniform(0.0, window / 2)
        else:
            low, high, uncapped = min(cap, base), min(cap, 3 * previous), 3 * previous
            computed = min(cap, rng.uniform(base, 3 * previous))
            previous = computed
        seconds = computed
        source: Source = "backoff"
        if settings.retry_after is not None and n == settings.retry_after_on:
            # The server's number wins as given. The strategy's draw above still happened,
            # so switching Retry-After on or off changes this wait and no other.
            seconds, source = settings.retry_after, "retry-after"
        waits.append(Wait(n, now, seconds, computed, low, high, uncapped, source))
        now += seconds
        attempts.append(now)
    return Schedule(client, tuple(attempts), tuple(waits))


def herd(settings: Settings) -> tuple[Schedule, ...]:
    """Every client's schedule; all clients fail together at time 0 (one outage hits all)."""
    return tuple(schedule(settings, c) for c in range(settings.clients))


#: The herd's crowding is measured as the most retries arriving within any window this long
#: (about one request's service time): 50 clients without jitter put all 50 in one window.
CROWD_WINDOW = 0.010


def crowd(schedules: Sequence[Schedule], window: float = CROWD_WINDOW) -> int:
    """The most retries, across all `schedules`, that start within any `window` seconds."""
    times = sorted(t for s in schedules for t in s.retries)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] > window + 1e-12:
            first += 1
        most = max(most, last - first + 1)
    return most


def _secs(seconds: float) -> str:
    return f"{seconds:.2f}" if 0 < seconds < 0.95 else f"{seconds:.1f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary(settings: Settings) -> str:
    """One line, e.g. ``4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s`` (client 1)."""
    one = schedule(settings)
    parts = [
        _plural(settings.max_attempts, "attempt"),
        _plural(len(one.waits), "sleep"),
        f"total wait {_secs(one.total_wait)} s",
        f"cap {settings.cap:.1f} s",
    ]
    capped = sum(w.capped and w.source == "backoff" for w in one.waits)
    if capped:
        parts.append(f"cap bites on {capped} of {len(one.waits)}")
    if settings.retry_after is not None:
        if settings.retry_after_on < settings.max_attempts:
            parts.append(
                f"Retry-After {_secs(settings.retry_after)} s after attempt "
                f"{settings.retry_after_on}"
            )
        else:
            parts.append(f"Retry-After after attempt {settings.retry_after_on}: never reached")
    if settings.jitter != "none":
        parts.append(f"{settings.jitter} jitter, seed {settings.seed}")
    if settings.clients > 1:
        peak = crowd(herd(settings))
        parts.append(
            f"{settings.clients} clients, up to {peak} retries within {CROWD_WINDOW * 1000:.0f} ms"
        )
    return " · ".join(parts)


def _bar_colour(wait: Wait) -> str:
    if wait.source == "retry-after":
        return _ORANGE
    return _PURPLE if wait.capped else _BLUE


def _draw_timeline(ax: Axes, one: Schedule, span: float) -> None:
    waits = one.waits
    if waits:
        ax.barh(
            [0] * len(waits),
            [w.seconds for w in waits],
            left=[w.start for w in waits],
            height=0.5,
            color=[_bar_colour(w) for w in waits],
            edgecolor="white",
            label="sleeps",
        )
    ax.plot(
        one.attempts,
        [0] * len(one.attempts),
        linestyle="none",
        marker="o",
        markersize=9,
        markerfacecolor="white",
        markeredgecolor="black",
        zorder=3,
        label="attempts",
    )
    last_labelled = -span
    for number, at in enumerate(one.attempts, start=1):
        # Early attempts crowd together; label one only where it has room.
        if at - last_labelled < 0.035 * span and number != len(one.attempts):
            continue
        last_labelled = at
        ax.annotate(f"#{number}", (at, 0), xytext=(0, 10), textcoords="offset points", ha="center")
    ax.set_ylim(-0.8, 0.9)
    ax.set_yticks([])
    ax.set_xlim(-0.02 * span, span * 1.03)
    ax.set_xlabel("time since the first attempt (s)")
    ax.set_title(
        f"Client 1, if every attempt fails: {_plural(len(one.attempts), 'attempt')} (circles), "
        f"{_plural(len(waits), 'sleep')} (bars), total wait {_secs(one.total_wait)} s",
        fontsize=10,
    )


def _draw_herd(ax: Axes, all_clients: Sequence[Schedule], span: float, settings: Settings) -> None:
    retries = np.array([t for s in all_clients for t in s.retries], dtype=float)
    bins = 80
    width = span / bins
    edges = np.linspace(0.0, span, bins + 1)
    counts, _ = np.histogram(retries, bins=edges) if retries.size else (np.zeros(bins), None)
    ax.bar(
        edges[:-1],
        counts,
        width=width,
        align="edge",
        color=_GREY,
        edgecolor="none",
        label="retries",
    )
    peak = int(counts.max()) if counts.size else 0
    ax.set_xlim(-0.02 * span, span * 1.03)
    ax.set_ylim(0, max(1, peak) * 1.2)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # retries come in whole numbers
    ax.set_ylabel(f"retries per {_secs(width)} s")
    ax.set_xlabel("time since the outage began (s)")
    ax.set_title(
        f"When the {retries.size} retries of {_plural(settings.clients, 'client')} reach the "
        f"server: up to {crowd(all_clients)} within {CROWD_WINDOW * 1000:.0f} ms",
        fontsize=10,
    )


def _draw_waits(ax: Axes, one: Schedule, settings: Settings) -> None:
    waits = one.waits
    xs = [w.after_attempt for w in waits]
    if settings.jitter != "none" and waits:
        ax.bar(
            xs,
            [w.high - w.low for w in waits],
            bottom=[w.low for w in waits],
            width=0.8,
            color="#dbe6f3",
            edgecolor="#9fb7d6",
            label="jitter range",
        )
    if waits:
        bars = ax.bar(
            xs,
            [w.seconds for w in waits],
            width=0.45,
            color=[_bar_colour(w) for w in waits],
            label="sleeps",
        )
        ax.bar_label(bars, labels=[_secs(w.seconds) for w in waits], padding=2, fontsize=8)
    ax.axhline(settings.cap, color=_RED, linestyle="--", linewidth=1.5, label="cap")
    top = max([settings.cap, *(w.seconds for w in waits), *(w.high for w in waits)])
    ax.set_ylim(0, top * 1.3)  # headroom for the legend
    ax.set_xlim(0.4, max(1, len(waits)) + 0.6)
    ax.set_xticks(xs if waits else [])
    ax.set_xlabel("sleep after attempt number")
    ax.set_ylabel("wait (s)")
    ax.set_title("Each wait before a retry, against the cap", fontsize=10)
    handles = [
        Patch(color=_BLUE, label="computed by the formula"),
        Patch(color=_PURPLE, label="cut by the cap"),
        Patch(color=_ORANGE, label="Retry-After (replaces it)"),
        Line2D([], [], color=_RED, linestyle="--", label=f"cap {settings.cap:.1f} s"),
    ]
    if settings.jitter != "none":
        handles.insert(0, Patch(facecolor="#dbe6f3", edgecolor="#9fb7d6", label="jitter range"))
    ax.legend(handles=handles, loc="best", fontsize=8)
    if not waits:
        ax.text(0.5, 0.5, "one attempt: nothing to wait for", transform=ax.transAxes, ha="center")


def draw(settings: Settings) -> Figure:
    """The explorer's figure for `settings`, built from scratch (no pyplot state)."""
    all_clients = herd(settings)
    one = all_clients[0]
    span = max((s.attempts[-1] for s in all_clients), default=0.0) or 1.0
    lines = _title_lines(summary(settings))
    fig = Figure(figsize=(9.5, 8.4))
    # Fixed margins, not a layout engine: constrained layout tripled the time of each redraw.
    timeline, herd_ax, waits = fig.subplots(
        3,
        1,
        gridspec_kw={
            "height_ratios": [1.0, 1.3, 1.5],
            "left": 0.08,
            "right": 0.98,
            # Each line of the title takes about 3.5% of the figure's height.
            "top": 0.955 - 0.035 * len(lines),
            "bottom": 0.06,
            "hspace": 0.5,
        },
    )
    timeline.set_label("timeline")
    herd_ax.set_label("herd")
    waits.set_label("waits")
    herd_ax.sharex(timeline)
    _draw_timeline(timeline, one, span)
    _draw_herd(herd_ax, all_clients, span, settings)
    _draw_waits(waits, one, settings)
    # The summary's first four parts always fit on one line; the rest go on a second.
    fig.suptitle("\n".join(lines), fontsize=11, fontweight="bold")
    return fig


def _title_lines(text: str, width: int = 80) -> list[str]:
    """The summary's first four parts on one line, the rest filled into lines of `width`."""
    parts = text.split(" · ")
    lines = [" · ".join(parts[:4])]
    for part in parts[4:]:
        if len(lines) > 1 and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return lines


def png(fig: Figure, dpi: int = 80) -> bytes:
    """`fig` as PNG bytes (Agg), without the timestamp-free but version-stamped metadata."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


class Snapshot:
    """A static rendering for stored outputs: shows as a PNG, reads as the summary line."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.figure = draw(settings)

    def _repr_png_(self) -> bytes:
        return png(self.figure)

    def __repr__(self) -> str:
        return f"backoff explorer: {summary(self.settings)}"


def snapshot(**settings: Any) -> Snapshot:
    """The explorer's picture for these settings (defaults: the seed's policy), no widgets."""
    return Snapshot(Settings(**settings))


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
        self.figure = draw(settings)
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
        data["image/png"] = base64.b64encode(png(self.figure)).decode("ascii")
        return data


_FIELD_NAMES = tuple(f.name for f in fields(Settings))


def explore(**initial: Any) -> BackoffExplorer:
    """The panel, opening on `OPENING` with any of `Settings`' fields overridden."""
    return BackoffExplorer(replace(OPENING, **initial))
