"""A circuit breaker: stop calling a dependency that is down, and notice when it is back.

Three states (Michael Nygard, *Release It!*, 2007):

- **closed**: calls go through; `failures` transient failures in a row open the breaker;
- **open**: every call is refused at once with `CircuitOpen`, nothing is sent, for `cooldown`
  seconds;
- **half-open**: then one trial call goes through (others are still refused); its success
  closes the breaker, its failure opens it for another `cooldown`.

A retry budget limits the *extra* attempts and still sends every first one; a breaker stops
first attempts too, so a dependency that is down gets almost no traffic from this client, and
a caller fails in no time instead of waiting out its timeouts. The price: while it is open it
also refuses calls that would have worked.

What counts as a failure is an `EtlError` that `is_transient()` (a timeout, a 503): those say
the dependency may be down. A permanent error (a 404) came from a dependency that answered, so
it counts as an answer. Anything else (a bug, a cancellation) passes through and changes
nothing. Time is the event loop's clock unless told otherwise, so cooldowns pass in no real
time under `workbook.vtime`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from etl.errors import EtlError

T = TypeVar("T")
State = Literal["closed", "open", "half-open"]


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class CircuitOpen(EtlError):
    """The breaker refused the call without making it. Permanent for this attempt: trying again
    at once meets the same open breaker; `until` is when it next lets a trial through."""

    def __init__(self, until: float) -> None:
        super().__init__(f"circuit open: no calls until t = {until:g} s")
        self.until = until


class CircuitBreaker:
    """Opens after `failures` transient failures in a row; lets one trial through `cooldown`
    seconds later. `history` lists each change of state as ``(time, state)``; before the
    first, the breaker was closed.
    """

    def __init__(
        self,
        failures: int = 5,
        cooldown: float = 5.0,
        *,
        clock: Callable[[], float] = _loop_time,
    ) -> None:
        if failures < 1:
            raise ValueError(f"failures must be at least 1, not {failures}")
        if not cooldown > 0:
            raise ValueError(f"cooldown must be a positive number of seconds, not {cooldown}")
        self.failures = failures
        self.cooldown = cooldown
        self.clock = clock
        self.history: list[tuple[float, State]] = []
        self._state: State = "closed"
        self._in_a_row = 0
        self._opened_at = 0.0
        self._trial = False

    def state(self, now: float) -> State:
        """The state at `now`: an open breaker turns half-open once its cooldown is over."""
        if self._state == "open" and now >= self._opened_at + self.cooldown:
            self._move(self._opened_at + self.cooldown, "half-open")
        return self._state

    def allow(self, now: float) -> None:
        """Let one call start at `now`, or raise `CircuitOpen`."""
        state = self.state(now)
        if state == "open" or (state == "half-open" and self._trial):
            raise CircuitOpen(self._opened_at + self.cooldown if state == "open" else now)
        if state == "half-open":
            self._trial = True

    def succeeded(self, now: float) -> None:
        """The call that started answered: the dependency is up."""
        self._trial = False
        self._in_a_row = 0
        if self.state(now) != "closed":
            self._move(now, "closed")

    def failed(self, now: float) -> None:
        """The call that started failed transiently: a failed trial opens the breaker again."""
        self._trial = False
        self._in_a_row += 1
        state = self.state(now)
        if state == "half-open" or (state == "closed" and self._in_a_row >= self.failures):
            self._opened_at = now
            self._move(now, "open")

    async def call(self, op: Callable[[], Awaitable[T]]) -> T:
        """``await op()`` if the breaker allows it, recording how it went."""
        self.allow(self.clock())
        try:
            result = await op()
        except EtlError as error:
            if error.is_transient():
                self.failed(self.clock())
            else:
                self.succeeded(self.clock())
            raise
        except BaseException:
            self._trial = False  # a bug or a cancellation says nothing about the dependency
            raise
        self.succeeded(self.clock())
        return result

    def _move(self, at: float, state: State) -> None:
        self._state = state
        self.history.append((at, state))
