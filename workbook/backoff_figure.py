"""The backoff explorer's picture: a matplotlib `Figure` of a `Settings`' schedules.

`draw(settings)` builds three panels from scratch (no pyplot state): a timeline of client 1,
when the herd's retries reach the server, and the wait before each retry against the cap.
`snapshot(**settings)` is the static picture for stored outputs; `png` the one way a figure
of the workbook becomes PNG bytes (no version-stamped metadata, so the bytes repeat).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from workbook.backoff_schedule import (
    CROWD_WINDOW,
    Schedule,
    Settings,
    Wait,
    crowd,
    herd,
    plural,
    seconds_text,
    summary,
)

_BLUE, _PURPLE, _ORANGE, _RED, _GREY = "#1f77b4", "#7b4fa8", "#ff7f0e", "#d62728", "#9a9a9a"


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
        f"Client 1, if every attempt fails: {plural(len(one.attempts), 'attempt')} (circles), "
        f"{plural(len(waits), 'sleep')} (bars), total wait {seconds_text(one.total_wait)} s",
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
    ax.set_ylabel(f"retries per {seconds_text(width)} s")
    ax.set_xlabel("time since the outage began (s)")
    ax.set_title(
        f"When the {retries.size} retries of {plural(settings.clients, 'client')} reach the "
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
        ax.bar_label(bars, labels=[seconds_text(w.seconds) for w in waits], padding=2, fontsize=8)
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
