"""The replay explorer's picture: one combination's `Outcome`, drawn, and said in words.

Side by side: the store after the disturbance and a replay, one clean run's, and the
difference. Under them, the steps of the page the disturbance hits, in a row, with the crash
marked after its step (or the disturbance named), right above the panel's crash-step slider. A
store is a grid of the feed's 20 launches, a column per page; each launch is told by fill,
hatch *and* its label: ``1`` stored once, ``×2`` doubled, ``lost``, ``old`` (a stale
revision). Drawing the same outcome twice gives the same picture.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from etl import replay
from workbook import palette
from workbook.teaching.replay_model import (
    BY_NAME,
    CRASH_PAGE,
    DISTURBANCES,
    POISON_AT,
    REVISED_AT,
    Outcome,
)

#: Per launch state: fill, hatch, edge style, label colour.
_LOOK: dict[str, tuple[str, str, str, str]] = {
    "once": (palette.tint(palette.BLUE, 0.55), "", "solid", palette.BLACK),
    "doubled": (palette.tint(palette.VERMILLION, 0.45), "xx", "solid", palette.BLACK),
    "lost": (palette.WHITE, "", "dashed", palette.DARK_GREY),
    "stale": (palette.tint(palette.ORANGE, 0.3), "//", "solid", palette.BLACK),
}


def launch_states(outcome: Outcome) -> list[tuple[str, str]]:
    """Per launch of the feed, in feed order: its state and its label in the grid."""
    states: list[tuple[str, str]] = []
    counts, old = outcome.counts, set(outcome.stale_ids)
    for launch in replay.LAUNCHES:
        count = counts.get(launch.id, 0)
        if count == 0:
            states.append(("lost", "lost"))
        elif count > 1:
            states.append(("doubled", f"×{count}"))
        elif launch.id in old:
            states.append(("stale", "old"))
        else:
            states.append(("once", "1"))
    return states


def _grid(ax: Axes, states: list[tuple[str, str]], title: str) -> None:
    size = replay.PAGE_SIZE
    for index, (state, label) in enumerate(states):
        page, row = divmod(index, size)
        fill, hatch, edge, ink = _LOOK[state]
        ax.add_patch(
            Rectangle(
                (page + 0.06, size - row - 0.94),
                0.88,
                0.88,
                facecolor=fill,
                hatch=hatch,
                edgecolor=palette.DARK_GREY,
                linestyle=edge,
                linewidth=1.0,
            )
        )
        # A label over a hatch sits on a white patch of its own, so it reads at any size.
        ground = {"boxstyle": "round,pad=0.2", "facecolor": palette.WHITE, "edgecolor": "none"}
        ax.text(
            page + 0.5,
            size - row - 0.5,
            label,
            ha="center",
            va="center",
            color=ink,
            fontsize=8,
            bbox=ground if hatch else None,
        )
    pages = len(states) // size
    ax.set_xlim(0, pages)
    ax.set_ylim(0, size)
    ax.set_xticks([page + 0.5 for page in range(pages)], [f"p{page + 1}" for page in range(pages)])
    ax.set_yticks([])
    ax.set_aspect("equal")
    ax.tick_params(length=0, labelsize=8)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title, fontsize=9)


def _steps(ax: Axes, outcome: Outcome) -> None:
    design = BY_NAME[outcome.design]
    labels = design.step_labels()
    for index, label in enumerate(labels):
        crossed = outcome.crash_after is not None and index < outcome.crash_after
        ax.add_patch(
            Rectangle(
                (index + 0.05, 0.15),
                0.9,
                0.7,
                facecolor=palette.tint(palette.SKY_BLUE, 0.5) if crossed else palette.WHITE,
                edgecolor=palette.DARK_GREY,
            )
        )
        ax.text(
            index + 0.5,
            0.5,
            label.replace(" ", "\n", 1) if " " in label else label.replace("-and-", "-and-\n"),
            ha="center",
            va="center",
            fontsize=7,
        )
    if outcome.crash_after is not None:
        at = outcome.crash_after
        ax.axvline(at, color=palette.VERMILLION, linestyle="--", linewidth=2)
        ax.text(
            at + 0.05, 1.0, "✕ crash", color=palette.VERMILLION, ha="left", va="bottom", fontsize=8
        )
        where = f"page {CRASH_PAGE}'s steps: the process dies after step {at}"
    else:
        where = f"each page's steps; the disturbance: {DISTURBANCES[outcome.disturbance]}"
    ax.set_xlim(0, max(len(labels), 6))
    ax.set_ylim(0, 1.3)
    ax.axis("off")
    ax.set_title(f"{design.title}: {where}", fontsize=9, loc="left")


def _difference(ax: Axes, outcome: Outcome) -> None:
    rows = [
        ("rows lost", outcome.lost, "", palette.DARK_GREY),
        ("rows doubled", outcome.doubled, "xx", palette.VERMILLION),
        ("rows stale", outcome.stale, "//", palette.ORANGE),
        ("calls made twice", outcome.calls_repeated, "..", palette.REDDISH_PURPLE),
        ("calls never made", outcome.calls_lost, "\\\\", palette.GREY),
        ("calls recognised", outcome.recognised, "", palette.BLUISH_GREEN),
    ]
    for y, (_label, count, hatch, colour) in enumerate(reversed(rows)):
        ax.barh(y, count, color=palette.tint(colour, 0.35), hatch=hatch, edgecolor=colour)
        ax.text(count + 0.3, y, str(count), va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [label for label, *_ in reversed(rows)], fontsize=8)
    ax.set_xlim(0, 20)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title("the difference", fontsize=9)


def draw(outcome: Outcome) -> Figure:
    """The disturbed store, a clean run's and the difference; the page's steps under them."""
    # Fixed positions, not a layout engine: the panel redraws on every change, and a layout
    # engine would be most of its time.
    # The steps go at the bottom, right above the panel's crash-step slider.
    fig = Figure(figsize=(10, 4.4))
    after = fig.add_axes((0.02, 0.4, 0.28, 0.52))
    clean = fig.add_axes((0.33, 0.4, 0.28, 0.52))
    difference = fig.add_axes((0.77, 0.44, 0.2, 0.48))
    _steps(fig.add_axes((0.01, 0.02, 0.98, 0.2)), outcome)
    _grid(after, launch_states(outcome), "after the disturbance and a replay")
    once = [("once", "1")] * len(replay.LAUNCHES)
    _grid(clean, once, "one clean run")
    _difference(difference, outcome)
    return fig


def describe(outcome: Outcome) -> str:
    """What the picture shows, as a screen reader would read it (no "Figure:" prefix)."""
    design = BY_NAME[outcome.design]
    if outcome.crash_after is not None:
        label = design.step_labels()[outcome.crash_after - 1]
        what = f"a crash after step {outcome.crash_after} of page {CRASH_PAGE} ({label})"
    else:
        what = DISTURBANCES[outcome.disturbance]
    counts = (
        f"{outcome.rows} rows for 20 launches: {outcome.lost} lost, {outcome.doubled} doubled,"
        f" {outcome.stale} stale; indexer calls made twice {outcome.calls_repeated}, never made"
        f" {outcome.calls_lost}"
    )
    if outcome.recognised:
        counts += f", recognised by their job ids {outcome.recognised}"
    return (
        f"{design.title}, {what}, then a replay: left, the store's 20 launches by page, {counts};"
        " middle, one clean run, every launch stored once; right, those counts as bars; under"
        " them, the page's steps in a row."
    )


__all__ = ["POISON_AT", "REVISED_AT", "describe", "draw", "launch_states"]
