"""Choosing a per-attempt timeout (`etl.timeouts`): nearest-rank percentiles of healthy
latencies, and the timeout that cuts off a chosen share of them."""

from __future__ import annotations

import random

import pytest

from etl.timeouts import percentile, timeout_for


def test_nearest_rank_percentiles_of_one_to_a_hundred() -> None:
    samples = [float(n) for n in range(1, 101)]
    random.Random(0).shuffle(samples)  # the order of a sample never matters
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile(samples, 100) == 100.0
    assert percentile(samples, 0.5) == 1.0


def test_p99_9_of_a_thousand_is_the_999th_not_the_last() -> None:
    # 99.9 / 100 * 1000 is 999.0000000000001 in floating point: the rank must still be 999.
    samples = [n / 1000 for n in range(1, 1001)]
    assert percentile(samples, 99.9) == 0.999
    assert timeout_for(samples) == 0.999
    assert timeout_for(samples, false_timeouts=0.01) == 0.99


def test_the_timeout_cuts_off_about_the_chosen_share_of_a_sample() -> None:
    draw = random.Random(7)
    latencies = [draw.lognormvariate(-3.0, 0.5) for _ in range(10_000)]
    for share in (0.1, 0.01, 0.001):
        cut = timeout_for(latencies, false_timeouts=share)
        assert sum(s > cut for s in latencies) == pytest.approx(share * len(latencies), abs=1)


@pytest.mark.parametrize(
    ("samples", "p", "message"),
    [([], 50, "no samples"), ([1.0], 0, "p must be"), ([1.0], 100.1, "p must be")],
)
def test_percentile_refuses_what_has_no_answer(
    samples: list[float], p: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        percentile(samples, p)


@pytest.mark.parametrize("share", [0, 1, -0.1, 1.5])
def test_a_false_timeout_rate_is_a_share_strictly_between_0_and_1(share: float) -> None:
    with pytest.raises(ValueError, match="share of calls"):
        timeout_for([0.1, 0.2], false_timeouts=share)
