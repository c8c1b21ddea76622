"""The backoff explorer, headless: move a control, then read the figure it drew.

Each control gets at least one test showing the figure changes the way the formula
``min(base * 2**(attempt-1), cap)`` (and each jitter's range) says it must; the line under the
figure (what a screen reader reads) is checked against the figure's own numbers; and the
panel's controls are labelled, tied in pairs and laid out in the order Tab reaches them. The
figure's readers, and the tests of the drawing and of the schedules alone, are in
``teaching/``. The keyboard itself is driven in ``tests/browser/test_concept_01.py``.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation

from tests.unit.workbook.teaching.test_backoff_figure import (
    attempt_times,
    axis,
    bars,
    formula,
    herd_counts,
    timeline_sleeps,
    wait_heights,
)
from workbook import explorer, palette
from workbook.explorer import BackoffExplorer
from workbook.teaching import panel as panel_module


def cap_line(fig: Figure) -> float:
    (line,) = [ln for ln in axis(fig, "waits").lines if ln.get_label() == "cap"]
    assert isinstance(line, Line2D)
    return float(line.get_ydata()[0])


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


def image_bytes(panel: BackoffExplorer) -> bytes:
    """The PNG the page shows: decoded from the image's data URL."""
    found = re.search(r'src="data:image/png;base64,([^"]*)"', panel.image.value)
    assert found, panel.image.value[:80]
    return base64.b64decode(found[1])


def image_alt(panel: BackoffExplorer) -> str:
    found = re.search(r'alt="([^"]*)"', panel.image.value)
    assert found, panel.image.value[:80]
    return html.unescape(found[1])


def bar_labels(fig: Figure) -> list[str]:
    """The number printed over each wait bar, as the reader sees it."""
    return [t.get_text() for t in axis(fig, "waits").texts if isinstance(t, Annotation)]


def peak_marker(fig: Figure) -> tuple[float, float]:
    """Where the herd panel's "busiest 10 ms" triangle sits: (time, retries)."""
    (marker,) = [ln for ln in axis(fig, "herd").lines if ln.get_marker() == "v"]
    return float(marker.get_xdata()[0]), float(marker.get_ydata()[0])


@pytest.fixture(autouse=True)
def fast_png(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the figure's data, not its pixels: skip the Agg rendering (most of
    the time of a redraw) except in tests that ask for the ``real_png`` fixture."""
    if "real_png" not in request.fixturenames:
        # The panel renders through workbook.teaching.panel.picture.
        monkeypatch.setattr(panel_module, "png", lambda fig, dpi=80: repr(id(fig)).encode())


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


# --- the panel as a page element ------------------------------------------------------------


def test_each_change_replaces_the_one_image(panel: BackoffExplorer, real_png: None) -> None:
    children = list(panel.children)
    before = panel.image.value
    panel.controls["cap"].value = 3.0
    assert panel.image.value != before
    assert panel.picture.startswith(b"\x89PNG")
    assert image_bytes(panel) == panel.picture
    assert panel.image.value.count("<img ") == 1
    assert list(panel.children) == children


def test_summary_is_an_html_element_with_its_css_class(panel: BackoffExplorer) -> None:
    assert "backoff-summary" in panel.summary._dom_classes
    panel.controls["max_attempts"].value = 4
    assert "4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s" in panel.summary.value


def test_sliders_wait_for_release(panel: BackoffExplorer) -> None:
    for name in ("max_attempts", "base_delay", "cap", "clients", "seed", "retry_after"):
        assert panel.controls[name].continuous_update is False
    for slider in panel.sliders.values():
        assert slider.continuous_update is False


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


# --- the panel's controls ---------------------------------------------------------------------


def test_set_rejects_unknown_controls(panel: BackoffExplorer) -> None:
    with pytest.raises(TypeError, match="no such control"):
        panel.set(attempts=3)


# --- the line under the figure, and the image's alt ----------------------------------------


def test_the_opening_line_says_what_the_figure_shows() -> None:
    shown = explorer.explore()  # the notebook's opening: 20 clients
    assert shown.alt.value == html.escape(shown.alt_text)
    assert shown.alt_text == (
        "Figure: no jitter, 9 attempts, every one failing. Top: client 1's attempts (circles)"
        " and 8 sleeps (bars), 32.6 s of waiting in all. Middle: the retries of all 20 clients"
        " reaching the server; the busiest 10 ms holds 20 retries, the whole herd at once, at"
        " 0.20 s. Bottom: each wait against the 10.0 s cap (dashed line): 0.20, 0.40, 0.80,"
        " 1.6, 3.2, 6.4, 10.0, 10.0 s; the cap cuts the waits after attempts 7 and 8."
    )
    assert "\n" not in shown.alt_text


def test_lowering_the_cap_to_two_seconds_rewrites_the_line() -> None:
    shown = explorer.explore()
    assert "total wait 32.6 s" in shown.summary.value
    assert "32.6 s of waiting in all" in shown.alt_text
    shown.controls["cap"].value = 2.0
    # 0.2 + 0.4 + 0.8 + 1.6 + 4 waits cut to 2.0 = 11.0 s, as the summary above says too.
    assert "total wait 11.0 s" in shown.summary.value
    assert "11.0 s of waiting in all" in shown.alt_text
    assert "the 2.0 s cap (dashed line): 0.20, 0.40, 0.80, 1.6, 2.0, 2.0, 2.0, 2.0 s" in (
        shown.alt_text
    )
    assert "the cap cuts the waits after attempts 5 to 8." in shown.alt_text
    assert image_alt(shown) == shown.alt_text.removeprefix(explorer.ALT_PREFIX)


def test_every_control_rewrites_the_line(panel: BackoffExplorer) -> None:
    moves: list[tuple[str, Any]] = [
        ("max_attempts", 5),
        ("base_delay", 0.5),
        ("cap", 3.0),
        ("jitter", "equal"),
        ("seed", 7),
        ("retry_after_enabled", True),
        ("retry_after", 2.5),
        ("retry_after_on", 3),
        ("clients", 12),
    ]
    seen = {panel.alt_text}
    for name, value in moves:
        panel.controls[name].value = value
        assert panel.alt_text not in seen, f"moving {name} left the line as it was"
        assert image_alt(panel) == explorer.describe(panel.settings)
        seen.add(panel.alt_text)


ALT_CASES = [
    explorer.Settings(max_attempts=9, clients=20),
    explorer.Settings(max_attempts=9, clients=20, cap=2.0),
    explorer.Settings(max_attempts=12, clients=50, jitter="full", seed=3),
    explorer.Settings(max_attempts=10, clients=7, jitter="equal", cap=4.0),
    explorer.Settings(max_attempts=12, clients=30, jitter="decorrelated", cap=2.0, seed=1),
    explorer.Settings(max_attempts=6, clients=20, jitter="full", retry_after=5.0, retry_after_on=2),
    explorer.Settings(max_attempts=3, retry_after=5.0, retry_after_on=3),
    explorer.Settings(max_attempts=1, clients=4),
]


@pytest.mark.slow  # eight figures read back: 4 s (make check runs it)
@pytest.mark.parametrize("settings", ALT_CASES, ids=lambda s: explorer.summary(s)[:40])
def test_the_line_holds_the_figures_own_numbers(settings: explorer.Settings) -> None:
    fig = explorer.draw(settings, title=False)
    line = explorer.describe(settings)
    labels = bar_labels(fig)
    if labels:
        heights = re.search(r"cap \(dashed line\): ([^s]*) s", line)
        assert heights and heights[1].split(", ") == labels
        total = re.search(r"([\d.]+) s of waiting in all", line)
        assert total and float(total[1]) == pytest.approx(attempt_times(fig)[-1], abs=0.05)
    else:
        assert "no wait to draw" in line
    cap = re.search(r"the ([\d.]+) s cap", line)
    assert cap and float(cap[1]) == cap_line(fig)
    if settings.clients > 1 and settings.max_attempts > 1:
        busiest = re.search(
            r"holds (\d+) retr(?:y|ies)(?:, the whole herd at once)?, at (\S+) s", line
        )
        assert busiest, line
        at, peak = peak_marker(fig)
        assert int(busiest[1]) == peak == max(herd_counts(fig))
        assert float(busiest[2]) == pytest.approx(at, abs=0.005 if at < 0.95 else 0.05)
    else:
        assert "busiest" not in line
    # The waits the line says the cap cut are the bars drawn at the cap's height.
    at_cap = [n for n, h in enumerate(wait_heights(fig), start=1) if h == settings.cap]
    said = re.search(r"the cap cuts the waits after (attempts? [\w, ]+?)[;.]", line)
    if settings.jitter == "none":
        assert (listed(said[1]) if said else []) == at_cap
    said = re.search(r"the waits after (attempts? [\w, ]+?) are the cap itself", line)
    if settings.jitter != "none":
        assert (listed(said[1]) if said else []) == at_cap


def listed(text: str) -> list[int]:
    """The numbers a phrase like ``attempts 2, 5 to 7 and 9`` names."""
    numbers: list[int] = []
    for part in re.split(r", | and ", text.removeprefix("attempts ").removeprefix("attempt ")):
        low, _, high = part.partition(" to ")
        numbers += range(int(low), int(high or low) + 1)
    return numbers


@pytest.mark.parametrize(
    ("numbers", "text"),
    [
        ([3], "attempt 3"),
        ([7, 8], "attempts 7 and 8"),
        ([5, 6, 7, 8], "attempts 5 to 8"),
        ([2, 5, 6, 7, 9], "attempts 2, 5 to 7 and 9"),
        ([1, 3, 5], "attempts 1, 3 and 5"),
    ],
)
def test_attempt_numbers_read_as_runs(numbers: list[int], text: str) -> None:
    assert explorer._attempts_text(numbers) == text
    assert listed(text) == numbers


# --- the controls: labels, pairs, order -----------------------------------------------------


def walk(widget: widgets.Widget) -> Iterator[widgets.Widget]:
    """Every widget under `widget`, in the order the page lays them out."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def test_every_control_is_labelled(panel: BackoffExplorer) -> None:
    for control in panel.controls.values():
        assert control.description.strip(), f"{control!r} has no label"
    # A slider's handle cannot carry a name in ipywidgets 8: each sits beside its named box.
    for name, slider in panel.sliders.items():
        (row,) = [w for w in walk(panel) if slider in getattr(w, "children", ())]
        assert list(row.children) == [panel.controls[name], slider]


def test_the_page_lays_controls_out_in_their_focus_order(panel: BackoffExplorer) -> None:
    wanted = {id(w) for w in panel.focus_order}
    laid_out = [w for w in walk(panel) if id(w) in wanted]
    assert laid_out == panel.focus_order
    assert set(map(id, panel.focus_order)) == {
        *map(id, panel.controls.values()),
        *map(id, panel.sliders.values()),
    }


def test_no_control_relies_on_keys_the_notebook_takes(panel: BackoffExplorer) -> None:
    # JupyterLab's command mode takes ArrowUp/ArrowDown from a dropdown to move between cells,
    # and toggle buttons never say which one is pressed: the jitter is a set of radio buttons.
    kinds = {type(w) for w in walk(panel)}
    assert not kinds & {widgets.Dropdown, widgets.Select, widgets.ToggleButtons}
    assert isinstance(panel.controls["jitter"], widgets.RadioButtons)


def test_a_slider_and_its_box_move_together_and_redraw_once(
    panel: BackoffExplorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[explorer.Settings] = []
    real = explorer.draw

    def counting(settings: explorer.Settings, **kwargs: Any) -> Figure:
        drawn.append(settings)
        return real(settings, **kwargs)

    monkeypatch.setattr(explorer, "draw", counting)
    panel.sliders["cap"].value = 2.5  # what an arrow key on the handle does
    assert panel.controls["cap"].value == 2.5
    panel.controls["max_attempts"].value = 6  # what typing into the box does
    assert panel.sliders["max_attempts"].value == 6
    assert [(s.cap, s.max_attempts) for s in drawn] == [(2.5, 9), (2.5, 6)]


def test_the_formula_beside_the_choice_follows_it(panel: BackoffExplorer) -> None:
    assert panel.formula.value == html.escape(explorer.FORMULAS["none"])
    panel.controls["jitter"].value = "decorrelated"
    assert "3·previous" in panel.formula.value


def test_the_focus_ring_is_drawn_in_the_palette(panel: BackoffExplorer) -> None:
    (style,) = [w for w in walk(panel) if "<style>" in str(getattr(w, "value", ""))]
    assert f"outline: 3px solid {palette.BLUE}" in style.value
    assert ":focus-visible" in style.value
