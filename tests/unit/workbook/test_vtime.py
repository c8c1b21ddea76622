"""Virtual time: sleeps return at once while the loop's clock jumps by exactly their length."""

from __future__ import annotations

import asyncio
import time

import pytest

from workbook import vtime
from workbook.vtime import Clock, Run, Timed, VirtualDeadlineExceeded, drive, run, run_timed


async def nap(seconds: float, value: str = "done") -> str:
    await asyncio.sleep(seconds)
    return value


def test_a_long_sleep_takes_its_seconds_of_virtual_time_and_none_of_real_time() -> None:
    started = time.perf_counter()
    timed = run_timed(nap(3600.0))
    assert isinstance(timed, Timed)
    assert (timed.value, timed.elapsed) == ("done", pytest.approx(3600.0))
    assert time.perf_counter() - started < 5.0  # an hour of virtual time, not of real time
    assert run(nap(2.5, "again")) == "again"


def test_each_run_starts_a_fresh_clock_at_zero() -> None:
    async def read_clock() -> float:
        await asyncio.sleep(7.0)
        return vtime.now()

    assert run(read_clock()) == pytest.approx(7.0)
    assert run(read_clock()) == pytest.approx(7.0)  # not 14: a new loop each call


def test_run_raises_what_the_coroutine_raised() -> None:
    async def broken() -> None:
        await asyncio.sleep(1.0)
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        run(broken())


def test_a_loop_that_never_ends_is_stopped_at_the_deadline() -> None:
    async def forever() -> None:
        while True:
            await asyncio.sleep(60.0)

    with pytest.raises(VirtualDeadlineExceeded, match=r"still running after 600 s of virtual"):
        run(forever(), deadline=600.0)
    assert issubclass(VirtualDeadlineExceeded, TimeoutError)


def test_a_coroutine_within_its_deadline_finishes_normally() -> None:
    timed = run_timed(nap(10.0), deadline=10.5)
    assert (timed.value, timed.elapsed) == ("done", pytest.approx(10.0))


def test_run_inside_a_running_loop_drives_virtual_time_in_a_worker_thread() -> None:
    """As in a Jupyter kernel, whose thread already runs an event loop."""

    async def kernel_cell() -> tuple[Timed[str], float]:
        before = asyncio.get_running_loop().time()
        timed = run_timed(nap(30.0))  # blocking call from inside the running loop
        return timed, asyncio.get_running_loop().time() - before

    timed, real_elapsed = asyncio.run(kernel_cell())
    assert (timed.value, timed.elapsed) == ("done", pytest.approx(30.0))
    assert real_elapsed < 5.0


def test_an_error_in_the_worker_thread_reaches_the_caller() -> None:
    async def broken() -> None:
        raise KeyError("missing")

    async def kernel_cell() -> None:
        run(broken())

    with pytest.raises(KeyError, match="missing"):
        asyncio.run(kernel_cell())


def test_drive_hands_back_the_error_instead_of_raising() -> None:
    async def make(clock: Clock) -> None:
        await asyncio.sleep(4.0)
        assert clock.now() == 4.0
        raise RuntimeError("gave up")

    outcome = drive(make)
    assert isinstance(outcome, Run)
    assert outcome.value is None and outcome.elapsed == pytest.approx(4.0)
    assert isinstance(outcome.error, RuntimeError) and str(outcome.error) == "gave up"


def test_drive_reports_each_virtual_wait_to_on_advance() -> None:
    waits: list[float] = []

    async def make(clock: Clock) -> float:
        for seconds in (0.2, 0.4, 0.8):
            await asyncio.sleep(seconds)
        return clock.now()

    outcome = drive(make, on_advance=waits.append)
    assert outcome.error is None and outcome.value == pytest.approx(1.4)
    assert waits == pytest.approx([0.2, 0.4, 0.8])


def test_drive_cancels_the_tasks_left_behind() -> None:
    cancelled: list[str] = []

    async def background() -> None:
        try:
            await asyncio.sleep(1e9)
        except asyncio.CancelledError:
            cancelled.append("background")
            raise

    async def make(clock: Clock) -> str:
        asyncio.get_running_loop().create_task(background())
        await asyncio.sleep(1.0)
        return "left it running"

    outcome = drive(make, deadline=5.0)
    assert outcome.value == "left it running" and outcome.error is None
    assert cancelled == ["background"]


def test_drive_reports_a_deadline_as_virtual_deadline_exceeded() -> None:
    async def make(clock: Clock) -> None:
        await asyncio.sleep(100.0)

    outcome = drive(make, deadline=2.0)
    assert isinstance(outcome.error, VirtualDeadlineExceeded)
    assert str(outcome.error) == "still running after 2 s of virtual time"
    assert outcome.elapsed == pytest.approx(2.0)


def test_now_outside_a_running_loop_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no running event loop"):
        vtime.now()
