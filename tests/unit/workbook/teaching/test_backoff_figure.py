"""The backoff explorer's picture, drawn headless from a `Settings`: read the figure's data.

Each panel shows what the formula ``min(base * 2**(attempt-1), cap)`` (and each jitter's range)
says it must; the readers here are shared with the live panel's tests (`test_explorer`).
"""

from __future__ import annotations

import itertools

import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.patches import StepPatch
from matplotlib.text import Text

from workbook import palette
from workbook.teaching.backoff_figure import attempt_groups, draw, png, snapshot
from workbook.teaching.backoff_schedule import Settings, crowd, herd, schedule


def axis(fig: Figure, label: str) -> Axes:
    (found,) = [ax for ax in fig.axes if ax.get_label() == label]
    return found


def bars(ax: Axes, label: str) -> BarContainer | None:
    found = [c for c in ax.containers if isinstance(c, BarContainer) and c.get_label() == label]
    assert len(found) <= 1
    return found[0] if found else None


def wait_heights(fig: Figure) -> list[float]:
    """The height of each bar in the 'wait before each retry' panel, in order."""
    container = bars(axis(fig, "waits"), "sleeps")
    return [] if container is None else [p.get_height() for p in container]


def timeline_sleeps(fig: Figure) -> list[tuple[float, float]]:
    """(start, length) of each sleep bar on client 1's timeline."""
    container = bars(axis(fig, "timeline"), "sleeps")
    return [] if container is None else [(p.get_x(), p.get_width()) for p in container]


def attempt_times(fig: Figure) -> list[float]:
    (line,) = [ln for ln in axis(fig, "timeline").lines if ln.get_label() == "attempts"]
    return [float(x) for x in line.get_xdata()]


def herd_curve(fig: Figure) -> StepPatch:
    (curve,) = [p for p in axis(fig, "herd").patches if p.get_label() == "retries"]
    assert isinstance(curve, StepPatch)
    return curve


def herd_counts(fig: Figure) -> list[float]:
    """The herd panel's rolling count: retries within the last 10 ms, step by step."""
    values, _edges, _baseline = herd_curve(fig).get_data()
    return [float(v) for v in values]


def formula(base: float, cap: float, attempts: int) -> list[float]:
    return [min(base * 2 ** (n - 1), cap) for n in range(1, attempts)]


# --- the picture of a Settings ----------------------------------------------------------------


@pytest.mark.parametrize("attempts", [1, 2, 7, 12])
def test_n_attempts_give_n_minus_one_sleeps(attempts: int) -> None:
    fig = draw(Settings(max_attempts=attempts))
    assert len(wait_heights(fig)) == attempts - 1
    assert len(timeline_sleeps(fig)) == attempts - 1
    assert len(attempt_times(fig)) == attempts


def test_the_seed_default_never_reaches_its_cap() -> None:
    shot = snapshot()
    assert max(wait_heights(shot.figure)) < 10.0
    assert repr(shot) == "backoff explorer: 4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s"


def test_full_jitter_stays_within_its_bounds() -> None:
    for seed in range(8):
        fig = draw(Settings(max_attempts=12, cap=5.0, jitter="full", seed=seed))
        for got, top in zip(wait_heights(fig), formula(0.2, 5.0, 12), strict=True):
            assert 0.0 <= got <= top


def test_equal_jitter_keeps_at_least_half() -> None:
    for seed in range(8):
        fig = draw(Settings(max_attempts=12, cap=5.0, jitter="equal", seed=seed))
        for got, top in zip(wait_heights(fig), formula(0.2, 5.0, 12), strict=True):
            assert top / 2 <= got <= top


def test_decorrelated_jitter_grows_from_the_previous_wait() -> None:
    for seed in range(8):
        fig = draw(Settings(max_attempts=12, cap=5.0, jitter="decorrelated", seed=seed))
        previous = 0.2
        for got in wait_heights(fig):
            assert 0.2 <= got <= min(5.0, 3 * previous)
            previous = got


def test_the_herd_panel_peaks_at_the_summary_count() -> None:
    # The rolling count and the summary's crowd are one mechanism: their maxima agree.
    for jitter in ("none", "full", "equal", "decorrelated"):
        settings = Settings(max_attempts=9, clients=40, jitter=jitter, seed=4)
        fig = draw(settings)
        assert max(herd_counts(fig)) == crowd(herd(settings))


def test_every_picture_of_a_herd_shares_one_scale() -> None:
    # The y-axis tops at the herd size, jitter or not, so a spread herd looks smaller.
    tops = {
        jitter: axis(draw(Settings(max_attempts=9, clients=20, jitter=jitter)), "herd").get_ylim()[
            1
        ]
        for jitter in ("none", "full", "decorrelated")
    }
    assert len(set(tops.values())) == 1
    assert tops["none"] >= 20


def _label_boxes(fig: Figure) -> list[tuple[str, float, float]]:
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    found = []
    for child in axis(fig, "timeline").get_children():
        if isinstance(child, Text) and child.get_label() == "attempt":
            box = child.get_window_extent(renderer)
            found.append((child.get_text(), box.x0, box.x1))
    return sorted(found, key=lambda b: b[1])


@pytest.mark.parametrize(
    "settings",
    [
        Settings(max_attempts=9),
        Settings(max_attempts=12),
        Settings(max_attempts=9, clients=20, jitter="full"),
        Settings(max_attempts=12, clients=50, jitter="equal", seed=3),
        Settings(max_attempts=6, clients=20, jitter="full", retry_after=5.0, retry_after_on=2),
        Settings(max_attempts=12, base_delay=0.05, cap=60.0),
        Settings(max_attempts=12, base_delay=0.05, cap=0.5),
        Settings(max_attempts=12, clients=20, jitter="decorrelated", seed=7),
    ],
)
def test_attempt_labels_never_overlap(settings: Settings) -> None:
    boxes = _label_boxes(draw(settings))
    assert boxes[0][0].startswith("#1")
    assert boxes[-1][0].endswith(f"#{settings.max_attempts}")
    for (left, _, left_end), (right, right_start, _) in itertools.pairwise(boxes):
        assert left_end <= right_start, f"{left} overlaps {right}"


def _wait_colours(fig: Figure) -> list[str]:
    container = bars(axis(fig, "waits"), "sleeps")
    assert container is not None
    return [to_hex(p.get_facecolor()) for p in container]


def test_a_jittered_wait_below_the_cap_is_not_cut_by_it() -> None:
    settings = Settings(max_attempts=9, jitter="full")
    fig = draw(settings)
    purple = to_hex(palette.REDDISH_PURPLE)
    for wait, colour in zip(schedule(settings).waits, _wait_colours(fig), strict=True):
        assert wait.seconds < settings.cap
        assert colour != purple
    # The range it was drawn from was cut, and the picture says so on the range's box.
    ranges = bars(axis(fig, "waits"), "jitter range")
    assert ranges is not None
    assert [to_hex(p.get_edgecolor()) == purple for p in ranges] == [False] * 6 + [True] * 2


def test_only_waits_equal_to_the_cap_are_coloured_cut() -> None:
    purple = to_hex(palette.REDDISH_PURPLE)
    for jitter in ("none", "decorrelated"):
        settings = Settings(max_attempts=12, jitter=jitter, seed=5)
        fig = draw(settings)
        waits = schedule(settings).waits
        cut = [c == purple for c in _wait_colours(fig)]
        assert cut == [w.seconds == settings.cap for w in waits]
        assert any(cut)
        # Told by pattern as well as colour: the cut ones, and only they, are hatched.
        container = bars(axis(fig, "waits"), "sleeps")
        assert container is not None
        assert [p.get_hatch() == "//" for p in container] == cut


def test_legends_sit_outside_the_panels() -> None:
    fig = draw(Settings(max_attempts=9, clients=20, jitter="full"))
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


# --- labels and bytes -----------------------------------------------------------------------


def test_crowded_attempts_share_one_label_and_every_attempt_is_named() -> None:
    assert attempt_groups([], 1.0) == []
    assert attempt_groups([0.0], 1.0) == [(0, 0)]
    # 0.01 and 0.02 crowd #1 (one label, #1–#3); 0.97 and the last share #5–#6.
    assert attempt_groups([0.0, 0.01, 0.02, 0.5, 0.97, 1.0], 1.0) == [(0, 2), (3, 3), (4, 5)]


def test_a_shared_label_names_its_attempts_over_a_bracket() -> None:
    fig = draw(Settings(max_attempts=9))  # attempts at 0, 0.2, 0.6, 1.4, 3.0 s crowd t = 0
    texts = [text for text, _, _ in _label_boxes(fig)]
    assert texts == ["#1–#5", "#6", "#7", "#8", "#9"]
    brackets = [line for line in axis(fig, "timeline").lines if line.get_label() == "bracket"]
    assert len(brackets) == 1
    xs = [float(x) for x in brackets[0].get_xdata()]
    assert min(xs) < 0.0 and max(xs) > 3.0  # it reaches past #1 and #5


def test_png_bytes_repeat_for_one_figure() -> None:
    fig = Figure(figsize=(1, 1))  # any figure: a small one renders fast
    fig.subplots().plot([0, 1], [1, 0])
    first = png(fig, dpi=20)
    assert first.startswith(b"\x89PNG\r\n\x1a\n")
    assert png(fig, dpi=20) == first
    assert b"Software" not in first  # no version-stamped metadata


def test_one_attempt_says_there_is_nothing_to_wait_for() -> None:
    fig = draw(Settings(max_attempts=1), title=False)
    assert fig.get_suptitle() == ""
    texts = [t.get_text() for t in axis(fig, "waits").texts]
    assert texts == ["one attempt: nothing to wait for"]
    assert bars(axis(fig, "waits"), "sleeps") is None
