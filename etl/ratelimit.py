"""A token bucket: a client's own budget of requests per unit of time.

The bucket holds at most `burst` tokens and gains `rate` tokens a second. Each request takes
one; with none left it waits until one has grown. So in any window of T seconds it lets through
at most ``burst + rate * T`` requests: to stay under a provider's "N a second", choose
``burst + rate <= N``. A bucket that starts full sends its whole burst at once.

Waiting happens on the event loop's clock (`asyncio.sleep`), so under `workbook.vtime` a
minute of polite pacing costs no real time. One bucket paces every task that shares it: share
one per provider, not one per task.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class TokenBucket:
    """`rate` tokens a second, at most `burst` held; starts full.

    `reserve(now)` takes a token at once, going into debt when there is none, and says how long
    the caller must wait before using it; callers that reserve one after another are spaced
    ``1 / rate`` apart, first come first served. `acquire()` reserves and waits.
    """

    def __init__(
        self, rate: float, burst: int = 1, *, clock: Callable[[], float] = _loop_time
    ) -> None:
        if not 0 < rate < math.inf:
            raise ValueError(f"rate must be a positive number of tokens a second, not {rate}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1 token, not {burst}")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)
        self._updated: float | None = None

    def tokens(self, now: float) -> float:
        """Tokens in the bucket at `now` (negative: owed to callers already waiting)."""
        if self._updated is None:
            return self._tokens
        return min(self.burst, self._tokens + (now - self._updated) * self.rate)

    def reserve(self, now: float) -> float:
        """Take one token at `now`; return the seconds to wait before using it (0: go now)."""
        self._tokens = self.tokens(now) - 1
        self._updated = now
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> float:
        """Wait until this caller may send one request; return how long it waited."""
        wait = self.reserve(self.clock())
        if wait > 0:
            await asyncio.sleep(wait)
        return wait
