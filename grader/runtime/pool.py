"""`RunnerPool`: a few `Runner`s graded on in parallel, one submission per runner at a time.

`spawn` starts the servers of as many runners as asked at once, so their imports overlap (a batch
starts one at its first cache miss, the rest once it knows how many it needs). Used by class grading
(`grader.classes.batch`) and by `grader.proofs.suite_validity`; a context manager, leaving it stops
every runner.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from grader import Isolation, Limits, Runner
from grader.runtime.forkclient import ForkServer
from grader.runtime.protocol import WallsMode

T = TypeVar("T")
R = TypeVar("R")


class RunnerPool:
    """`size` runners with the same limits and the same hidden folders (`hide`)."""

    def __init__(
        self,
        size: int,
        limits: Limits | None = None,
        *,
        hide: Sequence[Path] = (),
        walls: WallsMode | None = None,
        learner_tests: bool = True,
    ) -> None:
        """`learner_tests`: whether any will run (see `Runner`)."""
        hidden = tuple(str(p) for p in hide)
        self.runners = [
            Runner(limits, hide=hidden, walls=walls, learner_tests=learner_tests)
            for _ in range(max(1, size))
        ]
        self._free: queue.SimpleQueue[Runner] = queue.SimpleQueue()
        for runner in self.runners:
            self._free.put(runner)
        self._spawned: list[ForkServer] = []

    def __enter__(self) -> RunnerPool:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Start every runner's servers at once (their imports overlap) and wait for them."""
        self.spawn()
        self.wait_ready()

    def spawn(self, count: int | None = None) -> None:
        """Start the servers of the first `count` runners (default: every one) that are not
        running yet, without waiting: the caller may work meanwhile."""
        for runner in self.runners[:count]:
            self._spawned += runner.spawn()

    def warm(self) -> None:
        """Learner tests will run: every runner's server for them warms Hypothesis up. Only
        while no job is in flight (a request sent during a job is dropped)."""
        for runner in self.runners:
            runner.warm()

    def wait_ready(self) -> None:
        """Wait until every server `spawn` started has imported what it needs."""
        spawned, self._spawned = self._spawned, []
        for server in spawned:
            server.wait_ready()

    def isolation(self) -> Isolation:
        """The walls this machine gives (the same for every runner)."""
        return self.runners[0].isolation()

    @contextlib.contextmanager
    def runner(self) -> Iterator[Runner]:
        """A free runner, this thread's alone until the block ends."""
        runner = self._free.get()
        try:
            yield runner
        finally:
            self._free.put(runner)

    def map(self, fn: Callable[[Runner, T], R], items: Iterable[T]) -> list[R]:
        """``fn(runner, item)`` for every item, as many at a time as there are runners; the
        results in the order of `items` (the first exception raised is raised here). Free
        runners are taken first in, first out: n items never use more than the first n
        runners (those a batch started)."""

        def one(item: T) -> R:
            with self.runner() as runner:
                return fn(runner, item)

        with ThreadPoolExecutor(max_workers=len(self.runners)) as executor:
            return list(executor.map(one, items))

    def close(self) -> None:
        for runner in self.runners:
            runner.close()
