"""The errors an ingestion step can raise, split by what a retry can do about them.

Every failure the pipeline expects is an `EtlError`. Its two questions decide a retry loop:
`is_transient()` (could the same call succeed if repeated?) and `retry_after()` (did the
server say how long to wait?). Anything that is *not* an `EtlError` is a bug, and a retry
loop must let it through at once.
"""

from __future__ import annotations

#: HTTP statuses worth repeating: the request may succeed later, unchanged.
TRANSIENT_STATUSES: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504})


class EtlError(Exception):
    """Base of every expected ingestion failure. Permanent unless a kind says otherwise."""

    def is_transient(self) -> bool:
        """True when repeating the same call might succeed."""
        return False

    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait before the next attempt, if it said."""
        return None


class NetworkError(EtlError):
    """The request never got an answer: connection refused, reset, DNS failure. Transient."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def is_transient(self) -> bool:
        return True


class RequestTimeout(EtlError):
    """No complete answer within the deadline. Transient (for idempotent requests)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def is_transient(self) -> bool:
        return True


class RateLimited(EtlError):
    """HTTP 429: slow down. Carries the server's Retry-After, in seconds, when it sent one."""

    def __init__(self, retry_after_secs: float | None, message: str = "") -> None:
        super().__init__(message or f"rate limited (retry after {retry_after_secs} s)")
        self.retry_after_secs = retry_after_secs
        self.message = message

    def is_transient(self) -> bool:
        return True

    def retry_after(self) -> float | None:
        return self.retry_after_secs


class HttpStatus(EtlError):
    """An HTTP status that is not success. Transient only for 408, 429, 500, 502, 503, 504."""

    def __init__(
        self, status: int, message: str = "", retry_after_secs: float | None = None
    ) -> None:
        super().__init__(message or f"HTTP {status}")
        self.status = status
        self.message = message
        self.retry_after_secs = retry_after_secs

    def is_transient(self) -> bool:
        return self.status in TRANSIENT_STATUSES

    def retry_after(self) -> float | None:
        return self.retry_after_secs


class ParseError(EtlError):
    """The data cannot be understood (bad JSON, a missing field, NaN). Permanent: a retry
    would get the same bytes and fail the same way."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
