"""The replay explorer's picture, drawn headless from an `Outcome`: read the figure back.

Each launch's cell in the store after the replay says what `launch_states` says, told by its
label and hatch as well as its fill; the difference panel's bars are the outcome's numbers; the
line a screen reader reads (`describe`) states those numbers; the same outcome draws the same
PNG. The outcomes are the model's grid (`test_replay_model.GRID`), run once per process.
"""

from __future__ import annotations

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from etl import replay
from tests.unit.workbook.teaching.test_replay_model import GRID, STEPS, grid_id, outcome_of
from workbook.teaching.backoff_figure import png
from workbook.teaching.replay_figure import describe, draw, launch_states
from workbook.teaching.replay_model import BY_NAME, Outcome

#: A combination of every kind: doubled, lost, stale, calls repeated and lost, converged,
#: recognised, and each non-crash disturbance.
SHOWN = [
    ("naive", "crash", 2),
    ("naive", "stale", None),
    ("checkpoint-first", "crash", 3),
    ("checkpoint-last-upsert", "stale", None),
    ("compare-and-set", "duplicate", None),
    ("outbox", "crash", 9),
    ("outbox", "poison", None),
]


def axis(fig: Figure, title: str) -> Axes:
    """The axes titled `title` (or, for the row of steps, whose left title starts with it)."""
    (found,) = [
        ax
        for ax in fig.axes
        if ax.get_title() == title or (title and ax.get_title(loc="left").startswith(title))
    ]
    return found


def cells(ax: Axes) -> list[tuple[str, str, str]]:
    """Each launch's cell in a store grid, in feed order: (label, hatch, edge style)."""
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    labels = [t.get_text() for t in ax.texts]
    return [
        (label, box.get_hatch() or "", str(box.get_linestyle()))
        for label, box in zip(labels, boxes, strict=True)
    ]


def difference(fig: Figure) -> dict[str, float]:
    """The difference panel's bars by their label: bar y positions are the tick positions."""
    ax = axis(fig, "the difference")
    by_y = {
        round(tick): label.get_text()
        for tick, label in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
    }
    bars = [p for container in ax.containers for p in container]
    return {by_y[round(bar.get_y() + bar.get_height() / 2)]: bar.get_width() for bar in bars}


# ── launch_states ──────────────────────────────────────────────────────────────────────


@pytest.mark.slow  # the whole grid (make check runs it)
@pytest.mark.parametrize(("design", "disturbance", "step"), list(GRID), ids=map(grid_id, GRID))
def test_the_launch_states_add_up_to_the_outcome(
    design: str, disturbance: str, step: int | None
) -> None:
    outcome = outcome_of(design, disturbance, step)
    states = launch_states(outcome)
    assert len(states) == len(replay.LAUNCHES) == 20
    lost = sum(1 for state, _ in states if state == "lost")
    doubled = sum(int(label[1:]) - 1 for state, label in states if state == "doubled")
    old = {replay.LAUNCHES[n].id for n, (state, _) in enumerate(states) if state == "stale"}
    assert old <= set(outcome.stale_ids)
    stale_shown_doubled = [i for i in outcome.stale_ids if outcome.counts[i] > 1]
    assert (lost, doubled, len(old) + len(stale_shown_doubled)) == (
        outcome.lost,
        outcome.doubled,
        outcome.stale,
    ), f"{design} {disturbance} {step}: {states}"
    assert sum(outcome.counts.values()) == outcome.rows


def test_each_state_has_its_own_label() -> None:
    naive = launch_states(outcome_of("naive", "crash", 2))
    assert naive[8:10] == [("doubled", "×2"), ("doubled", "×2")]  # page 3's first two
    assert naive[:8] + naive[10:] == [("once", "1")] * 18
    first = launch_states(outcome_of("checkpoint-first", "crash", 3))
    assert first[8:12] == [("once", "1"), ("once", "1"), ("lost", "lost"), ("lost", "lost")]
    revised = launch_states(outcome_of("checkpoint-last-upsert", "stale", None))
    assert revised[5] == ("stale", "old")  # page 2's second launch, put back at version 1
    assert [s for n, s in enumerate(revised) if n != 5] == [("once", "1")] * 19
    poisoned = launch_states(outcome_of("outbox", "poison", None))
    assert poisoned == [("once", "1")] * 8 + [("lost", "lost")] * 12


# ── describe ───────────────────────────────────────────────────────────────────────────


def test_the_line_under_the_figure_reads_the_whole_picture() -> None:
    assert describe(outcome_of("naive", "crash", 2)) == (
        "§1 the naive loop: insert, checkpoint last, a crash after step 2 of page 3"
        " (insert #2), then a replay: left, the store's 20 launches by page, 22 rows for 20"
        " launches: 0 lost, 2 doubled, 0 stale; indexer calls made twice 0, never made 0;"
        " middle, one clean run, every launch stored once; right, those counts as bars; under"
        " them, the page's steps in a row."
    )
    assert describe(outcome_of("outbox", "crash", 9)).endswith(
        "indexer calls made twice 0, never made 0, recognised by their job ids 4; middle, one"
        " clean run, every launch stored once; right, those counts as bars; under them, the"
        " page's steps in a row."
    )
    assert describe(outcome_of("compare-and-set", "duplicate", None)).startswith(
        "§7 the same, plus compare-and-set, page 3 delivered twice, then a replay:"
    )


@pytest.mark.slow  # the whole grid (make check runs it)
@pytest.mark.parametrize(("design", "disturbance", "step"), list(GRID), ids=map(grid_id, GRID))
def test_the_line_states_the_outcomes_numbers(
    design: str, disturbance: str, step: int | None
) -> None:
    outcome = outcome_of(design, disturbance, step)
    line = describe(outcome)
    numbers = (
        f"{outcome.rows} rows for 20 launches: {outcome.lost} lost, {outcome.doubled} doubled,"
        f" {outcome.stale} stale; indexer calls made twice {outcome.calls_repeated}, never made"
        f" {outcome.calls_lost}"
    )
    assert numbers in line
    recognised = f", recognised by their job ids {outcome.recognised};"
    assert (recognised in line) == bool(outcome.recognised)
    assert line.startswith(BY_NAME[design].title)
    if step is not None:
        assert f"a crash after step {step} of page 3 ({STEPS[design][step - 1]})" in line
    assert "\n" not in line and not line.startswith("Figure:")


# ── draw ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("design", "disturbance", "step"), SHOWN, ids=map(grid_id, SHOWN))
def test_the_figure_shows_the_outcome(design: str, disturbance: str, step: int | None) -> None:
    outcome = outcome_of(design, disturbance, step)
    fig = draw(outcome)
    assert isinstance(fig, Figure)
    hatch = {"once": "", "doubled": "xx", "stale": "//", "lost": ""}
    edge = {"once": "solid", "doubled": "solid", "stale": "solid", "lost": "dashed"}
    assert cells(axis(fig, "after the disturbance and a replay")) == [
        (label, hatch[state], edge[state]) for state, label in launch_states(outcome)
    ]
    assert cells(axis(fig, "one clean run")) == [("1", "", "solid")] * 20
    assert difference(fig) == {
        "rows lost": outcome.lost,
        "rows doubled": outcome.doubled,
        "rows stale": outcome.stale,
        "calls made twice": outcome.calls_repeated,
        "calls never made": outcome.calls_lost,
        "calls recognised": outcome.recognised,
    }
    steps = axis(fig, BY_NAME[design].title)
    labels = [
        t.get_text().replace("-\n", "-").replace("\n", " ")
        for t in steps.texts
        if t.get_text() != "✕ crash"
    ]
    assert labels == STEPS[design]
    crash_lines = [float(line.get_xdata()[0]) for line in steps.lines]  # type: ignore[arg-type, index]
    assert crash_lines == ([] if step is None else [step])


def test_a_crash_is_marked_after_its_step_and_other_disturbances_are_named() -> None:
    crashed = axis(draw(outcome_of("one-transaction", "crash", 6)), "§6")
    assert crashed.get_title(loc="left").endswith("page 3's steps: the process dies after step 6")
    assert "✕ crash" in [t.get_text() for t in crashed.texts]
    stale = axis(draw(outcome_of("one-transaction", "stale", None)), "§6")
    assert stale.get_title(loc="left").endswith(
        "each page's steps; the disturbance: a stale worker from offset=4"
    )
    assert "✕ crash" not in [t.get_text() for t in stale.texts]


@pytest.mark.slow  # two real PNGs: 1 s
def test_drawing_the_same_outcome_twice_gives_the_same_png() -> None:
    outcome: Outcome = outcome_of("naive", "crash", 2)
    first, again = png(draw(outcome)), png(draw(outcome))
    assert first == again and first.startswith(b"\x89PNG")
    assert png(draw(outcome_of("naive", "crash", 3))) != first
