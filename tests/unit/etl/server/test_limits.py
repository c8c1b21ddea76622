"""The fixture's request limit (`etl.server.limits`): a sliding window of N admitted requests
per `per` seconds, refusals that count for nothing, and Retry-After in whole seconds."""

from __future__ import annotations

import pytest

from etl.server.limits import RateLimit, Throttle, retry_after_header


def test_admits_n_in_any_window_and_says_when_the_next_fits() -> None:
    throttle = Throttle(RateLimit(3))
    assert [throttle.admit(0.0), throttle.admit(0.1), throttle.admit(0.2)] == [None] * 3
    assert throttle.admit(0.5) == pytest.approx(0.5)  # until the request at 0.0 leaves
    assert throttle.admit(1.0) is None  # 0.0 is a whole second back: out of the window
    assert throttle.admit(1.05) == pytest.approx(0.05)


def test_a_refused_request_is_not_counted() -> None:
    throttle = Throttle(RateLimit(1, per=2.0))
    assert throttle.admit(0.0) is None
    for at in (0.5, 1.0, 1.5, 1.9):
        assert throttle.admit(at) is not None
    assert throttle.admit(2.0) is None  # hammering in between moved nothing


def test_reset_empties_the_window() -> None:
    throttle = Throttle(RateLimit(1))
    throttle.admit(0.0)
    throttle.reset()
    assert throttle.admit(0.1) is None


@pytest.mark.parametrize(("wait", "header"), [(0.01, "1"), (0.75, "1"), (1.0, "1"), (1.2, "2")])
def test_retry_after_is_whole_seconds_rounded_up_never_zero(wait: float, header: str) -> None:
    assert retry_after_header(wait) == header


def test_a_limit_reads_as_it_is_written() -> None:
    assert str(RateLimit(5)) == "5 requests per 1 s"
    assert str(RateLimit(2, per=0.5)) == "2 requests per 0.5 s"


@pytest.mark.parametrize(("requests", "per"), [(0, 1.0), (3, 0.0), (3, float("inf"))])
def test_a_limit_needs_a_request_and_a_finite_window(requests: int, per: float) -> None:
    with pytest.raises(ValueError, match=r"at least 1|per must be"):
        RateLimit(requests, per)
