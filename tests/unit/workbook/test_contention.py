"""The seeded contention simulation reproduces the published ordering of the strategies."""

from __future__ import annotations

import random

import pytest

from workbook import contention
from workbook.contention import STRATEGIES, Measurement


@pytest.fixture(scope="module")
def at_100() -> dict[contention.Strategy, Measurement]:
    return contention.at(contention.sweep([100], runs=10, seed=0), 100)


def test_exponential_without_jitter_does_about_twice_the_work(
    at_100: dict[contention.Strategy, Measurement],
) -> None:
    # Published: 1853 calls against 813 (equal), 795 (full) and 1007 (decorrelated), so more
    # than twice the first two, 1.8 times the third.
    for jittered in ("equal", "full"):
        assert at_100["exponential"].calls > 2 * at_100[jittered].calls
    assert at_100["exponential"].calls > 1.6 * at_100["decorrelated"].calls


def test_exponential_without_jitter_takes_far_longer(
    at_100: dict[contention.Strategy, Measurement],
) -> None:
    for other in ("no_backoff", "equal", "full", "decorrelated"):
        assert at_100["exponential"].time_ms > 5 * at_100[other].time_ms


def test_full_jitter_does_the_least_work(at_100: dict[contention.Strategy, Measurement]) -> None:
    assert min(at_100.values(), key=lambda r: r.calls).strategy == "full"


def test_decorrelated_finishes_first_of_the_backoffs(
    at_100: dict[contention.Strategy, Measurement],
) -> None:
    backoffs = [at_100[s] for s in ("exponential", "equal", "full", "decorrelated")]
    assert min(backoffs, key=lambda r: r.time_ms).strategy == "decorrelated"


def test_no_backoff_is_fastest_but_does_the_most_work(
    at_100: dict[contention.Strategy, Measurement],
) -> None:
    assert max(at_100.values(), key=lambda r: r.calls).strategy == "no_backoff"
    assert min(at_100.values(), key=lambda r: r.time_ms).strategy == "no_backoff"


def test_numbers_land_near_the_published_port(
    at_100: dict[contention.Strategy, Measurement],
) -> None:
    # Not equal (other seeds, other random streams), but the same experiment: within 15 %.
    for strategy, (calls, time_ms) in contention.PUBLISHED_AT_100.items():
        assert at_100[strategy].calls == pytest.approx(calls, rel=0.15)
        assert at_100[strategy].time_ms == pytest.approx(time_ms, rel=0.15)


def test_a_seed_repeats_exactly_and_another_seed_differs() -> None:
    first = contention.measure(30, "full", runs=3, seed=7)
    assert contention.measure(30, "full", runs=3, seed=7) == first
    assert contention.measure(30, "full", runs=3, seed=8) != first


def test_results_ignore_the_global_random_state() -> None:
    random.seed(1)
    first = contention.measure(20, "decorrelated", runs=2)
    random.seed(2)
    assert contention.measure(20, "decorrelated", runs=2) == first


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_lone_client_writes_once(strategy: contention.Strategy) -> None:
    calls, time_ms = contention.run_once(1, strategy, random.Random(0))
    assert calls == 1
    assert 0 < time_ms < 100  # four network hops of about 10 ms


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_client_gets_its_write_in(strategy: contention.Strategy) -> None:
    # One success per client, so at least as many calls as clients; with contention, more.
    calls, _ = contention.run_once(25, strategy, random.Random(3))
    assert calls > 25


def test_the_sweep_covers_every_strategy_and_client_count() -> None:
    results = contention.sweep([5, 10], runs=1)
    assert [(r.clients, r.strategy) for r in results] == [
        (n, s) for n in (5, 10) for s in STRATEGIES
    ]


def test_the_table_puts_ours_next_to_the_published_numbers(
    at_100: dict[contention.Strategy, Measurement],
) -> None:
    text = contention.table(at_100.values(), 100)
    lines = text.splitlines()
    assert len(lines) == 1 + len(STRATEGIES)
    assert lines[2].startswith("exponential, no jitter")
    assert "1853" in lines[2] and "62924" in lines[2]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        contention.run_once(0, "full", random.Random(0))
    with pytest.raises(ValueError):
        contention.run_once(3, "linear", random.Random(0))  # type: ignore[arg-type]


def test_the_plot_draws_one_line_per_strategy_on_each_panel() -> None:
    results = contention.sweep([5, 10], runs=1)
    chart = contention.plot(results)
    calls_ax, time_ax = chart.figure.axes
    by_label = {line.get_label(): line for line in calls_ax.lines}
    assert set(by_label) == set(contention.LABELS.values())
    full = [r for r in results if r.strategy == "full"]
    assert list(by_label["full jitter"].get_ydata()) == [r.calls for r in full]
    assert len(time_ax.lines) == len(STRATEGIES)
    assert time_ax.get_yscale() == "log"
    assert repr(chart) == "contention sweep: 5 strategies, 5 to 10 clients, 1 race each"
    assert chart._repr_png_().startswith(b"\x89PNG")
