"""The error kinds: which are transient, and what Retry-After each carries."""

from __future__ import annotations

import pytest

from etl import (
    TRANSIENT_STATUSES,
    EtlError,
    HttpStatus,
    NetworkError,
    ParseError,
    RateLimited,
    RequestTimeout,
)


def test_transient_kinds() -> None:
    """Network trouble, timeouts and rate limits are worth another attempt."""
    for error in (NetworkError("reset"), RequestTimeout("slow"), RateLimited(None)):
        assert error.is_transient(), error


def test_parse_error_is_permanent() -> None:
    """The same bytes fail the same way, so a parse error is never retried."""
    assert not ParseError("bad json").is_transient()
    assert not EtlError("plain").is_transient()


def test_transient_statuses_are_exactly_the_pinned_six() -> None:
    """408, 429, 500, 502, 503, 504 and no others."""
    assert frozenset({408, 429, 500, 502, 503, 504}) == TRANSIENT_STATUSES
    for status in range(100, 600):
        assert HttpStatus(status).is_transient() is (status in TRANSIENT_STATUSES)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RateLimited(5.0), 5.0),
        (RateLimited(None), None),
        (HttpStatus(503, retry_after_secs=2.5), 2.5),
        (HttpStatus(503), None),
        (NetworkError("x"), None),
        (ParseError("x"), None),
    ],
)
def test_retry_after(error: EtlError, expected: float | None) -> None:
    """Only rate limits and statuses carry the server's Retry-After."""
    assert error.retry_after() == expected


def test_constructors_match_the_contract() -> None:
    """Keyword names as ARC.md pins them, and a readable message by default."""
    limited = RateLimited(retry_after_secs=3.0, message="slow down")
    assert (limited.retry_after_secs, str(limited)) == (3.0, "slow down")
    status = HttpStatus(status=404, message="gone", retry_after_secs=None)
    assert (status.status, str(status)) == (404, "gone")
    assert str(HttpStatus(500)) == "HTTP 500"
    assert isinstance(ParseError("x"), EtlError)
