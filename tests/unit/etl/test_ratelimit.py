"""The token bucket (`etl.ratelimit`): at most ``burst + rate * T`` requests in any window of T
seconds, waits on the event loop's (virtual) clock, callers served in order."""

from __future__ import annotations

import asyncio

import pytest

from etl.ratelimit import TokenBucket


def _sent_at(bucket: TokenBucket, arrivals: list[float]) -> list[float]:
    """When each caller may send, arriving at `arrivals` (in order), by `reserve` alone."""
    return [at + bucket.reserve(at) for at in arrivals]


def test_a_full_bucket_sends_its_burst_then_one_per_interval() -> None:
    bucket = TokenBucket(rate=4, burst=3)
    assert _sent_at(bucket, [0.0] * 6) == [0.0, 0.0, 0.0, 0.25, 0.5, 0.75]


def test_tokens_grow_back_while_idle_but_never_past_the_burst() -> None:
    bucket = TokenBucket(rate=2, burst=2)
    assert _sent_at(bucket, [0.0, 0.0]) == [0.0, 0.0]
    assert bucket.tokens(0.25) == 0.5
    assert bucket.tokens(10.0) == 2  # an hour idle still leaves only the burst
    assert _sent_at(bucket, [10.0, 10.0, 10.0]) == [10.0, 10.0, 10.5]


@pytest.mark.parametrize(("rate", "burst"), [(4, 1), (3, 2), (1, 5), (2.5, 1)])
def test_no_window_of_t_seconds_holds_more_than_burst_plus_rate_t(rate: float, burst: int) -> None:
    bucket = TokenBucket(rate=rate, burst=burst)
    sent = _sent_at(bucket, [0.0] * 40)
    for start in sent:
        for window in (0.5, 1.0, 3.0):
            inside = sum(start <= t < start + window for t in sent)
            assert inside <= burst + rate * window + 1e-9


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_acquire_waits_on_the_loop_clock_in_order() -> None:
    loop = asyncio.get_running_loop()
    bucket = TokenBucket(rate=4)
    started: list[tuple[int, float]] = []

    async def caller(n: int) -> None:
        await bucket.acquire()
        started.append((n, loop.time()))

    await asyncio.gather(*(caller(n) for n in range(5)))
    assert started == [(0, 0.0), (1, 0.25), (2, 0.5), (3, 0.75), (4, 1.0)]
    assert await bucket.acquire() == pytest.approx(0.25)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (float("inf"), 1), (1, 0)])
def test_a_bucket_needs_a_positive_rate_and_room_for_one(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match=r"rate|burst"):
        TokenBucket(rate=rate, burst=burst)
