"""The circuit breaker (`etl.breaker`): closed, open after N transient failures in a row, one
trial when the cooldown is over, and what counts as a failure."""

from __future__ import annotations

import asyncio

import pytest

from etl import HttpStatus, NetworkError, RequestTimeout
from etl.breaker import CircuitBreaker, CircuitOpen


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def fail(error: Exception) -> None:
    raise error


async def answer() -> str:
    return "page"


@pytest.mark.asyncio
async def test_opens_after_n_failures_in_a_row_and_then_sends_nothing() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=3, cooldown=5.0, clock=clock)
    calls = 0

    async def dead() -> None:
        nonlocal calls
        calls += 1
        raise RequestTimeout("no answer")

    for _ in range(3):
        with pytest.raises(RequestTimeout):
            await breaker.call(dead)
    clock.now = 4.9
    with pytest.raises(CircuitOpen) as refused:
        await breaker.call(dead)
    assert calls == 3
    assert refused.value.until == 5.0 and not refused.value.is_transient()
    assert breaker.history == [(0.0, "open")]


@pytest.mark.asyncio
async def test_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker(failures=2, clock=Clock())
    for _ in range(5):
        with pytest.raises(NetworkError):
            await breaker.call(lambda: fail(NetworkError("reset")))
        assert await breaker.call(answer) == "page"
    assert breaker.state(0.0) == "closed" and breaker.history == []


@pytest.mark.asyncio
async def test_half_open_lets_one_trial_through_whose_outcome_decides() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=1, cooldown=5.0, clock=clock)
    with pytest.raises(RequestTimeout):
        await breaker.call(lambda: fail(RequestTimeout("x")))
    clock.now = 6.0
    assert breaker.state(clock.now) == "half-open"
    with pytest.raises(RequestTimeout):
        await breaker.call(lambda: fail(RequestTimeout("x")))  # the trial fails: open again
    clock.now = 10.0
    with pytest.raises(CircuitOpen):
        await breaker.call(answer)
    clock.now = 11.0
    assert await breaker.call(answer) == "page"  # the trial succeeds: closed
    assert breaker.history == [
        (0.0, "open"),
        (5.0, "half-open"),
        (6.0, "open"),
        (11.0, "half-open"),
        (11.0, "closed"),
    ]


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_only_one_trial_at_a_time_while_half_open() -> None:
    breaker = CircuitBreaker(failures=1, cooldown=1.0)
    with pytest.raises(RequestTimeout):
        await breaker.call(lambda: fail(RequestTimeout("x")))
    await asyncio.sleep(1.0)

    async def slow() -> str:
        await asyncio.sleep(2.0)
        return "late"

    trial = asyncio.create_task(breaker.call(slow))
    await asyncio.sleep(0.5)
    with pytest.raises(CircuitOpen):
        await breaker.call(answer)
    assert await trial == "late"
    assert breaker.state(asyncio.get_running_loop().time()) == "closed"


@pytest.mark.asyncio
async def test_a_permanent_error_is_an_answer_and_a_bug_changes_nothing() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=2, cooldown=5.0, clock=clock)
    with pytest.raises(NetworkError):
        await breaker.call(lambda: fail(NetworkError("reset")))
    with pytest.raises(HttpStatus):
        await breaker.call(lambda: fail(HttpStatus(404)))  # the dependency answered
    with pytest.raises(NetworkError):
        await breaker.call(lambda: fail(NetworkError("reset")))
    with pytest.raises(KeyError):
        await breaker.call(lambda: fail(KeyError("bug")))
    assert breaker.state(clock.now) == "closed"
    with pytest.raises(NetworkError):
        await breaker.call(lambda: fail(NetworkError("reset")))
    assert breaker.state(clock.now) == "open"


@pytest.mark.asyncio
async def test_a_cancelled_trial_frees_the_half_open_slot() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=1, cooldown=1.0, clock=clock)
    with pytest.raises(RequestTimeout):
        await breaker.call(lambda: fail(RequestTimeout("x")))
    clock.now = 1.0
    with pytest.raises(asyncio.CancelledError):
        await breaker.call(lambda: fail(asyncio.CancelledError()))  # type: ignore[arg-type]
    assert await breaker.call(answer) == "page"


@pytest.mark.parametrize(("failures", "cooldown"), [(0, 1.0), (1, 0.0), (1, -2.0)])
def test_a_breaker_needs_a_threshold_and_a_cooldown(failures: int, cooldown: float) -> None:
    with pytest.raises(ValueError, match=r"failures|cooldown"):
        CircuitBreaker(failures=failures, cooldown=cooldown)
