"""The backoff explorer, headless: move a control, then read the figure it drew.

Each control gets at least one test showing the figure changes the way the formula
``min(base * 2**(attempt-1), cap)`` (and each jitter's range) says it must.
"""

from __future__ import annotations

import itertools
import random

import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import StepPatch
from matplotlib.text import Annotation

from workbook import explorer
from workbook.explorer import BackoffExplorer, Settings


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


def cap_line(fig: Figure) -> float:
    (line,) = [ln for ln in axis(fig, "waits").lines if ln.get_label() == "cap"]
    assert isinstance(line, Line2D)
    return float(line.get_ydata()[0])


def herd_curve(fig: Figure) -> StepPatch:
    (curve,) = [p for p in axis(fig, "herd").patches if p.get_label() == "retries"]
    assert isinstance(curve, StepPatch)
    return curve


def herd_counts(fig: Figure) -> list[float]:
    """The herd panel's rolling count: retries within the last 10 ms, step by step."""
    values, _edges, _baseline = herd_curve(fig).get_data()
    return [float(v) for v in values]


def spikes(counts: list[float]) -> list[float]:
    """The height of each run of non-zero counts (one burst of retries)."""
    found: list[float] = []
    level = 0.0
    for count in [*counts, 0.0]:
        if count:
            level = max(level, count)
        elif level:
            found.append(level)
            level = 0.0
    return found


def formula(base: float, cap: float, attempts: int) -> list[float]:
    return [min(base * 2 ** (n - 1), cap) for n in range(1, attempts)]


@pytest.fixture(autouse=True)
def fast_png(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the figure's data, not its pixels: skip the Agg rendering (most of
    the time of a redraw) except in tests that ask for the ``real_png`` fixture."""
    if "real_png" not in request.fixturenames:
        monkeypatch.setattr(explorer, "png", lambda fig, dpi=80: repr(id(fig)).encode())


@pytest.fixture
def real_png() -> None:
    """Asking for this keeps `explorer.png` real (see `fast_png`)."""


@pytest.fixture
def panel() -> BackoffExplorer:
    """One client, no jitter, the seed's base delay and cap, nine attempts (the cap bites)."""
    return explorer.explore(clients=1)


# --- max attempts ---------------------------------------------------------------------------


def test_four_attempts_give_three_sleep_bars(panel: BackoffExplorer) -> None:
    panel.controls["max_attempts"].value = 4
    fig = panel.figure
    assert wait_heights(fig) == pytest.approx([0.2, 0.4, 0.8])
    assert len(timeline_sleeps(fig)) == 3
    assert attempt_times(fig) == pytest.approx([0.0, 0.2, 0.6, 1.4])
    assert panel.summary.value == "<b>4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s</b>"


@pytest.mark.parametrize("attempts", [1, 2, 7, 12])
def test_n_attempts_give_n_minus_one_sleeps(attempts: int) -> None:
    fig = explorer.draw(Settings(max_attempts=attempts))
    assert len(wait_heights(fig)) == attempts - 1
    assert len(timeline_sleeps(fig)) == attempts - 1
    assert len(attempt_times(fig)) == attempts


def test_timeline_bars_sit_between_consecutive_attempts(panel: BackoffExplorer) -> None:
    times = attempt_times(panel.figure)
    sleeps = timeline_sleeps(panel.figure)
    for (start, length), begin, end in zip(sleeps, times[:-1], times[1:], strict=True):
        assert start == pytest.approx(begin)
        assert start + length == pytest.approx(end)


# --- base delay -----------------------------------------------------------------------------


def test_base_delay_scales_the_waits_the_cap_does_not_reach(panel: BackoffExplorer) -> None:
    panel.controls["base_delay"].value = 0.4
    assert wait_heights(panel.figure) == pytest.approx(formula(0.4, 10.0, 9))
    assert wait_heights(panel.figure)[:5] == pytest.approx([0.4, 0.8, 1.6, 3.2, 6.4])


# --- cap ------------------------------------------------------------------------------------


def test_opening_state_shows_the_cap_biting(panel: BackoffExplorer) -> None:
    heights = wait_heights(panel.figure)
    assert heights == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0])
    assert "cap bites on 2 of 8" in panel.summary.value


def test_the_seed_default_never_reaches_its_cap() -> None:
    shot = explorer.snapshot()
    assert max(wait_heights(shot.figure)) < 10.0
    assert repr(shot) == "backoff explorer: 4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s"


def test_raising_the_cap_changes_only_the_capped_bars(panel: BackoffExplorer) -> None:
    before = wait_heights(panel.figure)
    panel.controls["cap"].value = 20.0
    after = wait_heights(panel.figure)
    assert after == pytest.approx(formula(0.2, 20.0, 9))
    changed = [
        i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != pytest.approx(b)
    ]
    assert changed == [6, 7]  # the 7th and 8th waits, the two the cap cut
    assert after[6:] == pytest.approx([12.8, 20.0])
    assert cap_line(panel.figure) == 20.0


def test_lowering_the_cap_flattens_every_wait_above_it(panel: BackoffExplorer) -> None:
    panel.controls["cap"].value = 1.0
    assert wait_heights(panel.figure) == pytest.approx([0.2, 0.4, 0.8] + [1.0] * 5)
    assert cap_line(panel.figure) == 1.0


# --- Retry-After ----------------------------------------------------------------------------


def test_retry_after_replaces_the_wait_it_applies_to(panel: BackoffExplorer) -> None:
    panel.controls["max_attempts"].value = 5
    panel.controls["retry_after_on"].value = 2
    panel.controls["retry_after"].value = 5.0
    assert wait_heights(panel.figure) == pytest.approx([0.2, 0.4, 0.8, 1.6])  # box unticked
    panel.controls["retry_after_enabled"].value = True
    assert wait_heights(panel.figure) == pytest.approx([0.2, 5.0, 0.8, 1.6])
    assert attempt_times(panel.figure)[-1] == pytest.approx(0.2 + 5.0 + 0.8 + 1.6)
    panel.controls["retry_after_on"].value = 3
    assert wait_heights(panel.figure) == pytest.approx([0.2, 0.4, 5.0, 1.6])


def test_retry_after_is_not_capped(panel: BackoffExplorer) -> None:
    panel.set(max_attempts=4, retry_after=30.0, retry_after_on=1)
    assert wait_heights(panel.figure) == pytest.approx([30.0, 0.4, 0.8])
    assert cap_line(panel.figure) == 10.0


def test_retry_after_leaves_the_other_jittered_waits_alone(panel: BackoffExplorer) -> None:
    panel.set(jitter="full", seed=3)
    before = wait_heights(panel.figure)
    panel.set(retry_after=2.5, retry_after_on=4)
    after = wait_heights(panel.figure)
    assert after[3] == 2.5
    assert after[:3] + after[4:] == before[:3] + before[4:]


def test_retry_after_past_the_last_attempt_is_never_reached(panel: BackoffExplorer) -> None:
    panel.set(max_attempts=3, retry_after=5.0, retry_after_on=3)
    assert wait_heights(panel.figure) == pytest.approx([0.2, 0.4])
    assert "never reached" in panel.summary.value


# --- jitter strategy ------------------------------------------------------------------------


def test_full_jitter_stays_within_its_bounds() -> None:
    for seed in range(8):
        fig = explorer.draw(Settings(max_attempts=12, cap=5.0, jitter="full", seed=seed))
        for got, top in zip(wait_heights(fig), formula(0.2, 5.0, 12), strict=True):
            assert 0.0 <= got <= top


def test_equal_jitter_keeps_at_least_half() -> None:
    for seed in range(8):
        fig = explorer.draw(Settings(max_attempts=12, cap=5.0, jitter="equal", seed=seed))
        for got, top in zip(wait_heights(fig), formula(0.2, 5.0, 12), strict=True):
            assert top / 2 <= got <= top


def test_decorrelated_jitter_grows_from_the_previous_wait() -> None:
    for seed in range(8):
        fig = explorer.draw(Settings(max_attempts=12, cap=5.0, jitter="decorrelated", seed=seed))
        previous = 0.2
        for got in wait_heights(fig):
            assert 0.2 <= got <= min(5.0, 3 * previous)
            previous = got


def test_switching_strategy_redraws_the_waits(panel: BackoffExplorer) -> None:
    exact = wait_heights(panel.figure)
    assert bars(axis(panel.figure, "waits"), "jitter range") is None
    panel.controls["jitter"].value = "full"
    jittered = wait_heights(panel.figure)
    assert len(jittered) == len(exact)
    assert all(j <= e for j, e in zip(jittered, exact, strict=True))
    assert jittered != pytest.approx(exact)
    ranges = bars(axis(panel.figure, "waits"), "jitter range")
    assert ranges is not None
    assert [p.get_height() for p in ranges] == pytest.approx(exact)  # U(0, window)
    panel.controls["jitter"].value = "none"
    assert wait_heights(panel.figure) == exact


# --- clients and seed: the herd -------------------------------------------------------------


def test_without_jitter_the_whole_herd_retries_at_the_same_instants(
    panel: BackoffExplorer,
) -> None:
    panel.controls["clients"].value = 50
    counts = herd_counts(panel.figure)
    assert spikes(counts) == [50.0] * 8  # 8 retries, each by all 50 at once
    assert "50 clients, up to 50 retries within 10 ms" in panel.summary.value


def test_full_jitter_spreads_the_herd(panel: BackoffExplorer) -> None:
    panel.controls["clients"].value = 50
    panel.controls["jitter"].value = "full"
    counts = herd_counts(panel.figure)
    assert len(spikes(counts)) > 8  # more distinct bursts than the 8 retries
    peak = explorer.crowd(explorer.herd(panel.settings))
    assert max(counts) == peak < 50 / 3
    assert f"up to {peak} retries within 10 ms" in panel.summary.value


def test_the_herd_panel_peaks_at_the_summary_count() -> None:
    # The rolling count and the summary's crowd are one mechanism: their maxima agree.
    for jitter in ("none", "full", "equal", "decorrelated"):
        settings = Settings(max_attempts=9, clients=40, jitter=jitter, seed=4)
        fig = explorer.draw(settings)
        assert max(herd_counts(fig)) == explorer.crowd(explorer.herd(settings))


def test_rolling_count_matches_counting_by_hand() -> None:
    rng = random.Random(7)
    times = sorted(round(rng.uniform(0, 0.2), 3) for _ in range(60))
    schedules = [explorer.Schedule(0, (0.0, t), ()) for t in times]
    edges, counts = explorer.rolling(schedules)
    assert len(edges) == len(counts) + 1
    for left, count in zip(edges, counts, strict=False):
        # At each step's start, the retries at most 10 ms old.
        assert count == sum(1 for t in times if t <= left < t + 0.010 + 1e-12)
    brute = max(sum(1 for u in times if 0 <= u - t <= 0.010 + 1e-12) for t in times)
    assert explorer.crowd(schedules) == brute


def test_every_picture_of_a_herd_shares_one_scale() -> None:
    # The y-axis tops at the herd size, jitter or not, so a spread herd looks smaller.
    tops = {
        jitter: axis(
            explorer.draw(Settings(max_attempts=9, clients=20, jitter=jitter)), "herd"
        ).get_ylim()[1]
        for jitter in ("none", "full", "decorrelated")
    }
    assert len(set(tops.values())) == 1
    assert tops["none"] >= 20


def test_one_client_has_no_herd_panel(panel: BackoffExplorer) -> None:
    assert [ax.get_label() for ax in panel.figure.axes] == ["timeline", "waits"]
    panel.controls["clients"].value = 2
    assert [ax.get_label() for ax in panel.figure.axes] == ["timeline", "herd", "waits"]


def test_client_one_does_not_depend_on_the_herd_size(panel: BackoffExplorer) -> None:
    panel.set(jitter="decorrelated", seed=5)
    alone = wait_heights(panel.figure)
    panel.controls["clients"].value = 120
    assert wait_heights(panel.figure) == alone
    assert max(herd_counts(panel.figure)) == explorer.crowd(explorer.herd(panel.settings))


def test_seed_changes_jittered_schedules_and_repeats_exactly(panel: BackoffExplorer) -> None:
    panel.set(clients=30, jitter="full", seed=0)
    first, first_herd = wait_heights(panel.figure), herd_counts(panel.figure)
    panel.controls["seed"].value = 1
    assert wait_heights(panel.figure) != first
    assert herd_counts(panel.figure) != first_herd
    panel.controls["seed"].value = 0
    assert wait_heights(panel.figure) == first
    assert herd_counts(panel.figure) == first_herd


def test_seed_does_not_matter_without_jitter(panel: BackoffExplorer) -> None:
    before = wait_heights(panel.figure)
    panel.controls["seed"].value = 42
    assert wait_heights(panel.figure) == before


def test_crowd_counts_retries_within_the_window() -> None:
    def at(*times: float) -> explorer.Schedule:
        return explorer.Schedule(0, (0.0, *times), ())

    assert explorer.crowd([at(1.0), at(1.0), at(1.0)]) == 3
    assert explorer.crowd([at(1.0), at(1.01), at(1.03)]) == 2
    assert explorer.crowd([at(1.0), at(2.0)]) == 1
    assert explorer.crowd([]) == 0


def test_schedules_ignore_the_global_random_state() -> None:
    settings = Settings(max_attempts=8, jitter="full", clients=5, seed=9)
    random.seed(1)
    first = explorer.herd(settings)
    random.seed(2)
    assert explorer.herd(settings) == first


# --- the panel as a page element ------------------------------------------------------------


def test_each_change_replaces_the_one_image(panel: BackoffExplorer, real_png: None) -> None:
    children = list(panel.children)
    before = panel.image.value
    panel.controls["cap"].value = 3.0
    assert panel.image.value != before
    assert bytes(panel.image.value).startswith(b"\x89PNG")
    assert list(panel.children) == children


def test_summary_is_an_html_element_with_its_css_class(panel: BackoffExplorer) -> None:
    assert "backoff-summary" in panel.summary._dom_classes
    panel.controls["max_attempts"].value = 4
    assert "4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s" in panel.summary.value


def test_sliders_wait_for_release(panel: BackoffExplorer) -> None:
    for name in ("max_attempts", "base_delay", "cap", "clients", "seed", "retry_after"):
        assert panel.controls[name].continuous_update is False


def test_retry_after_fields_are_disabled_until_ticked(panel: BackoffExplorer) -> None:
    assert panel.controls["retry_after"].disabled
    panel.controls["retry_after_enabled"].value = True
    assert not panel.controls["retry_after"].disabled


def test_mimebundle_carries_a_static_fallback(panel: BackoffExplorer, real_png: None) -> None:
    data = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["image/png"]
    assert data["text/plain"].startswith("backoff explorer: 9 attempts · 8 sleeps")


def test_the_summary_is_said_once(panel: BackoffExplorer) -> None:
    # Live, the summary line says it and the picture has no title; a snapshot (a picture
    # alone) carries it as its title.
    assert panel.figure.get_suptitle() == ""
    assert "9 attempts · 8 sleeps" in panel.summary.value
    shot = explorer.snapshot(max_attempts=9)
    assert shot.figure.get_suptitle().startswith("9 attempts · 8 sleeps")


# --- what the picture must not get wrong ----------------------------------------------------


def _label_boxes(fig: Figure) -> list[tuple[str, float, float]]:
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    found = []
    for child in axis(fig, "timeline").get_children():
        if isinstance(child, Annotation):
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
    ],
)
def test_attempt_labels_never_overlap(settings: Settings) -> None:
    boxes = _label_boxes(explorer.draw(settings))
    assert boxes[0][0] == "#1" and boxes[-1][0] == f"#{settings.max_attempts}"
    for (left, _, left_end), (right, right_start, _) in itertools.pairwise(boxes):
        assert left_end <= right_start, f"{left} overlaps {right}"


def _wait_colours(fig: Figure) -> list[str]:
    container = bars(axis(fig, "waits"), "sleeps")
    assert container is not None
    return [to_hex(p.get_facecolor()) for p in container]


def test_a_jittered_wait_below_the_cap_is_not_cut_by_it() -> None:
    settings = Settings(max_attempts=9, jitter="full")
    fig = explorer.draw(settings)
    purple = to_hex("#7b4fa8")
    for wait, colour in zip(explorer.schedule(settings).waits, _wait_colours(fig), strict=True):
        assert wait.seconds < settings.cap
        assert colour != purple
    # The range it was drawn from was cut, and the picture says so on the range's box.
    ranges = bars(axis(fig, "waits"), "jitter range")
    assert ranges is not None
    assert [to_hex(p.get_edgecolor()) == purple for p in ranges] == [False] * 6 + [True] * 2


def test_only_waits_equal_to_the_cap_are_coloured_cut() -> None:
    purple = to_hex("#7b4fa8")
    for jitter in ("none", "decorrelated"):
        settings = Settings(max_attempts=12, jitter=jitter, seed=5)
        fig = explorer.draw(settings)
        waits = explorer.schedule(settings).waits
        cut = [c == purple for c in _wait_colours(fig)]
        assert cut == [w.seconds == settings.cap for w in waits]
        assert any(cut)


def test_legends_sit_outside_the_panels() -> None:
    fig = explorer.draw(Settings(max_attempts=9, clients=20, jitter="full"))
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_set_rejects_unknown_controls(panel: BackoffExplorer) -> None:
    with pytest.raises(TypeError, match="no such control"):
        panel.set(attempts=3)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": 0},
        {"base_delay": 0.0},
        {"cap": -1.0},
        {"jitter": "half"},
        {"retry_after": -1.0},
        {"retry_after": float("inf")},
        {"clients": 0},
    ],
)
def test_settings_reject_nonsense(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Settings(**bad)  # type: ignore[arg-type]
