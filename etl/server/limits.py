"""A request limit for the fixture: at most N requests in any window of `per` seconds.

``FixtureApp(rate_limit=RateLimit(5))`` admits 5 requests for launches in any one second and
answers the next with 429 and ``Retry-After`` (whole seconds, rounded up, as Django REST
framework's throttle sends it), the way a provider's quota refuses a client that bursts.
A refused request is not counted against the window, so a client that waits as told gets in.

The window slides on the clock the app is given: in-process that is the event loop's clock,
virtual under `workbook.vtime`, so a test of a second-long limit takes no real time.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RateLimit:
    """At most `requests` admitted in any `per` seconds (a sliding window)."""

    requests: int
    per: float = 1.0

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError(f"a limit admits at least 1 request, not {self.requests}")
        if not 0 < self.per < math.inf:
            raise ValueError(f"per must be a positive, finite number of seconds, not {self.per}")

    def __str__(self) -> str:
        return f"{self.requests} requests per {self.per:g} s"


class Throttle:
    """The sliding window of one `RateLimit`: which requests it admitted, and when.

    `admit(now)` either counts the request and returns None, or counts nothing and returns the
    seconds until the oldest admitted request leaves the window. Times only move forward.
    """

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._admitted: deque[float] = deque()

    def admit(self, now: float) -> float | None:
        """None when the request at `now` is admitted; else how long until one would be."""
        while self._admitted and now - self._admitted[0] >= self.limit.per:
            self._admitted.popleft()
        if len(self._admitted) >= self.limit.requests:
            return self.limit.per - (now - self._admitted[0])
        self._admitted.append(now)
        return None

    def reset(self) -> None:
        """Forget every admitted request: the next `requests` are admitted at once."""
        self._admitted.clear()


def retry_after_header(wait: float) -> str:
    """`wait` as delay-seconds: whole seconds, rounded up, at least 1 (a client told 0 would
    come straight back into the same full window)."""
    return str(max(1, math.ceil(wait)))
