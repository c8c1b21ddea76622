"""Virtual time: run a coroutine on an event loop whose clock jumps instead of waiting.

Backoff demos and checks sleep for seconds; on `looptime`'s loop an ``asyncio.sleep(5)``
returns at once while ``loop.time()`` advances by exactly 5. A Jupyter kernel already runs an
event loop in its thread, so `run` drives the virtual loop in a worker thread there; outside a
running loop it drives it in the calling thread. Each call gets a fresh loop starting at 0.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import looptime

T = TypeVar("T")


@dataclass(frozen=True)
class Timed(Generic[T]):
    """What a coroutine returned, and how much virtual time it took."""

    value: T
    elapsed: float


class VirtualDeadlineExceeded(TimeoutError):
    """The coroutine was still running after `deadline` virtual seconds."""


def run(coro: Coroutine[Any, Any, T], *, deadline: float | None = None) -> T:
    """Run `coro` to completion on virtual time and return its result (or raise its error)."""
    return run_timed(coro, deadline=deadline).value


def run_timed(coro: Coroutine[Any, Any, T], *, deadline: float | None = None) -> Timed[T]:
    """Like `run`, also reporting the virtual seconds that passed."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _drive(coro, deadline)
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["result"] = _drive(coro, deadline)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=worker, name="virtual-time", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: Timed[T] = box["result"]
    return result


def _drive(coro: Coroutine[Any, Any, T], deadline: float | None) -> Timed[T]:
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(_timed(coro, deadline))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def _timed(coro: Awaitable[T], deadline: float | None) -> Timed[T]:
    loop = asyncio.get_running_loop()
    start = loop.time()
    if deadline is None:
        value = await coro
    else:
        try:
            async with asyncio.timeout(deadline):
                value = await coro
        except TimeoutError:
            raise VirtualDeadlineExceeded(
                f"still running after {deadline:g} s of virtual time"
            ) from None
    return Timed(value=value, elapsed=loop.time() - start)


def now() -> float:
    """The running loop's clock: virtual seconds since the loop started, under `run`."""
    return asyncio.get_running_loop().time()
