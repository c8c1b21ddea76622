"""The backoff explorer's picture: a matplotlib `Figure` of a `Settings`' schedules.

`draw(settings)` builds the panels from scratch (no pyplot state): a timeline of client 1,
when the herd's retries reach the server (a rolling count over the crowd window, on a scale
whose top is the whole herd, so pictures of one herd compare), and the wait before each retry
against the cap.
`snapshot(**settings)` is the static picture for stored outputs; `png` the one way a figure
of the workbook becomes PNG bytes (no version-stamped metadata, so the bytes repeat).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from workbook import palette
from workbook.teaching.backoff_schedule import (
    CROWD_WINDOW,
    Schedule,
    Settings,
    Wait,
    herd,
    plural,
    rolling,
    seconds_text,
    summary,
)

_BLUE, _PURPLE, _ORANGE, _RED, _GREY = (
    palette.BLUE,
    palette.REDDISH_PURPLE,
    palette.ORANGE,
    palette.VERMILLION,
    palette.DARK_GREY,
)
_RANGE, _RANGE_EDGE = palette.tint(palette.BLUE, 0.85), palette.tint(palette.BLUE, 0.55)
#: Told by pattern as well as colour: a wait cut to the cap is hatched one way, Retry-After's
#: the other.
_HATCHES = {"cut": "//", "retry-after": "..", "computed": ""}
#: Attempt labels closer than this share of the time axis would overlap ("#10" is about 3%).
_LABEL_GAP = 0.06
#: How far a shared label's bracket reaches past its outer attempts: a marker's radius.
_BRACKET_PAD = 0.01
#: Room on the right of every panel for the legend, so it never covers a bar.
_RIGHT = 0.78


def _bar_colour(wait: Wait) -> str:
    if wait.source == "retry-after":
        return _ORANGE
    return _PURPLE if wait.cut else _BLUE


def _bar_hatch(wait: Wait) -> str:
    return _HATCHES[
        "retry-after" if wait.source == "retry-after" else "cut" if wait.cut else "computed"
    ]


def attempt_groups(attempts: Sequence[float], span: float) -> list[tuple[int, int]]:
    """Attempts (0-based, first and last of each run) that share one label.

    Consecutive attempts closer than `_LABEL_GAP` of `span` would have overlapping labels, and
    near t = 0 their markers overlap too: such a run gets one label naming its first and last
    attempt (#1 to #4, joined by an en dash) over a bracket that spans it, so a reader can
    count the attempts hidden under one blur of circles. An attempt with room gets its own
    ``#n``. Every attempt is in exactly one group, in order.
    """
    groups: list[tuple[int, int]] = []
    for index, at in enumerate(attempts):
        if groups and at - attempts[groups[-1][1]] < _LABEL_GAP * span:
            groups[-1] = (groups[-1][0], index)
        else:
            groups.append((index, index))
    return groups


def _label_attempts(ax: Axes, attempts: Sequence[float], span: float) -> None:
    # Labels sit above the bar; a bracket under a shared label marks the attempts it names.
    pad = _BRACKET_PAD * span
    for first, last in attempt_groups(attempts, span):
        start, end = attempts[first], attempts[last]
        if first == last:
            text = f"#{first + 1}"
        else:
            text = f"#{first + 1}–#{last + 1}"
            ax.plot(
                [start - pad, start - pad, end + pad, end + pad],
                [0.3, 0.38, 0.38, 0.3],
                color=palette.BLACK,
                linewidth=1.0,
                label="bracket",
            )
        # A shared label at t = 0 starts at its bracket, so it stays inside the axes.
        left = first == 0 and first != last
        x = start - pad if left else (start + end) / 2
        ax.text(x, 0.42, text, ha="left" if left else "center", va="bottom", label="attempt")


def _sleep_handles(waits: Sequence[Wait]) -> list[Artist]:
    """Legend entries for the kinds of sleep these waits include, and no others."""
    handles: list[Artist] = []
    if any(w.source == "backoff" and not w.cut for w in waits):
        handles.append(Patch(color=_BLUE, label="computed wait"))
    if any(w.cut for w in waits):
        handles.append(Patch(facecolor=_PURPLE, hatch=_HATCHES["cut"], label="cut to the cap"))
    if any(w.source == "retry-after" for w in waits):
        handles.append(
            Patch(
                facecolor=_ORANGE, hatch=_HATCHES["retry-after"], label="Retry-After\n(replaces it)"
            )
        )
    return handles


def _draw_timeline(ax: Axes, one: Schedule, span: float) -> None:
    waits = one.waits
    if waits:
        ax.barh(
            [0] * len(waits),
            [w.seconds for w in waits],
            left=[w.start for w in waits],
            height=0.5,
            color=[_bar_colour(w) for w in waits],
            hatch=[_bar_hatch(w) for w in waits],
            edgecolor=palette.WHITE,
            label="sleeps",
        )
    ax.plot(
        one.attempts,
        [0] * len(one.attempts),
        linestyle="none",
        marker="o",
        markersize=9,
        markerfacecolor=palette.WHITE,
        markeredgecolor=palette.BLACK,
        zorder=3,
        label="attempts",
    )
    _label_attempts(ax, one.attempts, span)
    ax.set_ylim(-0.6, 0.95)
    ax.set_yticks([])
    ax.set_xlim(-0.02 * span, span * 1.03)
    ax.set_xlabel("time since the first attempt (s)")
    ax.set_title("Client 1, if every attempt fails: attempts (circles), sleeps (bars)", fontsize=10)
    ax.legend(
        handles=_sleep_handles(waits), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8
    )


def _draw_herd(ax: Axes, all_clients: Sequence[Schedule], span: float, settings: Settings) -> None:
    # A rolling count over the crowd window, not a histogram: its peak is the summary's
    # "up to N retries within 10 ms" by construction, whatever the span of the picture.
    edges, counts = rolling(all_clients)
    window = f"{CROWD_WINDOW * 1000:.0f}"
    if counts:
        ax.stairs(counts, edges, baseline=0, color=_GREY, linewidth=1.2, label="retries")
    # One scale for every picture of a herd: all its clients at once is the top.
    ax.axhline(settings.clients, color=_RED, linestyle=":", linewidth=1.2, label="herd")
    handles: list[Artist] = [
        Line2D([], [], color=_GREY, linewidth=1.2, label=f"retries in the last\n{window} ms"),
        Line2D([], [], color=_RED, linestyle=":", label=f"all {settings.clients} clients"),
    ]
    if counts:
        peak = max(counts)
        at = edges[counts.index(peak)]
        (marker,) = ax.plot(
            [at], [peak], marker="v", color=palette.BLACK, markersize=6, linestyle="none", zorder=3
        )
        marker.set_label(f"busiest {window} ms:\n{peak} retries")
        handles.append(marker)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_xlim(-0.02 * span, span * 1.03)
    ax.set_ylim(0, max(settings.clients, max(counts, default=0)) * 1.22)
    # Retries come in whole numbers.
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    ax.set_ylabel(f"retries in {window} ms")
    ax.set_xlabel("time since the outage began (s)")
    ax.set_title(
        f"The herd: retries of {plural(settings.clients, 'client')} reaching the server "
        f"within the last {window} ms",
        fontsize=10,
    )


def _draw_waits(ax: Axes, one: Schedule, settings: Settings) -> None:
    waits = one.waits
    xs = [w.after_attempt for w in waits]
    jittered = settings.jitter != "none" and bool(waits)
    if jittered:
        ax.bar(
            xs,
            [w.high - w.low for w in waits],
            bottom=[w.low for w in waits],
            width=0.8,
            color=_RANGE,
            edgecolor=[_PURPLE if w.capped else _RANGE_EDGE for w in waits],
            linewidth=[1.6 if w.capped else 0.8 for w in waits],
            label="jitter range",
        )
    if waits:
        bars = ax.bar(
            xs,
            [w.seconds for w in waits],
            width=0.45,
            color=[_bar_colour(w) for w in waits],
            hatch=[_bar_hatch(w) for w in waits],
            edgecolor=palette.WHITE,
            label="sleeps",
        )
        ax.bar_label(bars, labels=[seconds_text(w.seconds) for w in waits], padding=2, fontsize=8)
    ax.axhline(settings.cap, color=_RED, linestyle="--", linewidth=1.5, label="cap")
    top = max([settings.cap, *(w.seconds for w in waits), *(w.high for w in waits)])
    ax.set_ylim(0, top * 1.15)
    ax.set_xlim(0.4, max(1, len(waits)) + 0.6)
    ax.set_xticks(xs if waits else [])
    ax.set_xlabel("sleep after attempt number")
    ax.set_ylabel("wait (s)")
    ax.set_title("Each wait before a retry, against the cap", fontsize=10)
    # Only what this picture shows, outside the axes so that no entry covers a bar.
    handles: list[Artist] = []
    if jittered:
        handles.append(Patch(facecolor=_RANGE, edgecolor=_RANGE_EDGE, label="range drawn from"))
        if any(w.capped for w in waits):
            handles.append(
                Patch(facecolor=_RANGE, edgecolor=_PURPLE, linewidth=1.6, label="range cut by cap")
            )
    handles += _sleep_handles(waits)
    handles.append(Line2D([], [], color=_RED, linestyle="--", label=f"cap {settings.cap:.1f} s"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    if not waits:
        ax.text(0.5, 0.5, "one attempt: nothing to wait for", transform=ax.transAxes, ha="center")


def draw(settings: Settings, *, title: bool = True) -> Figure:
    """The explorer's figure for `settings`, built from scratch (no pyplot state).

    Three panels for a herd (client 1's timeline, the herd at the server, client 1's waits);
    one client has no herd to show, so two. `title` puts the summary line on top: the live
    panel says it once in its own summary line instead.
    """
    all_clients = herd(settings)
    one = all_clients[0]
    span = max((s.attempts[-1] for s in all_clients), default=0.0) or 1.0
    lines = _title_lines(summary(settings)) if title else []
    many = settings.clients > 1
    height = 8.4 if many else 5.6
    fig = Figure(figsize=(9.5, height))
    # Fixed margins, not a layout engine: constrained layout tripled the time of each redraw.
    axes = fig.subplots(
        3 if many else 2,
        1,
        gridspec_kw={
            "height_ratios": [1.0, 1.3, 1.5] if many else [1.0, 1.5],
            "left": 0.08,
            "right": _RIGHT,
            # Each line of the title takes about 0.3 inches.
            "top": 1 - (0.35 + 0.3 * len(lines)) / height,
            "bottom": 0.5 / height,
            "hspace": 0.55 if many else 0.6,
        },
    )
    timeline, waits = axes[0], axes[-1]
    timeline.set_label("timeline")
    waits.set_label("waits")
    _draw_timeline(timeline, one, span)
    if many:
        herd_ax = axes[1]
        herd_ax.set_label("herd")
        herd_ax.sharex(timeline)
        _draw_herd(herd_ax, all_clients, span, settings)
    _draw_waits(waits, one, settings)
    if lines:
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
