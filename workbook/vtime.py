"""Virtual time: run a coroutine on an event loop whose clock jumps instead of waiting.

Backoff demos, self-checks and hidden probes sleep for seconds; on `looptime`'s loop an
``asyncio.sleep(5)`` returns at once while ``loop.time()`` advances by exactly 5. `drive` is
the one driver: a fresh loop starting at 0, an optional deadline in virtual seconds, every
task left behind cancelled and the loop closed, whatever the coroutine did. `run` and
`run_timed` wrap it for callers; a Jupyter kernel already runs an event loop in its thread,
so there they drive the virtual loop in a worker thread. Each call gets a fresh loop.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

if "pytest" in sys.modules:
    import looptime
else:
    # looptime imports pytest (about 0.4 s) only to define a fixture nothing here uses: outside
    # a pytest run, hide pytest for that import so `make progress` and a kernel start fast.
    sys.modules["pytest"] = None  # type: ignore[assignment]
    try:
        import looptime
    finally:
        del sys.modules["pytest"]

T = TypeVar("T")

#: Virtual seconds after which a check or probe is stopped: a retry loop that never gives up
#: spins through this in milliseconds of real time.
VIRTUAL_DEADLINE = 3600.0


@dataclass(frozen=True)
class Timed(Generic[T]):
    """What a coroutine returned, and how much virtual time it took."""

    value: T
    elapsed: float


@dataclass(frozen=True)
class Run(Generic[T]):
    """How a `drive` ended: its value or the exception it raised, and the virtual seconds."""

    value: T | None
    error: BaseException | None
    elapsed: float


class VirtualDeadlineExceeded(TimeoutError):
    """The coroutine was still running after `deadline` virtual seconds."""


@dataclass(frozen=True)
class Clock:
    """The virtual clock of the loop a `drive` runs on, readable from inside it."""

    loop: asyncio.AbstractEventLoop

    def now(self) -> float:
        return round(self.loop.time(), 6)


def drive(
    make: Callable[[Clock], Awaitable[T]],
    *,
    deadline: float | None = None,
    on_advance: Callable[[float], None] | None = None,
    on_moved: Callable[[], None] | None = None,
) -> Run[T]:
    """Run ``make(clock)`` on a fresh virtual-time loop in this thread. Never raises what the
    coroutine raised: it comes back in `Run.error` (a deadline as `VirtualDeadlineExceeded`).

    `on_advance(seconds)` is told each time the loop itself moves its clock forward to the next
    timer (the only way a virtual wait passes); whatever else sets the clock is not a wait,
    and `on_moved()` is told when it is seen."""
    loop = looptime.new_event_loop(start=0)
    clock = Clock(loop)
    if on_advance is not None:
        _watch_advances(loop, on_advance, on_moved or (lambda: None))

    async def main() -> T:
        if deadline is None:
            return await make(clock)
        try:
            async with asyncio.timeout(deadline):
                return await make(clock)
        except TimeoutError:
            raise VirtualDeadlineExceeded(
                f"still running after {deadline:g} s of virtual time"
            ) from None

    try:
        try:
            return Run(loop.run_until_complete(main()), None, loop.time())
        except BaseException as exc:  # handed back to the caller, which decides
            return Run(None, exc, loop.time())
    finally:
        _close(loop)


def _watch_advances(
    loop: asyncio.AbstractEventLoop,
    on_advance: Callable[[float], None],
    on_moved: Callable[[], None],
) -> None:
    """Wrap the loop's select, where looptime jumps its clock to the next timer: what the
    clock gained across that call is a wait (`on_advance`). looptime moves its clock there
    only, so a clock that reads differently at the next select was set by something else
    (`on_moved`, once per change)."""
    selector = loop._selector  # type: ignore[attr-defined]  # looptime's own hook point
    inner = selector.select
    left = [loop.time()]

    def select(timeout: float | None = None) -> Any:
        before = loop.time()
        if before != left[0]:
            on_moved()
        ready = inner(timeout)
        left[0] = loop.time()
        gained = left[0] - before
        if gained > 0:
            on_advance(gained)
        return ready

    selector.select = select


def _close(loop: asyncio.AbstractEventLoop) -> None:
    try:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except BaseException:  # a task that refuses to die must not keep the loop open
        pass
    finally:
        loop.close()


def run(coro: Coroutine[Any, Any, T], *, deadline: float | None = None) -> T:
    """Run `coro` to completion on virtual time and return its result (or raise its error)."""
    return run_timed(coro, deadline=deadline).value


def run_timed(coro: Coroutine[Any, Any, T], *, deadline: float | None = None) -> Timed[T]:
    """Like `run`, also reporting the virtual seconds that passed."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _timed(coro, deadline)
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["result"] = _timed(coro, deadline)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=worker, name="virtual-time", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: Timed[T] = box["result"]
    return result


def _timed(coro: Coroutine[Any, Any, T], deadline: float | None) -> Timed[T]:
    async def make(clock: Clock) -> T:
        return await coro

    outcome = drive(make, deadline=deadline)
    if outcome.error is not None:
        raise outcome.error
    return Timed(value=cast(T, outcome.value), elapsed=outcome.elapsed)


def now() -> float:
    """The running loop's clock: virtual seconds since the loop started, under `run`."""
    return asyncio.get_running_loop().time()
